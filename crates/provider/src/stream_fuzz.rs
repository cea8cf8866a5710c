//! Fuzz targets (bolero) for the readers of streamed answers: the SSE body of an
//! OpenAI-compatible and of an Anthropic-compatible server, cut into chunks anywhere,
//! through the same `read_stream` a request uses.
//!
//! `cargo test` runs each target over its corpus (`__fuzz__/<target>/corpus` beside this
//! file: whole, cut and broken streams of both APIs, as the byte codes `body_from`
//! reads) and a bounded number of random inputs; a long run
//! is `BOLERO_RANDOM_TEST_TIME_MS=600000 cargo test -p rlm-orchestrator --lib stream_fuzz`.
//! Besides never panicking, a reader must never take a stream without its end marker
//! for a whole answer (issue 11, B8), and what it shows the live view is the answer.

use std::sync::atomic::AtomicUsize;
use std::sync::Mutex;

use super::anthropic::Messages;
use super::http::{read_stream, RawCompletion, Reading, WireFormat};
use super::openai::ChatCompletions;
use super::retry::AttemptError;

/// Whole events of both APIs' streams (either API's reader meets the other's too).
const EVENTS: &[&str] = &[
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"model\":\"m\"}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"FINAL(4\"}}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"2) é\\ud83d\\ude00\"}}]}\n\n",
    "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"ctx_grep\",\"arguments\":\"\"}}]}}]}\n\n",
    "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"pattern\\\": \\\"x\\\"}\"}}]}}]}\n\n",
    "data: {\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2},\"choices\":[]}\n\n",
    "data: [DONE]\n\n",
    "data: {\"error\":{\"message\":\"overloaded\"}}\n\n",
    ": keep-alive\n\n",
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":5}}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"FINAL(42) é\"}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"ctx_slice\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"start\\\": 1\"}}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n",
    "event: ping\ndata: {\"type\":\"ping\"}\n\n",
];

/// Pieces of events, for malformed ones.
const FRAGMENTS: &[&str] = &[
    "data: ",
    "data:",
    "event: ",
    "\n",
    "\r\n",
    "\r",
    "\n\n",
    "{",
    "}",
    "\"",
    "[DONE]",
    "message_stop",
    "{\"type\":\"message_stop\"",
    "{\"choices\":[{\"delta\":{\"content\":\"",
    "é",
    "\\ud83d",
    "id: 7\n",
    "retry: 10\n",
    "\u{1F600}",
    " ",
];

/// `bytes` as a stream body, and the chunk size it arrives in (from its first byte).
/// Each further byte is a whole event (low two bits 0–2: `EVENTS` by the other six), a
/// fragment (low bits 3: `FRAGMENTS` by the other six) or, past the fragments, itself —
/// so random inputs are mostly streams, with the breakage streams really have.
fn body_from(bytes: &[u8]) -> (Vec<u8>, usize) {
    let Some((&first, rest)) = bytes.split_first() else {
        return (Vec::new(), 1);
    };
    let mut body = Vec::new();
    for &b in rest {
        let index = usize::from(b >> 2);
        match b & 3 {
            3 => match FRAGMENTS.get(index) {
                Some(fragment) => body.extend_from_slice(fragment.as_bytes()),
                None => body.push(b),
            },
            _ => body.extend_from_slice(EVENTS[index % EVENTS.len()].as_bytes()),
        }
    }
    (body, 1 + usize::from(first % 64))
}

/// Reads `body`, delivered `chunk` bytes at a time, as an event-stream answer in wire
/// format `W`; returns the outcome and what the live view was shown.
fn read<W: WireFormat>(
    runtime: &tokio::runtime::Runtime,
    body: &[u8],
    chunk: usize,
) -> (Result<RawCompletion, AttemptError>, String) {
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        body.chunks(chunk).map(|c| Ok(c.to_vec())).collect();
    let response = http::Response::builder()
        .header("content-type", "text/event-stream")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .map(reqwest::Response::from)
        .expect("a response built from constant parts");
    let shown_text = Mutex::new(String::new());
    let sink = |delta: &str| {
        shown_text.lock().expect("not poisoned").push_str(delta);
    };
    let shown = AtomicUsize::new(0);
    let reading = Reading {
        endpoint: "http://127.0.0.1:1/v1/fuzz",
        max_bytes: crate::config::DEFAULT_MAX_REPLY_BYTES,
        on_delta: Some(&sink),
        shown: &shown,
    };
    let outcome = runtime.block_on(read_stream::<W>(response, reading));
    let shown_text = shown_text.into_inner().expect("not poisoned");
    (outcome, shown_text)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime for the fuzz target")
}

/// The checks both formats share: an answer taken as whole was ended by `end_marker`,
/// and the live view was shown exactly its text.
fn check(outcome: Result<RawCompletion, AttemptError>, shown: &str, body: &[u8], end_marker: &str) {
    match outcome {
        Ok(raw) => {
            let body = String::from_utf8_lossy(body);
            assert!(
                body.contains(end_marker),
                "a stream without {end_marker} was taken as a whole answer: {raw:?}"
            );
            assert_eq!(raw.text, shown);
        }
        Err(AttemptError::Status { .. }) => panic!("a stream read cannot fail with a status"),
        Err(_) => {}
    }
}

#[test]
fn openai_stream() {
    let runtime = runtime();
    bolero::check!().for_each(|bytes: &[u8]| {
        let (body, chunk) = body_from(bytes);
        let (outcome, shown) = read::<ChatCompletions>(&runtime, &body, chunk);
        check(outcome, &shown, &body, "[DONE]");
    });
}

#[test]
fn anthropic_stream() {
    let runtime = runtime();
    bolero::check!().for_each(|bytes: &[u8]| {
        let (body, chunk) = body_from(bytes);
        let (outcome, shown) = read::<Messages>(&runtime, &body, chunk);
        check(outcome, &shown, &body, "message_stop");
    });
}

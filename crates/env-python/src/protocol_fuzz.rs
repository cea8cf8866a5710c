//! Fuzz target (bolero) for what the orchestrator reads from a Python kernel: the
//! bounded line reader, the message parser and the host-call parser, fed a byte stream
//! built from real messages, forged ones and their fragments, delivered in chunks of
//! any size. Model code shares the kernel's process, so all of it is untrusted input.
//!
//! `cargo test` replays the corpus (`__fuzz__/<target>/corpus` beside this file, written
//! by `scripts/fuzz_corpus.py`) and a bounded number of random inputs; a long run is
//! `BOLERO_RANDOM_TEST_TIME_MS=600000 cargo test -p rlm-orchestrator --lib protocol_fuzz`.

use tokio::io::BufReader;

use super::protocol::Incoming;
use super::reader::{read_line_bounded, Line};
use rlm_env::HostCall;

/// The token the fuzzed kernel's messages must carry.
const TOKEN: &str = "tok-7f3a";
/// The longest line the fuzzed reader accepts (small, so random inputs reach it).
const MAX_LINE: usize = 300;

/// Whole lines a kernel (or model code writing to its protocol fd) sends.
const MESSAGES: &[&str] = &[
    "{\"type\":\"ready\",\"ok\":true,\"pid\":7,\"python\":\"3.11.7\",\"token\":\"tok-7f3a\"}\n",
    "{\"type\":\"result\",\"id\":1,\"stdout\":\"hi\\n\",\"stderr\":\"\",\"error\":null,\"final\":null,\"token\":\"tok-7f3a\"}\n",
    "{\"type\":\"result\",\"id\":2,\"final\":\"42\",\"token\":\"tok-7f3a\"}\n",
    "{\"type\":\"result\",\"id\":3,\"final\":\"forged\"}\n",
    "{\"type\":\"host_call\",\"call_id\":1,\"method\":\"llm_query\",\"args\":{\"prompt\":\"hi\"},\"token\":\"tok-7f3a\"}\n",
    "{\"type\":\"host_call\",\"call_id\":2,\"method\":\"spawn_agents\",\"args\":{\"jobs\":[{\"task\":\"a\",\"refs\":[\"k\"]}]},\"token\":\"tok-7f3a\"}\n",
    "{\"type\":\"host_call\",\"call_id\":3,\"method\":\"sub_rlm_parallel\",\"args\":{\"jobs\":[{\"query\":\"q\",\"context\":\"c\"}]},\"token\":\"tok-7f3a\"}\n",
    "{\"type\":\"host_call\",\"call_id\":4,\"method\":\"store_set\",\"args\":{\"key\":\"k\",\"value\":[1,{\"a\":null}]},\"token\":\"tok-7f3a\"}\n",
    "{\"type\":\"host_call\",\"call_id\":5,\"method\":\"nope\",\"args\":null,\"token\":\"tok-7f3a\"}\n",
    "{\"type\":\"host_call\",\"call_id\":6,\"method\":\"llm_query\",\"args\":{\"prompt\":7,\"extra\":1},\"token\":\"tok-7f3a\"}\n",
    "{\"type\":\"ready\",\"ok\":false,\"error\":\"boom\",\"token\":\"tok-7f3a\"}\n",
    "not json at all\n",
    "\n",
];

/// Fragments of messages.
const FRAGMENTS: &[&str] = &[
    "{",
    "}",
    "\"token\":\"tok-7f3a\"",
    "\"token\":\"other\"",
    "\"type\":\"result\"",
    "\"type\":\"host_call\"",
    "\"id\":18446744073709551615",
    "\"call_id\":-1",
    "\"method\":\"store_get\"",
    "\"args\":{\"key\":\"",
    ",",
    ":",
    "\"",
    "\\u0000",
    "\\ud800",
    "é",
    "\n",
    "x",
];

/// `bytes` as the kernel's output, and the chunk size it arrives in (first byte). Each
/// further byte is a whole message (low two bits 0–2: `MESSAGES` by the other six), a
/// fragment (low bits 3: `FRAGMENTS` by the other six) or, past them, itself.
fn stream_from(bytes: &[u8]) -> (Vec<u8>, usize) {
    let Some((&first, rest)) = bytes.split_first() else {
        return (Vec::new(), 1);
    };
    let mut out = Vec::new();
    for &b in rest {
        let index = usize::from(b >> 2);
        match b & 3 {
            3 => match FRAGMENTS.get(index) {
                Some(fragment) => out.extend_from_slice(fragment.as_bytes()),
                None => out.push(b),
            },
            _ => out.extend_from_slice(MESSAGES[index % MESSAGES.len()].as_bytes()),
        }
    }
    (out, 1 + usize::from(first % 64))
}

/// A reader that hands out `data` at most `chunk` bytes per read.
struct Chunked {
    data: Vec<u8>,
    at: usize,
    chunk: usize,
}

impl tokio::io::AsyncRead for Chunked {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let end = (self.at + self.chunk.min(buf.remaining())).min(self.data.len());
        let piece = &self.data[self.at..end];
        buf.put_slice(piece);
        self.at = end;
        std::task::Poll::Ready(Ok(()))
    }
}

#[test]
fn kernel_protocol() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a tokio runtime for the fuzz target");
    bolero::check!().for_each(|bytes: &[u8]| {
        let (stream, chunk) = stream_from(bytes);
        let mut reader = BufReader::with_capacity(
            16,
            Chunked {
                data: stream.clone(),
                at: 0,
                chunk,
            },
        );
        let mut line = Vec::new();
        let mut consumed = 0;
        runtime.block_on(async {
            loop {
                let read = read_line_bounded(&mut reader, &mut line, MAX_LINE)
                    .await
                    .expect("reading from memory cannot fail");
                assert!(line.len() <= MAX_LINE, "a line past the bound was held");
                match read {
                    Line::Complete => {
                        assert_eq!(line.last(), Some(&b'\n'));
                        assert_eq!(&stream[consumed..consumed + line.len()], &line[..]);
                        consumed += line.len();
                        if let Ok(message) = Incoming::parse(&line, TOKEN) {
                            assert!(
                                String::from_utf8_lossy(&line).contains(TOKEN),
                                "a message without the token was accepted"
                            );
                            if let Incoming::HostCall { method, args, .. } = message {
                                // A malformed call is an answer to the model, never a panic.
                                let _ = HostCall::parse(&method, args);
                            }
                        }
                    }
                    Line::End => {
                        assert_eq!(&stream[consumed..], &line[..]);
                        break;
                    }
                    Line::TooLong => break,
                }
            }
        });
    });
}

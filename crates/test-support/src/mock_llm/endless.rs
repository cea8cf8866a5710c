//! A reply that never ends ([`ReplyKind::Endless`](super::ReplyKind::Endless)): a
//! runaway server that streams text deltas for ever, or a whole JSON body whose text
//! never closes — to show that a client bounds what it reads (in bytes and in time).
//!
//! The bytes go out as HTTP chunks, in pieces of the reply's `chunk_bytes` with its
//! `chunk_delay` between them when it sets them (one byte a second: a slow drip), else
//! a piece of text at a time. The mock itself stops after
//! [`ENDLESS_LIMIT_BYTES`] or [`ENDLESS_LIMIT`], whichever comes first, so a client
//! that never hangs up cannot keep it busy for ever.

use std::io;

use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::script::{MockReply, ENDLESS_LIMIT, ENDLESS_LIMIT_BYTES};
use super::Api;

/// Sends the endless reply: its head (status line, headers, the body's opening),
/// then `piece_bytes` of text at a time until the client hangs up or a limit is
/// reached. Always closes the connection after (the body never ended).
pub(crate) async fn send(
    stream: &mut TcpStream,
    api: Api,
    model: &str,
    reply: &MockReply,
    piece_bytes: usize,
    streamed: bool,
) -> io::Result<bool> {
    let piece = "x".repeat(piece_bytes);
    let (content_type, opening, repeated) = if streamed {
        let (opening, delta) = stream_parts(api, model, &piece);
        ("text/event-stream", opening, delta)
    } else {
        ("application/json", body_opening(api, model), piece)
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\nconnection: close\r\nx-mock-llm: endless\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await?;
    let mut pieces = Pieces::new(reply);
    // A client hanging up ends the reply: the write fails, and so does this.
    pieces.send(stream, opening.as_bytes()).await?;
    let started = Instant::now();
    while pieces.sent < ENDLESS_LIMIT_BYTES && started.elapsed() < ENDLESS_LIMIT {
        pieces.send(stream, repeated.as_bytes()).await?;
    }
    Ok(false)
}

/// Writes bytes as HTTP chunks of the reply's size and pace.
struct Pieces {
    size: Option<usize>,
    pause: std::time::Duration,
    sent: u64,
}

impl Pieces {
    fn new(reply: &MockReply) -> Self {
        Self {
            size: reply.chunk_bytes,
            pause: reply.chunk_delay,
            sent: 0,
        }
    }

    async fn send(&mut self, stream: &mut TcpStream, bytes: &[u8]) -> io::Result<()> {
        let size = self.size.unwrap_or(bytes.len()).max(1);
        for part in bytes.chunks(size) {
            let mut chunk = format!("{:x}\r\n", part.len()).into_bytes();
            chunk.extend_from_slice(part);
            chunk.extend_from_slice(b"\r\n");
            stream.write_all(&chunk).await?;
            self.sent = self.sent.saturating_add(part.len() as u64);
            if !self.pause.is_zero() {
                tokio::time::sleep(self.pause).await;
            }
        }
        Ok(())
    }
}

/// The events before the text (OpenAI's role chunk; Anthropic's `message_start` and
/// the text block's start), and the one text delta repeated for ever.
fn stream_parts(api: Api, model: &str, piece: &str) -> (String, String) {
    match api {
        Api::OpenAi | Api::Responses => {
            let chunk = |delta: serde_json::Value| {
                let value = json!({
                    "id": "chatcmpl-mock-endless",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": null}],
                });
                format!("data: {value}\n\n")
            };
            (
                chunk(json!({"role": "assistant", "content": ""})),
                chunk(json!({"content": piece})),
            )
        }
        Api::Anthropic => {
            let event =
                |name: &str, value: serde_json::Value| format!("event: {name}\ndata: {value}\n\n");
            let start = json!({"type": "message_start", "message": {
                "id": "msg_mock_endless", "type": "message", "role": "assistant",
                "model": model, "content": [], "stop_reason": null,
            }});
            let block = json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}});
            let delta = json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": piece}});
            (
                event("message_start", start) + &event("content_block_start", block),
                event("content_block_delta", delta),
            )
        }
    }
}

/// A whole answer's JSON up to the opening quote of its text, which never closes.
fn body_opening(api: Api, model: &str) -> String {
    match api {
        Api::OpenAi | Api::Responses => format!(
            r#"{{"id":"chatcmpl-mock-endless","object":"chat.completion","created":0,"model":{},"choices":[{{"index":0,"message":{{"role":"assistant","content":""#,
            json!(model)
        ),
        Api::Anthropic => format!(
            r#"{{"id":"msg_mock_endless","type":"message","role":"assistant","model":{},"content":[{{"type":"text","text":""#,
            json!(model)
        ),
    }
}

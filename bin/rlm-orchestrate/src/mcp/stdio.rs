//! The MCP server's stdio, framed by us before `rmcp` sees it: every line that is not
//! JSON gets a JSON-RPC `-32700` parse error with `id: null` (rmcp drops it without a
//! word, and the client then waits for ever), and so does a line over
//! [`MAX_LINE_BYTES`], which is discarded as it arrives, never buffered whole. The
//! server goes on after either. Every other line is handed to rmcp as it came.
//!
//! One task writes stdout: rmcp's replies and these errors reach it as whole lines
//! over one channel, so an error is never written in the middle of a reply.

use serde::Serialize;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The longest line (one JSON-RPC message) read from stdin: 16 MiB, as rmcp's own cap.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// JSON-RPC's code for a message that is not JSON.
const PARSE_ERROR: i64 = -32700;

/// Bytes of the pipes between this framing and rmcp.
const PIPE_BYTES: usize = 1 << 16;

/// A JSON-RPC error response with a null id, for a message that could not be read.
#[derive(Debug, Serialize)]
struct ParseErrorResponse {
    jsonrpc: &'static str,
    id: Option<()>,
    error: ErrorObject,
}

/// The `error` member of [`ParseErrorResponse`].
#[derive(Debug, Serialize)]
struct ErrorObject {
    code: i64,
    message: String,
}

impl ParseErrorResponse {
    fn line(message: String) -> Vec<u8> {
        let response = Self {
            jsonrpc: "2.0",
            id: None,
            error: ErrorObject {
                code: PARSE_ERROR,
                message,
            },
        };
        // A struct of strings and numbers always serialises.
        let mut line = serde_json::to_vec(&response).unwrap_or_default();
        line.push(b'\n');
        line
    }
}

/// The framed stdio: what rmcp reads and writes, and the tasks that join it to the
/// real stdin and stdout.
pub struct Framed {
    /// What rmcp reads: the lines of stdin that are JSON.
    pub read: tokio::io::DuplexStream,
    /// What rmcp writes: its messages, on their way to stdout.
    pub write: tokio::io::DuplexStream,
    /// The task writing stdout; await it after the session so every reply is out.
    pub writer: JoinHandle<()>,
}

/// Frames `input` and `output` (stdin and stdout) for rmcp.
pub fn frame<R, W>(input: R, output: W) -> Framed
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (rmcp_read, feed) = tokio::io::duplex(PIPE_BYTES);
    let (rmcp_write, drain) = tokio::io::duplex(PIPE_BYTES);
    let (lines, outgoing) = mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(read_input(BufReader::new(input), feed, lines.clone()));
    tokio::spawn(forward_replies(BufReader::new(drain), lines));
    let writer = tokio::spawn(write_output(outgoing, output));
    Framed {
        read: rmcp_read,
        write: rmcp_write,
        writer,
    }
}

/// One line read from stdin, bounded.
enum Line {
    /// A whole line (its newline stripped) in the buffer.
    Whole,
    /// A line over [`MAX_LINE_BYTES`]: discarded; its length so far.
    TooLong(u64),
    /// The end of the input.
    End,
}

/// Reads stdin line by line: JSON goes to rmcp, anything else is answered with a
/// parse error. Ends at the end of stdin (or a read error), closing rmcp's input.
async fn read_input<R: AsyncRead + Unpin>(
    mut input: BufReader<R>,
    mut feed: tokio::io::DuplexStream,
    replies: mpsc::UnboundedSender<Vec<u8>>,
) {
    let mut line = Vec::new();
    loop {
        line.clear();
        let message = match read_line(&mut input, &mut line).await {
            Ok(Line::End) | Err(_) => break,
            Ok(Line::TooLong(bytes)) => format!(
                "Parse error: a message of over {bytes} bytes is longer than the {MAX_LINE_BYTES} bytes this server reads; it was discarded"
            ),
            Ok(Line::Whole) => {
                let text = line.strip_suffix(b"\r").unwrap_or(&line);
                if text.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match serde_json::from_slice::<serde::de::IgnoredAny>(text) {
                    Ok(_) => {
                        let forwarded = async {
                            feed.write_all(text).await?;
                            feed.write_all(b"\n").await
                        };
                        if forwarded.await.is_err() {
                            break;
                        }
                        continue;
                    }
                    Err(e) => format!("Parse error: the message is not JSON ({e})"),
                }
            }
        };
        tracing::debug!("{message}");
        if replies.send(ParseErrorResponse::line(message)).is_err() {
            break;
        }
    }
    let _ = feed.shutdown().await;
}

/// Reads one line into `line` (without its newline), never holding more than
/// [`MAX_LINE_BYTES`] of it.
async fn read_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<Line> {
    let mut seen = 0u64;
    let mut too_long = false;
    loop {
        let buffer = input.fill_buf().await?;
        if buffer.is_empty() {
            // A last line without a newline is still a message.
            return Ok(if too_long {
                Line::TooLong(seen)
            } else if line.is_empty() {
                Line::End
            } else {
                Line::Whole
            });
        }
        let (take, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (at, true),
            None => (buffer.len(), false),
        };
        seen += take as u64;
        if !too_long && line.len() + take > MAX_LINE_BYTES {
            too_long = true;
            line.clear();
        }
        if !too_long {
            line.extend_from_slice(&buffer[..take]);
        }
        input.consume(take + usize::from(done));
        if done {
            return Ok(if too_long {
                Line::TooLong(seen)
            } else {
                Line::Whole
            });
        }
    }
}

/// Hands each line rmcp writes to the stdout writer.
async fn forward_replies(
    mut drain: BufReader<tokio::io::DuplexStream>,
    lines: mpsc::UnboundedSender<Vec<u8>>,
) {
    loop {
        let mut line = Vec::new();
        match drain.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if lines.send(line).is_err() {
                    break;
                }
            }
        }
    }
}

/// Writes whole lines to stdout, one at a time, flushing each.
async fn write_output<W: AsyncWrite + Unpin>(
    mut outgoing: mpsc::UnboundedReceiver<Vec<u8>>,
    mut output: W,
) {
    while let Some(line) = outgoing.recv().await {
        let written = async {
            output.write_all(&line).await?;
            output.flush().await
        };
        if written.await.is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines_of(input: &[u8]) -> Vec<(String, usize)> {
        let mut reader = BufReader::new(input);
        let mut out = Vec::new();
        let mut line = Vec::new();
        loop {
            line.clear();
            match read_line(&mut reader, &mut line).await.unwrap() {
                Line::End => break,
                Line::Whole => out.push((String::from_utf8_lossy(&line).into_owned(), 0)),
                Line::TooLong(n) => out.push((String::new(), n as usize)),
            }
        }
        out
    }

    #[tokio::test]
    async fn lines_are_bounded_and_the_next_one_is_read_whole() {
        let mut input = vec![b'x'; MAX_LINE_BYTES + 10];
        input.extend_from_slice(b"\n{\"a\":1}\nlast");
        let lines = lines_of(&input).await;
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].1, MAX_LINE_BYTES + 10);
        assert_eq!(lines[1].0, "{\"a\":1}");
        assert_eq!(lines[2].0, "last");
    }

    #[test]
    fn a_parse_error_has_a_null_id() {
        let line = ParseErrorResponse::line("Parse error: x".into());
        let value: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error: x"}})
        );
    }
}

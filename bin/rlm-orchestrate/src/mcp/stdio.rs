//! The MCP server's stdio transport. It is ours, not rmcp's, for what rmcp's does not
//! do (issue 49, item 9):
//!
//! - **Every line is answered or is a message.** A line that is not JSON, is not UTF-8
//!   inside a string, nests deeper than serde_json's limit, or is over
//!   [`MAX_LINE_BYTES`] (discarded as it arrives, never buffered whole) gets one
//!   JSON-RPC `-32700` parse error with `id: null`; JSON that is not a JSON-RPC
//!   message gets `-32600` (with its `id` when it has a usable one; a notification,
//!   which has none, is never answered). rmcp drops such lines without a word, and
//!   the client then waits for ever. A line is parsed once, into the very type rmcp
//!   would have parsed, so what we accept is exactly what rmcp serves.
//! - **Back-pressure.** At most [`MAX_REQUESTS_IN_FLIGHT`] requests are between being
//!   read and having their reply written to stdout; with every slot taken, stdin is
//!   not read. A client that sends requests without reading stdout therefore fills
//!   its pipe and blocks, instead of growing the server's queues (rmcp spawns a task
//!   per reply and keeps reading): memory stays bounded by the slots.
//!
//! One task writes stdout, whole lines one at a time, so an error is never written in
//! the middle of a reply.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

/// The longest line (one JSON-RPC message) read from stdin: 16 MiB, as rmcp's own cap.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// Most requests read and not yet answered on stdout; beyond them stdin is not read.
pub const MAX_REQUESTS_IN_FLIGHT: usize = 64;

/// Lines waiting for the stdout writer (each holds a slot or answers a request that
/// holds one, so this only smooths bursts).
const QUEUED_LINES: usize = 16;

/// JSON-RPC's code for a message that is not JSON.
const PARSE_ERROR: i64 = -32700;

/// JSON-RPC's code for JSON that is not a request, notification or response.
const INVALID_REQUEST: i64 = -32600;

/// The UTF-8 byte order mark, which JSON text may start with (RFC 8259 §8.1).
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The framed stdio: the transport rmcp serves, and the task writing stdout.
pub struct Framed {
    /// What rmcp reads messages from and writes replies to.
    pub transport: StdioTransport,
    /// The task writing stdout; await it after the session so every reply is out.
    pub writer: JoinHandle<()>,
}

/// Frames `input` and `output` (stdin and stdout) for rmcp.
pub fn frame<R, W>(input: R, output: W) -> Framed
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let slots = Arc::new(Slots::new(MAX_REQUESTS_IN_FLIGHT));
    let (to_rmcp, incoming) = mpsc::channel(1);
    let (outgoing, lines) = mpsc::channel(QUEUED_LINES);
    tokio::spawn(read_input(
        BufReader::new(input),
        to_rmcp,
        outgoing.clone(),
        Arc::clone(&slots),
    ));
    let writer = tokio::spawn(write_output(lines, output, slots));
    Framed {
        transport: StdioTransport { incoming, outgoing },
        writer,
    }
}

/// The transport rmcp serves: messages the reader parsed, replies to the writer.
pub struct StdioTransport {
    incoming: mpsc::Receiver<ClientJsonRpcMessage>,
    outgoing: mpsc::Sender<Outgoing>,
}

/// Why a message could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The message did not serialise (it never happens with rmcp's types).
    #[error("failed to serialise an MCP message: {0}")]
    Serialise(#[from] serde_json::Error),
    /// Stdout is closed: the client is gone.
    #[error("failed to write an MCP message: stdout is closed (the client has gone)")]
    Closed,
}

impl Transport<RoleServer> for StdioTransport {
    type Error = SendError;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl std::future::Future<Output = Result<(), SendError>> + Send + 'static {
        let outgoing = self.outgoing.clone();
        async move {
            let answers = match &item {
                JsonRpcMessage::Response(response) => Some(response.id.clone()),
                JsonRpcMessage::Error(error) => error.id.clone(),
                JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => None,
            };
            let mut line = serde_json::to_vec(&item)?;
            line.push(b'\n');
            let line = Outgoing {
                line,
                answers,
                slot: None,
            };
            outgoing.send(line).await.map_err(|_| SendError::Closed)
        }
    }

    fn receive(
        &mut self,
    ) -> impl std::future::Future<Output = Option<ClientJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), SendError> {
        Ok(())
    }
}

/// A line on its way to stdout, and what writing it frees.
struct Outgoing {
    line: Vec<u8>,
    /// The request this line answers: its slot is freed once the line is written.
    answers: Option<RequestId>,
    /// A slot held by this line itself (the reader's own error replies).
    slot: Option<OwnedSemaphorePermit>,
}

/// The slots of requests in flight: one is taken before each line is read, kept by a
/// request until its reply is written, given back at once for anything else.
struct Slots {
    free: Arc<Semaphore>,
    held: Mutex<HashMap<RequestId, OwnedSemaphorePermit>>,
}

impl Slots {
    fn new(count: usize) -> Self {
        Self {
            free: Arc::new(Semaphore::new(count)),
            held: Mutex::new(HashMap::new()),
        }
    }

    /// Waits for a free slot; `None` once the writer has gone.
    async fn take(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.free).acquire_owned().await.ok()
    }

    /// Keeps `slot` for request `id` until its reply is written; `false` (and the slot
    /// back) when a request with that id is already in flight.
    fn hold(&self, id: RequestId, slot: OwnedSemaphorePermit) -> bool {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.contains_key(&id) {
            return false;
        }
        held.insert(id, slot);
        true
    }

    /// Frees the slot of request `id` (answered, or cancelled by the client, whose
    /// reply rmcp then never sends).
    fn release(&self, id: &RequestId) {
        let slot = self
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        drop(slot);
    }

    /// No more slots: the reader stops.
    fn close(&self) {
        self.free.close();
    }
}

/// What one line of stdin is.
#[derive(Debug)]
enum Incoming {
    /// A message for rmcp (boxed: it is far larger than the other variants).
    Message(Box<ClientJsonRpcMessage>),
    /// Nothing to do: a blank line, or a notification that is not one rmcp reads
    /// (a notification is never answered).
    Ignore,
    /// A line to answer with this error reply.
    Refuse(Vec<u8>),
}

/// Reads stdin line by line: messages go to rmcp, anything else is answered. Ends at
/// the end of stdin (or a read error), or when rmcp or the writer has gone.
async fn read_input<R: AsyncRead + Unpin>(
    mut input: BufReader<R>,
    to_rmcp: mpsc::Sender<ClientJsonRpcMessage>,
    outgoing: mpsc::Sender<Outgoing>,
    slots: Arc<Slots>,
) {
    let mut line = Vec::new();
    // A slot before every read: with all of them taken, stdin waits.
    while let Some(slot) = slots.take().await {
        line.clear();
        let incoming = match read_line(&mut input, &mut line).await {
            Ok(Line::End) | Err(_) => break,
            Ok(Line::TooLong(bytes)) => Incoming::Refuse(error_line(
                Value::Null,
                PARSE_ERROR,
                format!(
                    "Parse error: a message of over {bytes} bytes is longer than the {MAX_LINE_BYTES} bytes this server reads; it was discarded"
                ),
            )),
            Ok(Line::Whole) => classify(&line),
        };
        let message = match incoming {
            Incoming::Ignore => continue,
            Incoming::Refuse(reply) => {
                let reply = Outgoing {
                    line: reply,
                    answers: None,
                    slot: Some(slot),
                };
                if outgoing.send(reply).await.is_err() {
                    break;
                }
                continue;
            }
            Incoming::Message(message) => *message,
        };
        match &message {
            JsonRpcMessage::Request(request) => {
                if !slots.hold(request.id.clone(), slot) {
                    let reply = Outgoing {
                        line: error_line(
                            id_value(&request.id),
                            INVALID_REQUEST,
                            format!(
                                "Invalid Request: a request with id {} is already in flight; give each request its own id",
                                id_value(&request.id)
                            ),
                        ),
                        answers: None,
                        slot: None,
                    };
                    if outgoing.send(reply).await.is_err() {
                        break;
                    }
                    continue;
                }
            }
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                {
                    if let Some(id) = &cancelled.params.request_id {
                        slots.release(id);
                    }
                }
            }
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => {}
        }
        if to_rmcp.send(message).await.is_err() {
            break;
        }
    }
}

/// What a whole line of stdin (its newline stripped) is.
fn classify(line: &[u8]) -> Incoming {
    let text = line.strip_suffix(b"\r").unwrap_or(line);
    let text = text.strip_prefix(UTF8_BOM).unwrap_or(text);
    if text.iter().all(u8::is_ascii_whitespace) {
        return Incoming::Ignore;
    }
    let error = match serde_json::from_slice::<ClientJsonRpcMessage>(text) {
        Ok(message) => return Incoming::Message(Box::new(message)),
        Err(error) => error,
    };
    // Not a message: JSON of another shape, or not JSON at all (bytes that are not
    // UTF-8 in a string, nesting past the recursion limit, …), whichever error the
    // message type reported first.
    let value = match serde_json::from_slice::<Value>(text) {
        Ok(value) => value,
        Err(not_json) => {
            tracing::debug!("MCP input is not JSON: {not_json}");
            return Incoming::Refuse(error_line(
                Value::Null,
                PARSE_ERROR,
                format!("Parse error: the message is not JSON ({not_json})"),
            ));
        }
    };
    let id = value.get("id");
    if value.get("method").is_some() && id.is_none() {
        tracing::debug!("ignoring a notification this server does not read: {error}");
        return Incoming::Ignore;
    }
    let id = id
        .filter(|id| id.is_string() || id.is_i64())
        .cloned()
        .unwrap_or(Value::Null);
    tracing::debug!("MCP input is not a JSON-RPC message: {error}");
    Incoming::Refuse(error_line(
        id,
        INVALID_REQUEST,
        format!("Invalid Request: not a JSON-RPC 2.0 message of MCP ({error})"),
    ))
}

/// A request id as JSON.
fn id_value(id: &RequestId) -> Value {
    serde_json::to_value(id).unwrap_or(Value::Null)
}

/// A JSON-RPC error response (`id` null when the message's id could not be read).
#[derive(Debug, Serialize)]
struct ErrorResponse {
    jsonrpc: &'static str,
    id: Value,
    error: ErrorObject,
}

/// The `error` member of [`ErrorResponse`].
#[derive(Debug, Serialize)]
struct ErrorObject {
    code: i64,
    message: String,
}

/// The line of an error response.
fn error_line(id: Value, code: i64, message: String) -> Vec<u8> {
    let response = ErrorResponse {
        jsonrpc: "2.0",
        id,
        error: ErrorObject { code, message },
    };
    // A struct of strings, numbers and JSON values always serialises.
    let mut line = serde_json::to_vec(&response).unwrap_or_default();
    line.push(b'\n');
    line
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

/// Writes whole lines to stdout, one at a time, flushing each, and frees the slot each
/// one held. When stdout fails (the client has gone) the slots close, which ends the
/// reader.
async fn write_output<W: AsyncWrite + Unpin>(
    mut lines: mpsc::Receiver<Outgoing>,
    mut output: W,
    slots: Arc<Slots>,
) {
    while let Some(outgoing) = lines.recv().await {
        let written = async {
            output.write_all(&outgoing.line).await?;
            output.flush().await
        };
        if written.await.is_err() {
            break;
        }
        if let Some(id) = &outgoing.answers {
            slots.release(id);
        }
        drop(outgoing.slot);
    }
    slots.close();
}

#[cfg(test)]
mod tests;

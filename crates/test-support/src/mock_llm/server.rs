//! The mock's HTTP/1.1 server: accept, parse, record, answer.
//!
//! Hand-written on a tokio `TcpListener` because the mock must stream SSE with pauses,
//! split writes mid-character, hang and drop connections on purpose, and keep
//! connections alive for latency benchmarks (which also need `TCP_NODELAY` and a deep
//! listen backlog, or every figure measured against it is wrong).

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinSet;

use super::script::{MockReply, MockRule, MockScript, MockUsage, ReplyKind, StreamCut, WhenEmpty};
use super::{answer, wire, Api, RecordedRequest, AUTH_HEADERS};

/// Pending connections the kernel queues before `accept`.
pub const LISTEN_BACKLOG: u32 = 1024;
/// Largest request line plus headers accepted.
pub const HEAD_MAX_BYTES: usize = 64 * 1024;
/// Largest request body accepted.
pub const BODY_MAX_BYTES: usize = 256 * 1024 * 1024;
/// An idle keep-alive connection is closed after this long.
pub const IDLE_TIMEOUT_SECS: u64 = 300;
/// Body of the 500 sent when the script has nothing left.
pub const EXHAUSTED_MESSAGE: &str =
    "script exhausted: the mock-llm script has no reply left for this request";

/// State shared by the connections and the control handles.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    script: MockScript,
    /// Requests for a completion (chat, messages, responses).
    requests: VecDeque<RecordedRequest>,
    received: u64,
    /// Every other request (`/v1/models`, `/props`, health checks): kept apart, so the
    /// tests' counts of model calls do not depend on what a client asks besides.
    side_requests: VecDeque<RecordedRequest>,
    /// Side requests arrived and not answered yet.
    side_in_flight: u64,
    /// Side requests answered (or whose connection was lost) so far.
    side_answered: u64,
    connections: u64,
}

impl Shared {
    pub(crate) fn new(script: MockScript) -> Self {
        Self {
            state: Mutex::new(State {
                script,
                requests: VecDeque::new(),
                received: 0,
                side_requests: VecDeque::new(),
                side_in_flight: 0,
                side_answered: 0,
                connections: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere cannot leave this state half-updated in a harmful way.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().requests.iter().cloned().collect()
    }

    pub(crate) fn request_count(&self) -> u64 {
        self.lock().received
    }

    pub(crate) fn side_requests(&self) -> Vec<RecordedRequest> {
        self.lock().side_requests.iter().cloned().collect()
    }

    /// Keeps a request that asks for no completion, apart from the model calls; it is
    /// in flight until [`Shared::side_answered`].
    fn record_side(&self, request: RecordedRequest) -> RecordedRequest {
        let mut state = self.lock();
        state.side_in_flight += 1;
        if state.script.record_limit > 0 {
            while state.side_requests.len() >= state.script.record_limit {
                state.side_requests.pop_front();
            }
            state.side_requests.push_back(request.clone());
        }
        request
    }

    /// A side request was answered (or its connection lost).
    fn side_answered(&self) {
        let mut state = self.lock();
        state.side_in_flight = state.side_in_flight.saturating_sub(1);
        state.side_answered += 1;
    }

    pub(crate) fn push_reply(&self, reply: MockReply) {
        self.lock().script.replies.push_back(reply);
    }

    pub(crate) fn add_rule(&self, rule: MockRule) {
        self.lock().script.rules.push(rule);
    }

    pub(crate) fn set_when_empty(&self, when_empty: WhenEmpty) {
        self.lock().script.when_empty = when_empty;
    }

    pub(crate) fn pending_replies(&self) -> usize {
        self.lock().script.replies.len()
    }

    fn next_connection(&self) -> u64 {
        let mut state = self.lock();
        state.connections += 1;
        state.connections - 1
    }

    /// Numbers and stores a request (dropping the oldest past the record limit).
    fn record(&self, mut request: RecordedRequest) -> RecordedRequest {
        let mut state = self.lock();
        request.index = state.received;
        request.side_in_flight = state.side_in_flight;
        request.side_answered = state.side_answered;
        state.received += 1;
        if state.script.record_limit > 0 {
            while state.requests.len() >= state.script.record_limit {
                state.requests.pop_front();
            }
            state.requests.push_back(request.clone());
        }
        request
    }

    /// Picks the reply: first matching rule, else the queue, else the fallback. Rules
    /// run outside the lock, so a rule may itself inspect the mock.
    fn choose(&self, request: &RecordedRequest) -> (MockReply, Duration, String) {
        let (rules, latency, model) = {
            let state = self.lock();
            (
                state.script.rules.clone(),
                state.script.latency,
                state.script.model.clone(),
            )
        };
        if let Some(reply) = rules.iter().find_map(|rule| rule.decide(request)) {
            return (reply, latency, model);
        }
        let mut state = self.lock();
        let reply = match state.script.replies.pop_front() {
            Some(reply) => reply,
            None => match &state.script.when_empty {
                WhenEmpty::Repeat(reply) => reply.clone(),
                WhenEmpty::Error => MockReply::error(500, EXHAUSTED_MESSAGE),
            },
        };
        (reply, latency, model)
    }
}

/// Marks a side request answered when dropped (after its answer, or with a lost
/// connection).
struct SideAnswer<'a>(&'a Shared);

impl Drop for SideAnswer<'_> {
    fn drop(&mut self) {
        self.0.side_answered();
    }
}

/// Binds with a deep backlog; accepted sockets get `TCP_NODELAY` as well.
pub(crate) fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_nodelay(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Accepts connections until the task is aborted; aborting it drops the `JoinSet`,
/// which aborts every connection.
pub(crate) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let shared = Arc::clone(&shared);
                    let id = shared.next_connection();
                    connections.spawn(async move {
                        // A client hanging up mid-answer is normal (timeouts, tests).
                        let _ = serve_connection(stream, shared, id).await;
                    });
                }
                // Out of file descriptors and the like: back off briefly, keep serving.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// A parsed request.
struct Incoming {
    method: String,
    target: String,
    keep_alive: bool,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

enum ReadOutcome {
    Closed,
    Request(Incoming),
    Bad(u16, String),
}

async fn serve_connection(
    mut stream: TcpStream,
    shared: Arc<Shared>,
    connection: u64,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut buffer = Vec::with_capacity(16 * 1024);
    loop {
        let incoming = match read_request(&mut stream, &mut buffer).await? {
            ReadOutcome::Closed => return Ok(()),
            ReadOutcome::Bad(status, message) => {
                let body =
                    json!({"error": {"message": message, "type": "mock_bad_request"}}).to_string();
                write_response(
                    &mut stream,
                    status,
                    "application/json",
                    body.as_bytes(),
                    &[],
                    false,
                )
                .await?;
                return Ok(());
            }
            ReadOutcome::Request(incoming) => incoming,
        };
        let keep_alive = incoming.keep_alive;
        if !answer(&mut stream, &shared, connection, incoming).await? || !keep_alive {
            let _ = stream.shutdown().await;
            return Ok(());
        }
    }
}

/// Answers one request; `false` means the connection must close.
async fn answer(
    stream: &mut TcpStream,
    shared: &Shared,
    connection: u64,
    incoming: Incoming,
) -> io::Result<bool> {
    let keep_alive = incoming.keep_alive;
    let path = incoming
        .target
        .split('?')
        .next()
        .unwrap_or_default()
        .to_owned();
    if incoming.method == "GET" && path.starts_with("/_mock/") {
        let listed = match path.as_str() {
            "/_mock/requests" => Some(shared.requests()),
            "/_mock/side_requests" => Some(shared.side_requests()),
            _ => None,
        };
        if let Some(listed) = listed {
            let body = serde_json::to_vec(&listed).map_err(io::Error::other)?;
            write_response(stream, 200, "application/json", &body, &[], keep_alive).await?;
            return Ok(true);
        }
    }
    let api = match (incoming.method.as_str(), path.as_str()) {
        ("POST", p) if p.ends_with("/chat/completions") => Some(Api::OpenAi),
        ("POST", p) if p.ends_with("/messages") => Some(Api::Anthropic),
        ("POST", p) if p.ends_with("/responses") => Some(Api::Responses),
        _ => None,
    };
    let request = match api {
        Some(_) => shared.record(recorded(connection, &incoming, api)),
        None => shared.record_side(recorded(connection, &incoming, api)),
    };
    // A side request is in flight until answered, whatever happens meanwhile.
    let _answering = api.is_none().then_some(SideAnswer(shared));
    if request
        .header("upgrade")
        .is_some_and(|value| value.eq_ignore_ascii_case("websocket"))
    {
        // Codex's built-in OpenAI provider tries a WebSocket first; refusing the
        // upgrade at once makes it fall back to HTTPS POST.
        let status = WEBSOCKET_REFUSAL_STATUS;
        let body = json!({"error": {"message": "mock-llm does not speak WebSocket; use HTTP POST", "type": "websocket_unsupported"}});
        write_response(
            stream,
            status,
            "application/json",
            body.to_string().as_bytes(),
            &[],
            false,
        )
        .await?;
        return Ok(false);
    }
    let Some(api) = api else {
        let (status, body, latency) = {
            let state = shared.lock();
            let (status, body) =
                super::side::answer(&state.script, &incoming.method, &path, &request);
            let latency = state.script.side_latency.unwrap_or(state.script.latency);
            (status, body, latency)
        };
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        // A HEAD answer (Claude Code sends `HEAD /api/hello`) has no body, or the
        // client would read the body as the start of the next answer.
        let body = if incoming.method == "HEAD" {
            String::new()
        } else {
            body.to_string()
        };
        write_response(
            stream,
            status,
            "application/json",
            body.as_bytes(),
            &[],
            keep_alive,
        )
        .await?;
        return Ok(true);
    };

    let refusal = {
        let state = shared.lock();
        state
            .script
            .context_window
            .and_then(|window| overflow(&request, window, &state.script))
    };
    let (reply, latency, model) = match refusal {
        Some(refusal) => (refusal, Duration::ZERO, String::new()),
        None => shared.choose(&request),
    };
    let wait = latency + reply.delay;
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
    if let Some(gate) = &reply.gate {
        gate.pass().await;
    }
    match &reply.kind {
        ReplyKind::Close => Ok(false),
        ReplyKind::Reset => {
            // A zero linger makes the close an RST instead of a FIN.
            stream.set_zero_linger()?;
            Ok(false)
        }
        ReplyKind::Raw { content_type, body } => {
            write_response(stream, 200, content_type, body.as_bytes(), &[], keep_alive).await?;
            Ok(true)
        }
        ReplyKind::Error { status, body } => {
            let extra: Vec<(&str, &str)> = reply
                .retry_after
                .as_deref()
                .map(|value| ("retry-after", value))
                .into_iter()
                .collect();
            let body = wire::error_body(Some(api), *status, body);
            write_response(
                stream,
                *status,
                "application/json",
                body.as_bytes(),
                &extra,
                keep_alive,
            )
            .await?;
            Ok(true)
        }
        ReplyKind::Text(text) => {
            let answer = answer::Answer::text(text);
            send_answer(stream, &request, api, &model, &reply, &answer, keep_alive).await
        }
        ReplyKind::ToolCalls { text, calls } => {
            let answer = answer::Answer::tool_calls(api, request.index, text, calls)
                .with_custom_tools(&request);
            send_answer(stream, &request, api, &model, &reply, &answer, keep_alive).await
        }
        ReplyKind::Endless { piece_bytes } => {
            super::endless::send(stream, api, &model, &reply, *piece_bytes, request.stream()).await
        }
    }
}

/// The refusal of a request longer than `window` tokens (the prompt's tokens as
/// [`MockScript::tokens_in`] counts them, plus the answer's `max_tokens`) as llama-cpp-python's server gives it: a streamed request
/// gets an event stream that ends without data (the server fails after sending its
/// headers), a whole one HTTP 400 naming the window. `None` when it fits.
fn overflow(request: &RecordedRequest, window: u32, script: &MockScript) -> Option<MockReply> {
    let prompt = script.tokens_in(&request.prompt_text());
    let answer = ["max_tokens", "max_completion_tokens", "max_output_tokens"]
        .iter()
        .find_map(|field| request.body.get(*field).and_then(Value::as_u64))
        .unwrap_or(0);
    let requested = prompt.saturating_add(answer);
    if requested <= u64::from(window) {
        return None;
    }
    if request.stream() {
        return Some(MockReply::raw("text/event-stream", ""));
    }
    let body = json!({"error": {
        "message": format!("This model's maximum context length is {window} tokens. However, you requested {requested} tokens ({prompt} in the messages, {answer} in the completion). Please reduce the length of the messages or completion."),
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }});
    Some(MockReply::error(400, body.to_string()))
}

/// The status a WebSocket upgrade request is refused with: `426 Upgrade Required`.
/// Measured with Codex 0.169's built-in OpenAI provider: after a 426 it falls back
/// to HTTP POST at once (one GET, 0.4 s to the answer), where 400 ends the run with
/// an error and 403, 404, 405 or 501 make it retry the upgrade 7 times (6-7 s).
pub const WEBSOCKET_REFUSAL_STATUS: u16 = 426;

/// Sends what the model says (text or tool calls): whole, or streamed when the request
/// asked for a stream. False when the connection must close (a stream dropped midway).
async fn send_answer(
    stream: &mut TcpStream,
    request: &RecordedRequest,
    api: Api,
    model: &str,
    reply: &MockReply,
    answer: &answer::Answer<'_>,
    keep_alive: bool,
) -> io::Result<bool> {
    let usage = match reply.usage {
        MockUsage::Estimate => Some(wire::estimate_usage(request, answer)),
        MockUsage::Exact {
            prompt_tokens,
            completion_tokens,
        } => Some((prompt_tokens, completion_tokens)),
        MockUsage::Omit => None,
    };
    if request.stream() {
        let options = wire::StreamOptions {
            include_usage: api != Api::OpenAi
                || request
                    .body
                    .pointer("/stream_options/include_usage")
                    .and_then(Value::as_bool)
                    == Some(true),
            repeat_tool_names: reply.repeat_tool_names,
        };
        let mut events = wire::stream_events(api, request.index, model, answer, usage, options);
        match reply.stream_cut {
            None => {}
            Some(StreamCut::WithoutEnd) => {
                events.pop();
            }
            Some(StreamCut::DropAfter(n)) => {
                events.truncate(n);
                write_stream_head(stream, keep_alive).await?;
                for event in &events {
                    write_chunk(stream, event.as_bytes()).await?;
                }
                stream.flush().await?;
                return Ok(false); // closed without the terminating chunk
            }
            Some(StreamCut::Stall(n)) => {
                events.truncate(n);
                write_stream_head(stream, keep_alive).await?;
                for event in &events {
                    write_chunk(stream, event.as_bytes()).await?;
                }
                stream.flush().await?;
                wait_for_hangup(stream, STALL_LIMIT).await;
                return Ok(false);
            }
        }
        write_stream(stream, &events, reply, keep_alive).await?;
        Ok(true)
    } else {
        let body = wire::completion_body(api, request.index, model, answer, usage).to_string();
        write_response(
            stream,
            200,
            "application/json",
            body.as_bytes(),
            &[],
            keep_alive,
        )
        .await?;
        Ok(true)
    }
}

fn recorded(connection: u64, incoming: &Incoming, api: Option<Api>) -> RecordedRequest {
    let (auth, headers): (Vec<_>, Vec<_>) = incoming
        .headers
        .iter()
        .cloned()
        .partition(|(name, _)| AUTH_HEADERS.contains(&name.as_str()));
    RecordedRequest {
        index: 0,
        connection,
        method: incoming.method.clone(),
        path: incoming.target.clone(),
        api,
        headers,
        auth_headers: auth.into_iter().map(|(name, _)| name).collect(),
        body: serde_json::from_slice(&incoming.body).unwrap_or(Value::Null),
        body_bytes: incoming.body.len(),
        received_unix_us: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64),
        side_in_flight: 0,
        side_answered: 0,
    }
}

/// Reads one request (head and `Content-Length` body) from the connection; bytes of
/// a following pipelined request stay in `buffer`.
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> io::Result<ReadOutcome> {
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break at + 4;
        }
        if buffer.len() > HEAD_MAX_BYTES {
            return Ok(ReadOutcome::Bad(
                431,
                format!("request head over {HEAD_MAX_BYTES} bytes"),
            ));
        }
        if !fill(stream, buffer).await? {
            return Ok(ReadOutcome::Closed);
        }
    };
    let Ok(head) = std::str::from_utf8(&buffer[..head_end - 4]) else {
        return Ok(ReadOutcome::Bad(400, "request head is not UTF-8".into()));
    };
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let parts: Vec<&str> = request_line.split(' ').collect();
    let [method, target, version] = parts.as_slice() else {
        return Ok(ReadOutcome::Bad(
            400,
            format!("malformed request line {request_line:?}"),
        ));
    };
    let mut headers = Vec::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Ok(ReadOutcome::Bad(
                400,
                format!("malformed header line {line:?}"),
            ));
        };
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    if header("transfer-encoding").is_some() {
        return Ok(ReadOutcome::Bad(
            411,
            "mock-llm needs Content-Length; chunked request bodies are not supported".into(),
        ));
    }
    let length = match header("content-length").map(str::parse::<usize>) {
        None => 0,
        Some(Ok(length)) if length <= BODY_MAX_BYTES => length,
        Some(Ok(_)) => {
            return Ok(ReadOutcome::Bad(
                413,
                format!("request body over {BODY_MAX_BYTES} bytes"),
            ))
        }
        Some(Err(_)) => return Ok(ReadOutcome::Bad(400, "invalid Content-Length".into())),
    };
    let connection = header("connection")
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let keep_alive = match *version {
        "HTTP/1.1" => !connection.contains("close"),
        _ => connection.contains("keep-alive"),
    };
    if header("expect").is_some_and(|value| value.eq_ignore_ascii_case("100-continue")) {
        stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
    }
    let (method, target) = (method.to_string(), target.to_string());
    while buffer.len() < head_end + length {
        if !fill(stream, buffer).await? {
            return Ok(ReadOutcome::Closed);
        }
    }
    let body = buffer[head_end..head_end + length].to_vec();
    buffer.drain(..head_end + length);
    Ok(ReadOutcome::Request(Incoming {
        method,
        target,
        keep_alive,
        headers,
        body,
    }))
}

/// Reads more bytes; `false` on end of stream or an idle connection.
async fn fill(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> io::Result<bool> {
    buffer.reserve(16 * 1024);
    match tokio::time::timeout(
        Duration::from_secs(IDLE_TIMEOUT_SECS),
        stream.read_buf(buffer),
    )
    .await
    {
        Ok(read) => Ok(read? > 0),
        Err(_idle) => Ok(false),
    }
}

async fn write_response(
    stream: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &[u8],
    extra_headers: &[(&str, &str)],
    keep_alive: bool,
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: {}\r\nx-mock-llm: scripted\r\n",
        reason(status),
        body.len(),
        if keep_alive { "keep-alive" } else { "close" },
    );
    for (name, value) in extra_headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    stream.write_all(&bytes).await
}

/// Streams SSE events in HTTP chunks: one per event, or fixed-size pieces of the whole
/// stream when the reply asks for it (to split characters across reads).
async fn write_stream(
    stream: &mut TcpStream,
    events: &[String],
    reply: &MockReply,
    keep_alive: bool,
) -> io::Result<()> {
    write_stream_head(stream, keep_alive).await?;
    let all;
    let pieces: Vec<&[u8]> = match reply.chunk_bytes {
        None => events.iter().map(|event| event.as_bytes()).collect(),
        Some(size) => {
            all = events.concat();
            all.as_bytes().chunks(size.max(1)).collect()
        }
    };
    for (index, piece) in pieces.iter().enumerate() {
        let last = index + 1 == pieces.len();
        let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
        chunk.extend_from_slice(piece);
        chunk.extend_from_slice(b"\r\n");
        if last {
            // The terminating chunk goes with the last event, so the client sees the
            // end of the body at once and can reuse the connection.
            chunk.extend_from_slice(b"0\r\n\r\n");
        }
        stream.write_all(&chunk).await?;
        if !last && !reply.chunk_delay.is_zero() {
            tokio::time::sleep(reply.chunk_delay).await;
        }
    }
    if pieces.is_empty() {
        stream.write_all(b"0\r\n\r\n").await?;
    }
    Ok(())
}

/// How long a stalled stream is held open at most (the client normally gives up first).
const STALL_LIMIT: Duration = Duration::from_secs(60);

/// Waits until the client closes the connection, or `limit` passes.
async fn wait_for_hangup(stream: &mut TcpStream, limit: Duration) {
    let mut sink = [0_u8; 1024];
    let hangup = async {
        loop {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    let _ = tokio::time::timeout(limit, hangup).await;
}

/// The status line and headers of an SSE response.
async fn write_stream_head(stream: &mut TcpStream, keep_alive: bool) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\nconnection: {}\r\nx-mock-llm: scripted\r\n\r\n",
        if keep_alive { "keep-alive" } else { "close" },
    );
    stream.write_all(head.as_bytes()).await
}

/// One HTTP chunk holding `piece`.
async fn write_chunk(stream: &mut TcpStream, piece: &[u8]) -> io::Result<()> {
    let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
    chunk.extend_from_slice(piece);
    chunk.extend_from_slice(b"\r\n");
    stream.write_all(&chunk).await
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Payload Too Large",
        426 => "Upgrade Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

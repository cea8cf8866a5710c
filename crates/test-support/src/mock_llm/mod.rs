//! A scripted stand-in for a model server, for tests and benchmarks.
//!
//! It speaks just enough HTTP/1.1 (keep-alive, `Content-Length` bodies, chunked SSE
//! responses) to serve OpenAI `/v1/chat/completions` (and `/chat/completions`),
//! OpenAI `/v1/responses` (and `/responses`, the Responses API the Codex CLI speaks)
//! and Anthropic `/v1/messages`, streamed or whole. A WebSocket upgrade (Codex's
//! built-in OpenAI provider tries one first) is refused at once with
//! [`WEBSOCKET_REFUSAL_STATUS`], so the client falls back to HTTP. It is not a model:
//! every answer comes from a [`MockScript`]. It records every request so tests assert
//! on what was sent, never keeping the value of an authentication header.
//!
//! Agent CLIs send side requests beside the conversation; [`MockRule::when`] with a
//! [`RequestMatch`] (API, path, model, tools offered or not, tool results present or
//! not, system prompt, user text) routes them, and [`MockRule::side_request`] answers
//! every request that offers no tools.
//!
//! An answer is text, an error, a dropped connection, or tool calls
//! ([`MockReply::tool_calls`] with [`MockToolCall`]s) shaped as each API sends them,
//! argument text split across stream chunks included; [`RecordedRequest::tool_names`]
//! and [`RecordedRequest::tool_results`] read back what the client offered and returned.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use rlm_test_support::mock_llm::{MockLlm, MockReply, MockScript, MockToolCall};
//! let mock = MockLlm::start(MockScript::replies(["first answer"])).await?;
//! mock.push_reply(MockReply::error(429, "slow down"));
//! let grep = serde_json::json!({"variable": "context", "pattern": "ERROR"});
//! mock.push_reply(MockReply::tool_calls("", [MockToolCall::new("ctx_grep", grep)]));
//! // point a provider at mock.base_url() …
//! assert!(mock.requests().is_empty());
//! mock.shutdown().await;
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::Arc;
use std::thread;

use serde::Serialize;
use serde_json::Value;
use tokio::task::JoinHandle;

mod answer;
mod endless;
mod gate;
mod responses;
mod script;
mod server;
mod side;
mod tools;
mod wire;

pub use gate::{GateCounts, MockGate};
pub use script::{
    MockReply, MockRule, MockScript, MockTokenizer, MockUsage, ReplyKind, RequestMatch, RuleFn,
    ScriptError, StreamCut, WhenEmpty, DEFAULT_MOCK_CHARS_PER_TOKEN, DEFAULT_MOCK_MODEL,
    ENDLESS_LIMIT, ENDLESS_LIMIT_BYTES,
};
pub use server::WEBSOCKET_REFUSAL_STATUS;
pub use tools::{MockToolCall, RecordedToolResult};

use server::Shared;

/// Which API a request was addressed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// OpenAI Chat Completions.
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses (`POST /v1/responses`), which the Codex CLI speaks.
    Responses,
}

impl Api {
    /// The name used in script JSON and in `/_mock/requests`: `openai`, `anthropic`
    /// or `responses`.
    pub fn name(self) -> &'static str {
        match self {
            Api::OpenAi => "openai",
            Api::Anthropic => "anthropic",
            Api::Responses => "responses",
        }
    }

    /// The API named `name` (as [`Api::name`] spells it; `chat` is `openai` too).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "openai" | "chat" | "chat_completions" => Some(Api::OpenAi),
            "anthropic" | "messages" => Some(Api::Anthropic),
            "responses" => Some(Api::Responses),
            _ => None,
        }
    }
}

/// Header names whose values are never recorded.
pub const AUTH_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
];

/// One request as the mock received it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordedRequest {
    /// Arrival order, from 0.
    pub index: u64,
    /// Which TCP connection carried it, from 0 (equal ids show keep-alive reuse).
    pub connection: u64,
    /// `GET`, `POST`, …
    pub method: String,
    /// The request target, query included.
    pub path: String,
    /// The API the path belongs to, if any.
    pub api: Option<Api>,
    /// Headers (lower-case names) except authentication headers.
    pub headers: Vec<(String, String)>,
    /// Names of authentication headers that were present (values never kept).
    pub auth_headers: Vec<String>,
    /// The body as JSON (`Null` if empty or not JSON).
    pub body: Value,
    /// Length of the body in bytes.
    pub body_bytes: usize,
    /// When the whole request had arrived, in microseconds since the Unix epoch
    /// (benchmarks measure request-to-request times with it).
    pub received_unix_us: u64,
    /// Side requests (`/v1/models`, `/props`, …) that had arrived but not been answered
    /// yet when this one arrived: a model request beside a client's discovery sees
    /// them, one sent after it sees none.
    pub side_in_flight: u64,
    /// Side requests answered before this one arrived: a model request that waited for
    /// a client's discovery comes after its answers, one sent beside it before them.
    pub side_answered: u64,
}

impl RecordedRequest {
    /// True when any authentication header was sent.
    pub fn auth_present(&self) -> bool {
        !self.auth_headers.is_empty()
    }

    /// The value of header `name` (case-insensitive); never an authentication header.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
    }

    /// True when the body asks for a stream.
    pub fn stream(&self) -> bool {
        self.body
            .get("stream")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The `model` field of the body.
    pub fn model(&self) -> Option<&str> {
        self.body.get("model").and_then(Value::as_str)
    }

    /// The text of every message, in order: `messages` (Chat Completions, Messages),
    /// or the message items of a Responses `input`.
    pub fn message_texts(&self) -> Vec<String> {
        if self.body.get("messages").is_some() {
            return self
                .messages()
                .iter()
                .map(|message| content_text(message.get("content").unwrap_or(&Value::Null)))
                .collect();
        }
        self.input_messages()
            .map(|item| content_text(item.get("content").unwrap_or(&Value::Null)))
            .collect()
    }

    /// The messages of the body (`messages`), empty when absent.
    pub fn messages(&self) -> &[Value] {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The items of a Responses `input`, in order: messages (`role` and `content`),
    /// `function_call`, `function_call_output` and the like. A string `input` reads as
    /// one user message; empty when there is no `input`.
    pub fn input_items(&self) -> Vec<Value> {
        match self.body.get("input") {
            Some(Value::String(text)) => {
                vec![serde_json::json!({"type": "message", "role": "user", "content": text})]
            }
            Some(Value::Array(items)) => items.clone(),
            _ => Vec::new(),
        }
    }

    /// The message items of a Responses `input` (those with a `role`).
    fn input_messages(&self) -> impl Iterator<Item = Value> {
        self.input_items().into_iter().filter(|item| {
            item.get("role").is_some()
                && item
                    .get("type")
                    .and_then(Value::as_str)
                    .is_none_or(|kind| kind == "message")
        })
    }

    /// The text of the last `user` message, if any (of `messages`, or of a Responses
    /// `input`).
    pub fn last_user_message(&self) -> Option<String> {
        let is_user = |message: &Value| message.get("role").and_then(Value::as_str) == Some("user");
        let text = |message: &Value| content_text(message.get("content").unwrap_or(&Value::Null));
        if self.body.get("messages").is_some() {
            return self.messages().iter().rev().find(|m| is_user(m)).map(text);
        }
        self.input_messages()
            .filter(is_user)
            .last()
            .map(|m| text(&m))
    }

    /// The system prompt: Anthropic's `system` field, Responses' `instructions` and
    /// `system`/`developer` input messages, or OpenAI's `system`/`developer` messages.
    pub fn system_prompt(&self) -> Option<String> {
        if let Some(system) = self.body.get("system") {
            return Some(content_text(system));
        }
        let is_system = |message: &Value| {
            matches!(
                message.get("role").and_then(Value::as_str),
                Some("system" | "developer")
            )
        };
        let text = |message: &Value| content_text(message.get("content").unwrap_or(&Value::Null));
        let mut parts: Vec<String> = self
            .body
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .into_iter()
            .collect();
        parts.extend(self.messages().iter().filter(|m| is_system(m)).map(text));
        parts.extend(self.input_messages().filter(is_system).map(|m| text(&m)));
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// The prompt's text, its parts one after another: system and every message,
    /// Anthropic tool results included as OpenAI's `tool` messages are; for Responses,
    /// `instructions`, the message items and the tool outputs.
    pub fn prompt_text(&self) -> String {
        let mut text = self
            .body
            .get("system")
            .or_else(|| self.body.get("instructions"))
            .map(content_text)
            .unwrap_or_default();
        for message in self.messages() {
            let content = message.get("content").unwrap_or(&Value::Null);
            text.push_str(&content_text(content));
            for part in tools::anthropic_tool_results(content) {
                text.push_str(&content_text(part.get("content").unwrap_or(&Value::Null)));
            }
        }
        for item in self.input_items() {
            let content = item
                .get("content")
                .or_else(|| item.get("output"))
                .unwrap_or(&Value::Null);
            text.push_str(&content_text(content));
        }
        text
    }

    /// Characters of the prompt's text ([`RecordedRequest::prompt_text`]).
    pub fn prompt_chars(&self) -> usize {
        self.prompt_text().chars().count()
    }
}

/// Tokens the mock counts in `text`: a token per four characters, rounded up — or, with
/// `digits_are_tokens` ([`MockScript::digits_are_tokens`]), every ASCII digit a token
/// of its own and the other characters a token per four, as the tokenizers of Qwen
/// and Llama 3 split numbers into digits.
pub fn mock_tokens(text: &str, digits_are_tokens: bool) -> u64 {
    mock_tokens_at(text, digits_are_tokens, DEFAULT_MOCK_CHARS_PER_TOKEN)
}

/// [`mock_tokens`] with the characters that are not digits counted a token per
/// `chars_per_token` ([`MockScript::chars_per_token`]; at least one).
pub fn mock_tokens_at(text: &str, digits_are_tokens: bool, chars_per_token: u64) -> u64 {
    let per = chars_per_token.max(1);
    let chars = text.chars().count() as u64;
    if !digits_are_tokens {
        return chars.div_ceil(per);
    }
    let digits = text.bytes().filter(u8::is_ascii_digit).count() as u64;
    digits + (chars - digits).div_ceil(per)
}

/// The rule that makes the mock the evaluation oracle (`mock-llm --oracle`): it
/// answers the items of `rlm-orchestrate eval` as `rlm_eval::oracle` says.
pub fn oracle_rule() -> MockRule {
    MockRule::function("the eval oracle", |request| {
        let texts = request.message_texts();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        rlm_eval::oracle::reply(&texts).map(MockReply::text)
    })
}

/// Text of a `content` (a string, or parts with `text`).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// Inspects and steers a running mock from any thread.
#[derive(Debug, Clone)]
pub struct MockControl {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl MockControl {
    /// The socket address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`: a base URL for both providers (the mock also serves
    /// `/chat/completions` without `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1`: the base URL in OpenAI's own style.
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request for a completion recorded so far (chat completions, messages,
    /// responses), oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests()
    }

    /// How many requests for a completion arrived (including any dropped by the record
    /// limit).
    pub fn request_count(&self) -> u64 {
        self.shared.request_count()
    }

    /// Every other request recorded so far (`/v1/models`, `/props`, health checks,
    /// unknown paths), oldest first.
    pub fn side_requests(&self) -> Vec<RecordedRequest> {
        self.shared.side_requests()
    }

    /// Appends a reply to the queue.
    pub fn push_reply(&self, reply: impl Into<MockReply>) {
        self.shared.push_reply(reply.into());
    }

    /// Adds a rule (tried before the queue).
    pub fn add_rule(&self, rule: MockRule) {
        self.shared.add_rule(rule);
    }

    /// Sets what is answered once the queue is empty.
    pub fn set_when_empty(&self, when_empty: WhenEmpty) {
        self.shared.set_when_empty(when_empty);
    }

    /// Replies still queued.
    pub fn pending_replies(&self) -> usize {
        self.shared.pending_replies()
    }
}

/// A mock model server running on the caller's tokio runtime. Dropping it stops it.
#[derive(Debug)]
pub struct MockLlm {
    control: MockControl,
    accept: JoinHandle<()>,
}

impl MockLlm {
    /// Starts a server on `127.0.0.1` at a free port.
    pub async fn start(script: MockScript) -> std::io::Result<Self> {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), script).await
    }

    /// Starts a server on `addr` (port 0 picks a free one).
    pub async fn start_on(addr: SocketAddr, script: MockScript) -> std::io::Result<Self> {
        let listener = server::listen(addr)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new(script));
        let accept = tokio::spawn(server::accept_loop(listener, Arc::clone(&shared)));
        Ok(Self {
            control: MockControl { addr, shared },
            accept,
        })
    }

    /// A handle for inspecting and steering the server (cheap to clone).
    pub fn control(&self) -> MockControl {
        self.control.clone()
    }

    /// Starts a server on its own thread with its own runtime, for tests that are not
    /// async. The server stops when the handle is dropped.
    pub fn spawn_blocking_thread(script: MockScript) -> std::io::Result<MockLlmThread> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = thread::Builder::new()
            .name("mock-llm".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        let _ = ready_tx.send(Err(error));
                        return;
                    }
                };
                runtime.block_on(async move {
                    match MockLlm::start(script).await {
                        Ok(mock) => {
                            let _ = ready_tx.send(Ok(mock.control()));
                            // Either a stop message or the handle's sender being dropped.
                            let _ = stop_rx.await;
                            mock.shutdown().await;
                        }
                        Err(error) => {
                            let _ = ready_tx.send(Err(error));
                        }
                    }
                });
            })?;
        let control = ready_rx.recv().map_err(|_| {
            std::io::Error::other("the mock-llm thread ended before it started listening")
        })??;
        Ok(MockLlmThread {
            control,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// Stops accepting and closes every connection.
    pub async fn shutdown(mut self) {
        self.accept.abort();
        let _ = (&mut self.accept).await;
    }
}

impl Deref for MockLlm {
    type Target = MockControl;

    fn deref(&self) -> &MockControl {
        &self.control
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// A mock model server on its own thread; dropping the handle stops it and joins the
/// thread.
#[derive(Debug)]
pub struct MockLlmThread {
    control: MockControl,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl MockLlmThread {
    /// A handle for inspecting and steering the server (cheap to clone).
    pub fn control(&self) -> MockControl {
        self.control.clone()
    }

    /// Stops the server and waits for its thread.
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Deref for MockLlmThread {
    type Target = MockControl;

    fn deref(&self) -> &MockControl {
        &self.control
    }
}

impl Drop for MockLlmThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use super::*;

    /// Sends raw HTTP and reads until the server closes the connection.
    fn exchange(addr: SocketAddr, raw: &str) -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        stream.write_all(raw.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    }

    fn post(path: &str, body: &str, connection: &str) -> String {
        format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-hidden\r\ncontent-length: {}\r\nconnection: {connection}\r\n\r\n{body}",
            body.len()
        )
    }

    #[test]
    fn a_thread_server_answers_pipelined_requests_on_one_connection() {
        let mock =
            MockLlm::spawn_blocking_thread(MockScript::replies(["first", "second"])).unwrap();
        let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        let raw =
            post("/v1/chat/completions", body, "keep-alive") + &post("/v1/messages", body, "close");
        let answer = exchange(mock.addr(), &raw);
        assert_eq!(answer.matches("HTTP/1.1 200 OK").count(), 2, "{answer}");
        assert!(answer.contains(r#""content":"first""#), "{answer}");
        assert!(answer.contains(r#""text":"second""#), "{answer}");

        let requests = mock.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].connection, requests[1].connection);
        assert_eq!(requests[1].api, Some(Api::Anthropic));
        assert_eq!(requests[0].auth_headers, ["authorization"]);
        assert!(!format!("{requests:?}").contains("sk-hidden"));
        assert_eq!(requests[0].body_bytes, body.len());
        mock.shutdown();
    }

    #[test]
    fn exhaustion_unknown_paths_and_bad_requests_get_errors() {
        let mock = MockLlm::spawn_blocking_thread(MockScript::new()).unwrap();
        let answer = exchange(mock.addr(), &post("/v1/chat/completions", "{}", "close"));
        assert!(answer.starts_with("HTTP/1.1 500"), "{answer}");
        assert!(answer.contains("script exhausted"), "{answer}");
        let answer = exchange(mock.addr(), &post("/nowhere", "", "close"));
        assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
        let head = "HEAD /api/hello HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
        let answer = exchange(mock.addr(), head);
        assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
        assert!(
            answer.ends_with("\r\n\r\n"),
            "a HEAD answer has no body: {answer}"
        );
        let answer = exchange(mock.addr(), "GARBAGE\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        let chunked = "POST /v1/messages HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n";
        assert!(exchange(mock.addr(), chunked).starts_with("HTTP/1.1 411"));
        // Only the three well-formed requests were recorded: the model call as one,
        // the other two apart.
        assert_eq!(mock.request_count(), 1);
        let side = mock.control().side_requests();
        assert_eq!(
            side.iter().map(|r| r.method.as_str()).collect::<Vec<_>>(),
            ["POST", "HEAD"]
        );
    }

    #[test]
    fn websocket_upgrades_are_refused_and_responses_answered() {
        let mock = MockLlm::spawn_blocking_thread(MockScript::always("hi")).unwrap();
        let upgrade = "GET /v1/responses HTTP/1.1\r\nhost: x\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
        let answer = exchange(mock.addr(), upgrade);
        assert!(
            answer.starts_with("HTTP/1.1 426 Upgrade Required"),
            "{answer}"
        );
        let body = r#"{"model":"m","input":"hello"}"#;
        let answer = exchange(mock.addr(), &post("/responses", body, "close"));
        assert!(answer.contains(r#""object":"response""#), "{answer}");
        assert!(answer.contains(r#""text":"hi""#), "{answer}");
        let side = mock.control().side_requests();
        assert_eq!(side[0].method, "GET");
        assert_eq!(side[0].header("upgrade"), Some("websocket"));
        let requests = mock.requests();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].api, Some(Api::Responses));
        assert_eq!(requests[0].last_user_message().as_deref(), Some("hello"));
    }

    #[test]
    fn function_rules_see_the_request_and_control_steers_the_queue() {
        let mock = MockLlm::spawn_blocking_thread(MockScript::new().rule(MockRule::function(
            "echo system prompts",
            |request| {
                request
                    .system_prompt()
                    .map(|system| MockReply::text(format!("system was {system}")))
            },
        )))
        .unwrap();
        let control = mock.control();
        control.push_reply(MockReply::text("queued"));
        assert_eq!(control.pending_replies(), 1);
        let with_system =
            r#"{"messages":[{"role":"system","content":"S"},{"role":"user","content":"u"}]}"#;
        let answer = exchange(
            mock.addr(),
            &post("/v1/chat/completions", with_system, "close"),
        );
        assert!(answer.contains("system was S"), "{answer}");
        let answer = exchange(mock.addr(), &post("/v1/chat/completions", "{}", "close"));
        assert!(answer.contains("queued"), "{answer}");
        control.set_when_empty(WhenEmpty::Repeat(MockReply::text("again")));
        let answer = exchange(mock.addr(), &post("/chat/completions", "{}", "close"));
        assert!(answer.contains("again"), "{answer}");
    }
}

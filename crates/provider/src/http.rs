//! HTTP plumbing shared by the OpenAI and Anthropic providers (and the completion
//! bookkeeping the command-line provider reuses).
//!
//! Both APIs differ only in their JSON; building the client, sending an attempt,
//! turning transport failures and error statuses into retry decisions, reading bodies
//! with bounds and walking an event stream (`stream`) are the same, and live here once.
//! Each provider describes its JSON with a [`WireFormat`].

use std::error::Error as StdError;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use reqwest::{RequestBuilder, Response};
use serde_json::Value;

use super::config::{install_crypto_provider, is_local_url, ApiKey, ProviderConfig};
use super::retry::{parse_retry_after, run_with_retries, AttemptError, RetryPolicy};
use super::{ChatRequest, Completion, DeltaSink, ProviderError};

mod stream;

pub(crate) use stream::{read_stream, StreamFlow, StreamState, EMPTY_STREAM, RETRY_NOTICE};

/// Longest wait for a TCP (and TLS) connection before the attempt counts as failed.
pub(crate) const CONNECT_TIMEOUT_SECS: u64 = 30;
/// How much of an error response's body is kept for the message.
pub(crate) const ERROR_BODY_MAX_BYTES: usize = 4 * 1024;

/// A client for one provider: `TCP_NODELAY` (small requests must not wait on delayed
/// ACKs), bounded connect time, no proxy for local endpoints, and no TLS roots loaded
/// for a plain `http://` one.
pub(crate) fn build_client(
    config: &ProviderConfig,
    base_url: &str,
) -> Result<reqwest::Client, ProviderError> {
    install_crypto_provider();
    let connect_timeout = config
        .request_timeout
        .min(Duration::from_secs(CONNECT_TIMEOUT_SECS));
    let mut builder = reqwest::Client::builder()
        .tcp_nodelay(true)
        .connect_timeout(connect_timeout)
        .pool_idle_timeout(Duration::from_secs(90));
    if is_local_url(base_url) {
        builder = builder.no_proxy();
    }
    if base_url.starts_with("http://") {
        // No TLS to verify: loading the system's roots is most of what building a
        // client costs (about 80 ms of a debug build's start, per client).
        builder = builder.tls_certs_only(std::iter::empty());
    }
    builder.build().map_err(|error| {
        ProviderError::Config(format!("cannot build the HTTP client: {}", chain(&error)))
    })
}

/// Checks that a base URL is an absolute http(s) URL and strips trailing slashes.
pub(crate) fn normalise_base_url(base_url: &str) -> Result<String, ProviderError> {
    let trimmed = base_url.trim().trim_end_matches('/');
    match reqwest::Url::parse(trimmed) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(trimmed.to_owned()),
        Ok(url) => Err(ProviderError::Config(format!(
            "base URL `{trimmed}` uses scheme `{}`; use http:// or https://",
            url.scheme()
        ))),
        Err(error) => Err(ProviderError::Config(format!(
            "base URL `{trimmed}` is not a URL ({error}); use e.g. http://127.0.0.1:8080/v1"
        ))),
    }
}

/// An error and its causes on one line (`a: b: c`), so "connection refused" shows.
pub(crate) fn chain(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A failed `send()`: no usable answer, so another attempt may work. A connection
/// that could not be made blames the address; one closed or reset after the request
/// went out does not.
pub(crate) fn send_failure(error: &reqwest::Error) -> AttemptError {
    if error.is_connect() {
        AttemptError::Connect(chain(error))
    } else {
        AttemptError::Dropped(chain(error))
    }
}

/// Turns a non-success response into a retry decision, keeping the start of its body
/// (with the key scrubbed, should the server echo it).
pub(crate) async fn status_failure(response: Response, key: Option<&ApiKey>) -> AttemptError {
    let status = response.status().as_u16();
    let retry_after = parse_retry_after(response.headers());
    let body = match read_capped(response, ERROR_BODY_MAX_BYTES).await {
        Ok((bytes, _)) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(error) => format!("(body unreadable: {})", chain(&error)),
    };
    let body = match key {
        Some(key) => key.scrub(&body),
        None => body,
    };
    AttemptError::Status {
        status,
        body,
        retry_after,
    }
}

/// Reads at most `cap` bytes of a body; the flag says whether more was cut off.
pub(crate) async fn read_capped(
    mut response: Response,
    cap: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = cap.saturating_sub(body.len());
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// Reads a whole JSON success body of at most `max_bytes`, mapping failures for the
/// retry loop (a larger one is [`ProviderError::ReplyTooLarge`]).
pub(crate) async fn read_json_body(
    response: Response,
    endpoint: &str,
    max_bytes: u64,
) -> Result<serde_json::Value, AttemptError> {
    let cap = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    let (bytes, truncated) = read_capped(response, cap).await.map_err(|error| {
        AttemptError::Interrupted(format!("reading the response failed: {}", chain(&error)))
    })?;
    if truncated {
        return Err(too_large(endpoint, max_bytes));
    }
    serde_json::from_slice(&bytes).map_err(|error| {
        let start = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
        protocol(
            endpoint,
            format!("the body is not JSON ({error}); it starts with {start:?}"),
        )
    })
}

/// True when the response is an SSE stream (a server may ignore `"stream": true`).
pub(crate) fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.to_ascii_lowercase().starts_with("text/event-stream"))
}

/// The reply went past `--max-reply-bytes`: fatal, never retried.
pub(crate) fn too_large(endpoint: &str, limit_bytes: u64) -> AttemptError {
    AttemptError::Fatal(ProviderError::ReplyTooLarge {
        endpoint: endpoint.to_owned(),
        limit_bytes,
    })
}

/// A fatal protocol error for the retry loop.
pub(crate) fn protocol(endpoint: &str, message: impl Into<String>) -> AttemptError {
    AttemptError::Fatal(ProviderError::Protocol {
        endpoint: endpoint.to_owned(),
        message: message.into(),
    })
}

/// What one successful attempt produced, before usage is filled in.
#[derive(Debug, Default)]
pub(crate) struct RawCompletion {
    /// The answer.
    pub(crate) text: String,
    /// Tool calls, assembled from whole messages or stream pieces.
    pub(crate) tool_calls: Vec<PartialCall>,
    /// Usage as reported by the server, if it reported any.
    pub(crate) usage: Option<super::Usage>,
    /// The model the server says answered.
    pub(crate) model: Option<String>,
    /// Why the model stopped (`stop`, `length`, `end_turn`, `max_tokens`, `tool_use`…),
    /// when the server said; `length` and `max_tokens` mark the answer as truncated.
    pub(crate) stop_reason: Option<String>,
}

/// A tool call being assembled: streams send its id and name once (llama.cpp's server
/// repeats them with every piece) and its arguments in pieces.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct PartialCall {
    /// Which call of the message the pieces belong to (OpenAI's `index`, Anthropic's
    /// content block index).
    pub(crate) index: u64,
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) arguments: String,
}

impl RawCompletion {
    /// The call with this index, created on first sight.
    pub(crate) fn call_at(&mut self, index: u64) -> &mut PartialCall {
        let position = match self.tool_calls.iter().position(|c| c.index == index) {
            Some(position) => position,
            None => {
                self.tool_calls.push(PartialCall {
                    index,
                    ..PartialCall::default()
                });
                self.tool_calls.len() - 1
            }
        };
        &mut self.tool_calls[position]
    }

    /// Records a piece of a call: an id and a name when not known yet, arguments
    /// appended.
    pub(crate) fn call_piece(
        &mut self,
        index: u64,
        id: Option<&str>,
        name: Option<&str>,
        arguments: Option<&str>,
    ) {
        let call = self.call_at(index);
        if let Some(id) = id.filter(|id| !id.is_empty() && call.id.is_empty()) {
            call.id = id.to_owned();
        }
        if let Some(name) = name.filter(|name| !name.is_empty() && call.name.is_empty()) {
            call.name = name.to_owned();
        }
        if let Some(piece) = arguments {
            call.arguments.push_str(piece);
        }
    }
}

impl RawCompletion {
    /// Shows an answer that arrived whole to the sink, as one delta (if not empty).
    pub(crate) fn show_whole(&self, on_delta: Option<DeltaSink<'_>>) {
        if let Some(sink) = on_delta.filter(|_| !self.text.is_empty()) {
            sink(&self.text);
        }
    }

    /// The finished completion: reported usage, else an estimate from the text.
    pub(crate) fn finish(
        self,
        request: &super::ChatRequest,
        configured_model: &str,
        started: std::time::Instant,
        attempts: u32,
    ) -> super::Completion {
        let tool_calls: Vec<super::ToolCall> = self
            .tool_calls
            .into_iter()
            .enumerate()
            .map(|(n, call)| super::ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{n}")
                } else {
                    call.id
                },
                name: call.name,
                arguments: if call.arguments.trim().is_empty() {
                    "{}".to_owned()
                } else {
                    call.arguments
                },
            })
            .collect();
        if let Some(stop_reason) = &self.stop_reason {
            tracing::debug!(stop_reason, "the model stopped");
        }
        let truncated = matches!(self.stop_reason.as_deref(), Some("length" | "max_tokens"));
        let (usage, usage_reported) = match self.usage {
            Some(usage) => (usage, true),
            None => {
                let mut answer = self.text.clone();
                for call in &tool_calls {
                    answer.push_str(&call.name);
                    answer.push_str(&call.arguments);
                }
                (super::estimate_usage(request, &answer), false)
            }
        };
        super::Completion {
            tool_calls,
            usage,
            usage_reported,
            model: self
                .model
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| configured_model.to_owned()),
            latency: started.elapsed(),
            attempts,
            text: self.text,
            truncated,
        }
    }
}

/// The start of some text, for error messages.
pub(crate) fn preview(text: &str) -> String {
    const PREVIEW_CHARS: usize = 200;
    rlm_protocol::format::clip(text, PREVIEW_CHARS)
}

/// What differs between the APIs: the headers a request carries, how a whole response
/// reads, and what each message of a streamed one means.
pub(crate) trait WireFormat {
    /// Adds the key, when there is one, and any header the API requires.
    fn authorize(
        request: RequestBuilder,
        key: Option<&ApiKey>,
    ) -> Result<RequestBuilder, AttemptError>;

    /// What one stream message is called in error messages (`chunk`, `event`).
    const STREAM_ITEM: &'static str;
    /// Data that ends a stream by itself (OpenAI's `[DONE]`), if the API sends one.
    const DONE_MARKER: Option<&'static str>;
    /// What ends a complete stream, in words for messages (`data: [DONE]`,
    /// `message_stop`): a stream that ends without it was cut short.
    const END_OF_STREAM: &'static str;

    /// Reads a whole (non-streamed) response.
    fn parse_body(value: &Value, endpoint: &str) -> Result<RawCompletion, AttemptError>;

    /// Takes one stream message, already parsed; `event` is its SSE event name.
    fn stream_event(
        event: &str,
        value: &Value,
        stream: &mut StreamState<'_>,
    ) -> Result<StreamFlow, AttemptError>;
}

/// What an HTTP provider is configured with, whatever its wire format. Its `Debug`
/// shows only the redacted addresses.
pub(crate) struct HttpTarget {
    client: reqwest::Client,
    /// The base URL as shown in messages: credentials redacted.
    pub(crate) shown_base_url: String,
    /// The URL requests are posted to.
    pub(crate) endpoint: String,
    /// The endpoint as shown in messages: credentials redacted.
    shown_endpoint: String,
    /// The configured model name.
    pub(crate) model: String,
    key: Option<ApiKey>,
    /// Whether answers are asked for as streams.
    pub(crate) stream: bool,
    /// `--temperature`, for requests that set none.
    pub(crate) temperature: Option<f32>,
    policy: RetryPolicy,
    timeout: Duration,
    /// The most bytes of one reply read (`--max-reply-bytes`).
    max_reply_bytes: u64,
}

impl std::fmt::Debug for HttpTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTarget")
            .field("endpoint", &self.shown_endpoint)
            .field("model", &self.model)
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

impl HttpTarget {
    /// Checks what every HTTP provider needs: an http(s) base URL (`default_base_url`
    /// when none is configured), a model name (else the `no_model` message), and a key
    /// unless the endpoint is local. `endpoint` turns the base URL into the request URL.
    pub(crate) fn new(
        config: &ProviderConfig,
        api_key: Option<ApiKey>,
        default_base_url: &str,
        default_key_env: &str,
        no_model: &str,
        endpoint: impl FnOnce(&str) -> String,
    ) -> Result<Self, ProviderError> {
        let base_url = normalise_base_url(config.base_url.as_deref().unwrap_or(default_base_url))?;
        if config.model.trim().is_empty() {
            return Err(ProviderError::Config(no_model.into()));
        }
        if api_key.is_none() && !is_local_url(&base_url) {
            return Err(ProviderError::MissingKey {
                var: config.key_env().unwrap_or(default_key_env).to_owned(),
            });
        }
        let endpoint = super::address::endpoint_url(&base_url, endpoint);
        Ok(Self {
            client: build_client(config, &base_url)?,
            shown_endpoint: super::address::redact_url(&endpoint),
            endpoint,
            shown_base_url: super::address::redact_url(&base_url),
            model: config.model.clone(),
            key: api_key,
            stream: config.stream,
            temperature: config.temperature,
            policy: config.retry_policy(),
            timeout: config.request_timeout,
            max_reply_bytes: config.max_reply_bytes,
        })
    }

    /// Posts `body` (built from `request`) with retries and returns the completion.
    ///
    /// After a stream that ended without any data, the next attempt asks for the whole
    /// answer instead: some servers (llama-cpp-python) fail a streamed request after
    /// sending its headers — a request past the model's window, say — and only a
    /// whole answer carries the error that says why.
    pub(crate) async fn complete<W: WireFormat>(
        &self,
        request: &ChatRequest,
        body: &Value,
        on_delta: Option<DeltaSink<'_>>,
    ) -> Result<Completion, ProviderError> {
        let started = Instant::now();
        let shown = AtomicUsize::new(0);
        let shown = &shown;
        let whole = unstreamed(body);
        let (whole, empty_stream) = (&whole, &AtomicBool::new(false));
        let (raw, attempts) = run_with_retries(
            &self.policy,
            &self.shown_endpoint,
            self.timeout,
            move |_attempt| async move {
                let body = match whole {
                    Some(whole) if empty_stream.load(Ordering::Relaxed) => whole,
                    _ => body,
                };
                let result = self.attempt::<W>(body, on_delta, shown).await;
                if let Err(AttemptError::Interrupted(message)) = &result {
                    if message.contains(EMPTY_STREAM) {
                        empty_stream.store(true, Ordering::Relaxed);
                    }
                }
                result
            },
        )
        .await?;
        Ok(raw.finish(request, &self.model, started, attempts))
    }

    /// One attempt. An earlier attempt that showed part of its answer and broke is
    /// followed by [`RETRY_NOTICE`], so the live view does not run two answers together.
    async fn attempt<W: WireFormat>(
        &self,
        body: &Value,
        on_delta: Option<DeltaSink<'_>>,
        shown: &AtomicUsize,
    ) -> Result<RawCompletion, AttemptError> {
        if let Some(sink) = on_delta {
            if shown.swap(0, Ordering::Relaxed) > 0 {
                sink(RETRY_NOTICE);
            }
        }
        // Known secrets never reach a model, whatever carried them into the request
        // (model code that printed a key it read, an agent's output, a tool's result).
        let text = serde_json::to_string(body).map_err(|error| {
            AttemptError::Fatal(ProviderError::Config(format!(
                "cannot encode the request body: {error}"
            )))
        })?;
        let request = self
            .client
            .post(&self.endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(rlm_process::redact_secrets(&text).into_owned());
        let request = W::authorize(request, self.key.as_ref())?;
        let reading = Reading {
            endpoint: &self.shown_endpoint,
            max_bytes: self.max_reply_bytes,
            on_delta,
            shown,
        };
        send_attempt::<W>(request, self.key.as_ref(), reading).await
    }
}

/// `body` asking for a whole answer instead of a stream; `None` when it asks for none.
fn unstreamed(body: &Value) -> Option<Value> {
    if body.get("stream") != Some(&Value::Bool(true)) {
        return None;
    }
    let mut whole = body.clone();
    if let Some(object) = whole.as_object_mut() {
        object.insert("stream".to_owned(), Value::Bool(false));
        object.remove("stream_options");
    }
    Some(whole)
}

/// How an attempt reads its answer: for messages, within a bound, shown to whom.
#[derive(Clone, Copy)]
pub(crate) struct Reading<'a> {
    /// The endpoint as shown in messages.
    pub(crate) endpoint: &'a str,
    /// The most bytes of the reply read, whole body or stream (`--max-reply-bytes`).
    pub(crate) max_bytes: u64,
    /// Receives text as it streams.
    pub(crate) on_delta: Option<DeltaSink<'a>>,
    /// Bytes the sink was shown since the last retry notice (shared by the attempts).
    pub(crate) shown: &'a AtomicUsize,
}

/// One attempt: sends the request, then reads the answer as a stream or as a whole
/// body (whichever the server chose), showing text to `on_delta` as it comes.
async fn send_attempt<W: WireFormat>(
    request: RequestBuilder,
    key: Option<&ApiKey>,
    reading: Reading<'_>,
) -> Result<RawCompletion, AttemptError> {
    let response = request.send().await.map_err(|error| send_failure(&error))?;
    if !response.status().is_success() {
        return Err(status_failure(response, key).await);
    }
    if is_event_stream(&response) {
        return read_stream::<W>(response, reading).await;
    }
    let value = read_json_body(response, reading.endpoint, reading.max_bytes).await?;
    let raw = W::parse_body(&value, reading.endpoint)?;
    raw.show_whole(reading.on_delta);
    Ok(raw)
}

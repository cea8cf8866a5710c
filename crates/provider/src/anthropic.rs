//! The Anthropic Messages API (`POST {base_url}/v1/messages`).
//!
//! It differs from Chat Completions in ways that matter to a loop: the system prompt
//! is a top-level field, `max_tokens` is mandatory, turns must alternate, and a stream
//! is a sequence of typed events (`message_start`, `content_block_delta`,
//! `message_delta`, `message_stop`) with usage split between the first and the last.

use reqwest::RequestBuilder;
use serde_json::{json, Value};

use super::config::{ApiKey, ProviderConfig};
use super::http::{
    preview, protocol, HttpTarget, RawCompletion, StreamFlow, StreamState, WireFormat,
};
use super::retry::AttemptError;
use super::wire::{read, Content};
use super::{ChatRequest, Completion, DeltaSink, Provider, ProviderError, Role, Usage};

mod wire;

/// The API version rlm speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// Output token limit when neither the request nor the configuration sets one.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A model behind the Anthropic Messages API.
#[derive(Debug)]
pub struct AnthropicProvider {
    target: HttpTarget,
    max_tokens: u32,
}

impl AnthropicProvider {
    /// Anthropic's endpoint, used when no base URL is configured.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";
    /// Where the key is read from unless `--api-key-env` says otherwise.
    pub const DEFAULT_KEY_ENV: &'static str = crate::config::ANTHROPIC_KEY_ENV;

    /// A provider for `config` using `api_key`. Without a key only a local endpoint is
    /// accepted. A base URL ending in `/v1` is accepted too (no `/v1/v1`).
    pub fn new(config: &ProviderConfig, api_key: Option<ApiKey>) -> Result<Self, ProviderError> {
        let target = HttpTarget::new(
            config,
            api_key,
            Self::DEFAULT_BASE_URL,
            Self::DEFAULT_KEY_ENV,
            "no model name for the anthropic provider; pass --model (e.g. claude-sonnet-4-5)",
            |base_url| match base_url.strip_suffix("/v1") {
                Some(_) => format!("{base_url}/messages"),
                None => format!("{base_url}/v1/messages"),
            },
        )?;
        Ok(Self {
            target,
            max_tokens: config.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        })
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> &str {
        &self.target.endpoint
    }

    /// The request body: system messages joined into `system`, consecutive turns of
    /// the same side merged (the API wants them alternating). Tool calls become
    /// `tool_use` blocks of the assistant's turn, tool results `tool_result` blocks of
    /// the user's (before its text, as the API asks); turns of plain text stay strings.
    fn body(&self, request: &ChatRequest) -> Value {
        let mut system: Vec<&str> = Vec::new();
        let mut turns: Vec<Turn> = Vec::new();
        for message in &request.messages {
            let assistant = match message.role {
                Role::System => {
                    system.push(&message.content);
                    continue;
                }
                Role::Assistant => true,
                Role::User | Role::Tool => false,
            };
            if turns.last().is_none_or(|turn| turn.assistant != assistant) {
                turns.push(Turn {
                    assistant,
                    results: Vec::new(),
                    texts: Vec::new(),
                    calls: Vec::new(),
                });
            }
            let Some(turn) = turns.last_mut() else {
                continue;
            };
            match message.role {
                Role::Tool => turn.results.push(json!({
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id.clone().unwrap_or_default(),
                    "content": message.content,
                    "is_error": message.is_error,
                })),
                Role::System | Role::User | Role::Assistant => {
                    if !message.content.is_empty() || message.tool_calls.is_empty() {
                        turn.texts.push(message.content.clone());
                    }
                    for call in &message.tool_calls {
                        let input: Value = serde_json::from_str(&call.arguments)
                            .ok()
                            .filter(Value::is_object)
                            .unwrap_or_else(|| json!({}));
                        turn.calls.push(json!({
                            "type": "tool_use", "id": call.id, "name": call.name, "input": input,
                        }));
                    }
                }
            }
        }
        let messages: Vec<Value> = turns.into_iter().map(Turn::into_message).collect();
        let mut body = json!({
            "model": self.target.model,
            "max_tokens": request.max_tokens.unwrap_or(self.max_tokens),
            "messages": messages,
            "stream": self.target.stream,
        });
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "name": tool.name,
                        "description": tool.description,
                        "input_schema": tool.parameters,
                    })
                })
                .collect();
            body["tools"] = json!(tools);
            if let Some(name) = &request.required_tool {
                body["tool_choice"] = json!({"type": "tool", "name": name});
            }
        }
        if !system.is_empty() {
            body["system"] = json!(system.join("\n\n"));
        }
        if let Some(temperature) = request.temperature.or(self.target.temperature) {
            body["temperature"] = json!(temperature);
        }
        body
    }
}

/// One turn of the conversation as the Messages API wants it.
struct Turn {
    assistant: bool,
    results: Vec<Value>,
    texts: Vec<String>,
    calls: Vec<Value>,
}

impl Turn {
    fn into_message(self) -> Value {
        let role = if self.assistant { "assistant" } else { "user" };
        let text = self.texts.join("\n\n");
        if self.results.is_empty() && self.calls.is_empty() {
            return json!({ "role": role, "content": text });
        }
        let mut blocks = self.results;
        if !text.is_empty() {
            blocks.push(json!({"type": "text", "text": text}));
        }
        blocks.extend(self.calls);
        json!({ "role": role, "content": blocks })
    }
}

/// The Messages JSON: `content` parts whole; typed events streamed until
/// `message_stop`, usage split between `message_start` and `message_delta`.
pub(super) struct Messages;

impl WireFormat for Messages {
    const STREAM_ITEM: &'static str = "event";
    const DONE_MARKER: Option<&'static str> = None;
    const END_OF_STREAM: &'static str = "message_stop";

    fn authorize(
        request: RequestBuilder,
        key: Option<&ApiKey>,
    ) -> Result<RequestBuilder, AttemptError> {
        let request = request.header("anthropic-version", ANTHROPIC_VERSION);
        let Some(key) = key else {
            return Ok(request);
        };
        let mut value = reqwest::header::HeaderValue::from_str(key.expose()).map_err(|_| {
            AttemptError::Fatal(ProviderError::Config(
                "the Anthropic API key contains characters not allowed in a header".into(),
            ))
        })?;
        value.set_sensitive(true);
        Ok(request.header("x-api-key", value))
    }

    fn parse_body(value: &Value, endpoint: &str) -> Result<RawCompletion, AttemptError> {
        parse_message(value, endpoint)
    }

    fn stream_event(
        event: &str,
        value: &Value,
        stream: &mut StreamState<'_>,
    ) -> Result<StreamFlow, AttemptError> {
        let data: wire::StreamEvent = read(value);
        match data.kind.as_deref().unwrap_or(event) {
            "message_start" => {
                let message = data.message.unwrap_or_default();
                if let Some(model) = message.model {
                    stream.raw.model = Some(model);
                }
                stream.raw.usage = merge_usage(message.usage, stream.raw.usage);
            }
            "content_block_start" => {
                let block = data.content_block.unwrap_or_default();
                if block.is_tool_use() {
                    stream.raw.call_piece(
                        data.index.unwrap_or(0),
                        block.id.as_deref(),
                        block.name.as_deref(),
                        None,
                    );
                }
            }
            "content_block_delta" => {
                let delta = data.delta.unwrap_or_default();
                match delta.kind.as_deref() {
                    Some("text_delta") => {
                        let text = delta.text.unwrap_or_default();
                        if !text.is_empty() {
                            stream.push_text(&text);
                        }
                    }
                    Some("input_json_delta") => {
                        let piece = delta.partial_json.as_deref();
                        stream
                            .raw
                            .call_piece(data.index.unwrap_or(0), None, None, piece);
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                stream.raw.usage = merge_usage(data.usage, stream.raw.usage);
                if let Some(reason) = data.delta.and_then(|delta| delta.stop_reason) {
                    stream.raw.stop_reason = Some(reason);
                }
            }
            "message_stop" => return Ok(StreamFlow::Finished),
            "error" => {
                // The report is shown whole: the `error` member, else the event itself.
                let (error, kind) = match &data.error {
                    Some(error) => (error, read::<wire::ErrorKind>(error).kind),
                    None => (value, data.kind),
                };
                let message = format!("the stream reported an error: {error}");
                return Err(if wire::is_transient_error(kind.as_deref()) {
                    stream.broken(&message)
                } else {
                    stream.protocol(message)
                });
            }
            _ => {} // ping, content_block_stop, future event kinds
        }
        Ok(StreamFlow::More)
    }
}

#[async_trait::async_trait]
impl Provider for AnthropicProvider {
    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: Option<DeltaSink<'_>>,
    ) -> Result<Completion, ProviderError> {
        let body = self.body(request);
        self.target
            .complete::<Messages>(request, &body, on_delta)
            .await
    }

    fn model(&self) -> &str {
        &self.target.model
    }

    fn describe(&self) -> String {
        format!(
            "anthropic {} ({})",
            self.target.shown_base_url, self.target.model
        )
    }
}

/// Reads a whole (non-streamed) Messages response.
fn parse_message(value: &Value, endpoint: &str) -> Result<RawCompletion, AttemptError> {
    let message: wire::Message = read(value);
    if message.kind.as_deref() == Some("error") {
        let error = message.error.as_ref().unwrap_or(value);
        return Err(protocol(
            endpoint,
            format!("the response reports an error: {error}"),
        ));
    }
    let Some(content) = message.content else {
        return Err(protocol(
            endpoint,
            format!(
                "the response has no content: {}",
                preview(&value.to_string())
            ),
        ));
    };
    let mut raw = RawCompletion {
        text: content.text(),
        usage: merge_usage(message.usage, None),
        model: message.model,
        stop_reason: message.stop_reason,
        ..RawCompletion::default()
    };
    let blocks = match content {
        Content::Parts(blocks) => blocks,
        Content::Text(_) | Content::Other => Vec::new(),
    };
    for (index, block) in blocks.into_iter().enumerate() {
        if block.is_tool_use() {
            let input = block.input.map(|input| input.to_string());
            raw.call_piece(
                index as u64,
                block.id.as_deref(),
                block.name.as_deref(),
                input.as_deref(),
            );
        }
    }
    Ok(raw)
}

/// The usage after an event (or a whole message) with `usage`: merged into what is
/// `known` (see [`wire::WireUsage::merge`]). An event without a `usage` object leaves
/// none: only counts the last usage-bearing events agree on are reported.
fn merge_usage(usage: Option<wire::WireUsage>, known: Option<Usage>) -> Option<Usage> {
    usage.and_then(|usage| usage.merge(known))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChatMessage, ProviderKind, ToolCall, ToolSpec};

    /// Reads a `usage` member as a stream event's is read, merged into `known`.
    fn read_usage(usage: Option<&Value>, known: Option<Usage>) -> Option<Usage> {
        let usage = usage.filter(|usage| usage.is_object()).map(read);
        merge_usage(usage, known)
    }

    fn provider(base_url: &str) -> AnthropicProvider {
        let mut config = ProviderConfig::new(ProviderKind::Anthropic, "claude-test");
        config.base_url = Some(base_url.into());
        AnthropicProvider::new(&config, None).unwrap()
    }

    #[test]
    fn endpoint_accepts_base_with_or_without_v1() {
        assert_eq!(
            provider("http://127.0.0.1:9").endpoint(),
            "http://127.0.0.1:9/v1/messages"
        );
        assert_eq!(
            provider("http://127.0.0.1:9/v1/").endpoint(),
            "http://127.0.0.1:9/v1/messages"
        );
    }

    #[test]
    fn body_lifts_system_and_merges_turns() {
        let request = ChatRequest {
            messages: vec![
                ChatMessage::system("rules"),
                ChatMessage::user("a"),
                ChatMessage::user("b"),
                ChatMessage::assistant("c"),
                ChatMessage::system("more rules"),
            ],
            temperature: Some(0.5),
            ..ChatRequest::default()
        };
        let body = provider("http://127.0.0.1:9").body(&request);
        assert_eq!(body["system"], "rules\n\nmore rules");
        assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS);
        assert_eq!(body["messages"].as_array().map(Vec::len), Some(2));
        assert_eq!(body["messages"][0]["content"], "a\n\nb");
        assert_eq!(body["messages"][1]["role"], "assistant");
        assert_eq!(body["temperature"], 0.5);
    }

    #[test]
    fn tool_use_and_tool_result_blocks_take_the_messages_shape() {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "ctx_slice".into(),
            arguments: r#"{"variable":"context","start":0,"end":5}"#.into(),
        };
        let request = ChatRequest {
            messages: vec![
                ChatMessage::system("rules"),
                ChatMessage::user("read it"),
                ChatMessage::assistant_calls("Reading.", vec![call("toolu_1"), call("toolu_2")]),
                ChatMessage::tool_result("toolu_1", "hello", false),
                ChatMessage::tool_result("toolu_2", "bad range", true),
                ChatMessage::user("State: iteration 2"),
            ],
            tools: vec![ToolSpec {
                name: "ctx_slice".into(),
                description: "slice".into(),
                parameters: json!({"type": "object"}),
            }],
            required_tool: Some("ctx_slice".into()),
            ..ChatRequest::default()
        };
        let body = provider("http://127.0.0.1:9").body(&request);
        assert_eq!(
            body["tools"][0],
            json!({"name": "ctx_slice", "description": "slice", "input_schema": {"type": "object"}})
        );
        assert_eq!(
            body["tool_choice"],
            json!({"type": "tool", "name": "ctx_slice"})
        );
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3, "{body}");
        assert_eq!(
            messages[1]["content"],
            json!([
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_1", "name": "ctx_slice", "input": {"variable": "context", "start": 0, "end": 5}},
                {"type": "tool_use", "id": "toolu_2", "name": "ctx_slice", "input": {"variable": "context", "start": 0, "end": 5}},
            ])
        );
        // Results first, then the text, in the one user turn that follows.
        assert_eq!(
            messages[2]["content"],
            json!([
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello", "is_error": false},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "bad range", "is_error": true},
                {"type": "text", "text": "State: iteration 2"},
            ])
        );
    }

    #[test]
    fn usage_merges_start_and_delta() {
        let start = read_usage(
            Some(&json!({"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1})),
            None,
        );
        let end = read_usage(Some(&json!({"output_tokens": 42})), start);
        assert_eq!(
            end,
            Some(Usage {
                prompt_tokens: 15,
                completion_tokens: 42
            })
        );
        assert_eq!(read_usage(Some(&json!({})), None), None);
    }

    #[test]
    fn messages_parse() {
        let value = json!({
            "type": "message", "model": "claude-x",
            "content": [{"type": "text", "text": "hello "}, {"type": "tool_use", "id": "t"}, {"type": "text", "text": "there"}],
            "usage": {"input_tokens": 7, "output_tokens": 3}
        });
        let raw = parse_message(&value, "e").unwrap();
        assert_eq!(raw.text, "hello there");
        assert_eq!(
            raw.usage,
            Some(Usage {
                prompt_tokens: 7,
                completion_tokens: 3
            })
        );
        let error =
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "no"}});
        assert!(parse_message(&error, "e").is_err());
    }
}

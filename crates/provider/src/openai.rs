//! OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`).
//!
//! The same wire format is spoken by OpenAI, OpenRouter, vLLM, llama.cpp's server,
//! Ollama and LM Studio, each with small liberties (no `usage` when streaming, content
//! as parts, `stream` ignored). Responses are therefore read into lenient wire types
//! (`wire`): what is missing is estimated, what is unknown is ignored.

use std::sync::atomic::{AtomicU8, Ordering};

use reqwest::RequestBuilder;
use serde_json::{json, Value};

use super::config::{ApiKey, ProviderConfig};
use super::constrain::{strict_compatible, SchemaForm};
use super::http::{
    preview, protocol, HttpTarget, RawCompletion, StreamFlow, StreamState, WireFormat,
};
use super::retry::AttemptError;
use super::wire::read;
use super::{ChatMessage, ChatRequest, Completion, DeltaSink, Provider, ProviderError};

#[cfg(test)]
mod body_snapshots;
mod wire;

/// A model behind an OpenAI-compatible Chat Completions endpoint.
#[derive(Debug)]
pub struct OpenAiProvider {
    target: HttpTarget,
    max_tokens: Option<u32>,
    /// How a [`crate::ResponseFormat`] is sent, learned from refusals
    /// ([`FormatStyle`] as a number: servers differ, and say so only by refusing).
    format_style: AtomicU8,
}

/// The forms of `response_format`, tried in this order until the server takes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum FormatStyle {
    /// `{"type": "json_schema", "json_schema": {"name", "schema"}}`: OpenAI, vLLM,
    /// llama.cpp's server.
    JsonSchema = 0,
    /// `{"type": "json_object", "schema": …}`: llama-cpp-python (whose server
    /// refuses `json_schema`), llama.cpp's server.
    JsonObject = 1,
    /// Not sent: the server refused both (the reply is then read as text, as without).
    Off = 2,
}

impl FormatStyle {
    fn of(n: u8) -> Self {
        match n {
            0 => Self::JsonSchema,
            1 => Self::JsonObject,
            _ => Self::Off,
        }
    }
}

/// True when a refusal is about the `response_format` the request carried (a 4xx, or
/// llama-cpp-python's 500 for a request its schema refuses).
fn refuses_response_format(error: &ProviderError) -> bool {
    match error {
        ProviderError::Http { status, body, .. }
            if (400..500).contains(status) || crate::retry::is_invalid_request(body) =>
        {
            let body = body.to_ascii_lowercase();
            ["response_format", "json_schema", "json_object", "schema"]
                .iter()
                .any(|word| body.contains(word))
        }
        _ => false,
    }
}

impl OpenAiProvider {
    /// OpenAI's own endpoint, used when no base URL is configured.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";
    /// Where the key is read from unless `--api-key-env` says otherwise.
    pub const DEFAULT_KEY_ENV: &'static str = crate::config::OPENAI_KEY_ENV;

    /// A provider for `config` using `api_key` (read by the caller, usually from the
    /// environment by [`super::build_provider`]). Without a key only a local endpoint
    /// (loopback, private network) is accepted.
    pub fn new(config: &ProviderConfig, api_key: Option<ApiKey>) -> Result<Self, ProviderError> {
        let target = HttpTarget::new(
            config,
            api_key,
            Self::DEFAULT_BASE_URL,
            Self::DEFAULT_KEY_ENV,
            "no model name for the openai provider; pass --model (local servers accept any name)",
            |base_url| format!("{base_url}/chat/completions"),
        )?;
        Ok(Self {
            target,
            max_tokens: config.max_tokens,
            format_style: AtomicU8::new(FormatStyle::JsonSchema as u8),
        })
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> &str {
        &self.target.endpoint
    }

    #[cfg(test)]
    fn body(&self, request: &ChatRequest) -> Value {
        let style = FormatStyle::of(self.format_style.load(Ordering::Relaxed));
        self.body_with(request, style)
    }

    fn body_with(&self, request: &ChatRequest, style: FormatStyle) -> Value {
        let strict = request.constraint.is_some_and(|c| c.strict_tools);
        let messages: Vec<Value> = request.messages.iter().map(wire_message).collect();
        let mut body = json!({
            "model": self.target.model,
            "messages": messages,
            "stream": self.target.stream,
        });
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    let mut function = json!({
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    });
                    if strict && strict_compatible(&tool.parameters) {
                        function["strict"] = json!(true);
                    }
                    json!({"type": "function", "function": function})
                })
                .collect();
            body["tools"] = json!(tools);
            // Some servers (llama.cpp's) treat a missing tool_choice as "none".
            body["tool_choice"] = match &request.required_tool {
                Some(name) => json!({"type": "function", "function": {"name": name}}),
                None => json!("auto"),
            };
        }
        if self.target.stream {
            body["stream_options"] = json!({ "include_usage": true });
        }
        if let Some(max_tokens) = request.max_tokens.or(self.max_tokens) {
            body["max_tokens"] = json!(max_tokens);
        }
        if let Some(temperature) = request.temperature.or(self.target.temperature) {
            body["temperature"] = json!(temperature);
        }
        if let (Some(grammar), Some(field)) =
            (&request.grammar, request.constraint.and_then(|c| c.grammar))
        {
            body[field.name()] = json!(grammar.as_ref());
        }
        // Resolved: the form the server takes, or a later one a refusal taught; not
        // sent at all where it takes none. Unresolved: the forms in turn, as learned.
        let style = match request.constraint.map(|c| c.json_schema) {
            None => Some(style),
            Some(None) => None,
            Some(Some(SchemaForm::JsonSchema)) => Some(style),
            Some(Some(SchemaForm::JsonObject)) => Some(style.max(FormatStyle::JsonObject)),
        };
        if let (Some(format), Some(style)) = (&request.response_format, style) {
            match style {
                FormatStyle::JsonSchema => {
                    body["response_format"] = json!({"type": "json_schema", "json_schema": {
                        "name": format.name,
                        "schema": format.schema,
                    }});
                }
                FormatStyle::JsonObject => {
                    body["response_format"] =
                        json!({"type": "json_object", "schema": format.schema});
                }
                FormatStyle::Off => {}
            }
        }
        body
    }
}

/// One message in the Chat Completions shape: tool calls as `function` objects with
/// their arguments as a JSON string, tool results as `role: "tool"` with the call's id.
/// Content is always a string (an assistant message that only calls tools has `""`:
/// some servers reject `null`).
fn wire_message(message: &ChatMessage) -> Value {
    let mut value = json!({ "role": message.role, "content": message.content });
    if !message.tool_calls.is_empty() {
        let calls: Vec<Value> = message
            .tool_calls
            .iter()
            .map(|call| {
                json!({"id": call.id, "type": "function", "function": {
                    "name": call.name,
                    "arguments": call.arguments,
                }})
            })
            .collect();
        value["tool_calls"] = json!(calls);
    }
    if let Some(id) = &message.tool_call_id {
        value["tool_call_id"] = json!(id);
    }
    value
}

/// The Chat Completions JSON: `choices[].message` whole, `choices[].delta` chunks
/// streamed until `[DONE]`.
pub(super) struct ChatCompletions;

impl WireFormat for ChatCompletions {
    const STREAM_ITEM: &'static str = "chunk";
    const DONE_MARKER: Option<&'static str> = Some("[DONE]");
    const END_OF_STREAM: &'static str = "data: [DONE]";

    fn authorize(
        request: RequestBuilder,
        key: Option<&ApiKey>,
    ) -> Result<RequestBuilder, AttemptError> {
        Ok(match key {
            Some(key) => request.bearer_auth(key.expose()),
            None => request,
        })
    }

    fn parse_body(value: &Value, endpoint: &str) -> Result<RawCompletion, AttemptError> {
        parse_completion(value, endpoint)
    }

    fn stream_event(
        _event: &str,
        value: &Value,
        stream: &mut StreamState<'_>,
    ) -> Result<StreamFlow, AttemptError> {
        let chunk: wire::ChatCompletionChunk = read(value);
        if let Some(error) = chunk.error {
            return Err(stream.protocol(format!("the stream reported an error: {error}")));
        }
        if let Some(model) = chunk.model {
            stream.raw.model = Some(model);
        }
        if let Some(usage) = chunk.usage.as_ref().and_then(wire::WireUsage::reported) {
            stream.raw.usage = Some(usage);
        }
        for choice in chunk.choices {
            let Some(delta) = choice.delta else {
                continue;
            };
            if let Some(content) = delta.content {
                let text = content.text();
                if !text.is_empty() {
                    stream.push_text(&text);
                }
            }
            for (position, call) in delta.tool_calls.into_iter().enumerate() {
                let function = call.function.unwrap_or_default();
                stream.raw.call_piece(
                    call.index.unwrap_or(position as u64),
                    call.id.as_deref(),
                    function.name.as_deref(),
                    function.arguments.piece(),
                );
            }
            if choice.finish_reason.is_some() {
                stream.raw.stop_reason = choice.finish_reason;
            }
        }
        Ok(StreamFlow::More)
    }
}

#[async_trait::async_trait]
impl Provider for OpenAiProvider {
    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: Option<DeltaSink<'_>>,
    ) -> Result<Completion, ProviderError> {
        loop {
            let tried = self.format_style.load(Ordering::Relaxed);
            let body = self.body_with(request, FormatStyle::of(tried));
            let answer = self
                .target
                .complete::<ChatCompletions>(request, &body, on_delta)
                .await;
            match answer {
                Err(error)
                    if request.response_format.is_some()
                        && FormatStyle::of(tried) != FormatStyle::Off
                        && refuses_response_format(&error) =>
                {
                    let next = FormatStyle::of(tried + 1);
                    tracing::warn!(
                        endpoint = %self.target.endpoint,
                        "the server refused response_format as {:?}; trying {:?}: {error}",
                        FormatStyle::of(tried),
                        next
                    );
                    // Another call may have moved it on meanwhile: only forward.
                    let _ = self.format_style.compare_exchange(
                        tried,
                        next as u8,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                }
                other => return other,
            }
        }
    }

    fn model(&self) -> &str {
        &self.target.model
    }

    fn describe(&self) -> String {
        format!(
            "openai {} ({})",
            self.target.shown_base_url, self.target.model
        )
    }
}

/// Reads a whole (non-streamed) Chat Completions response.
fn parse_completion(value: &Value, endpoint: &str) -> Result<RawCompletion, AttemptError> {
    let response: wire::ChatCompletion = read(value);
    if let Some(error) = response.error {
        return Err(protocol(
            endpoint,
            format!("the response reports an error: {error}"),
        ));
    }
    let Some(choice) = response.choices.into_iter().next() else {
        return Err(protocol(
            endpoint,
            format!(
                "the response has no choices: {}",
                preview(&value.to_string())
            ),
        ));
    };
    let message = choice.message.unwrap_or_default();
    let text = match message.content {
        Some(content) => content.text(),
        // Legacy completions-style servers put the text on the choice itself.
        None => choice.text.unwrap_or_default(),
    };
    let mut raw = RawCompletion {
        text,
        usage: response.usage.as_ref().and_then(wire::WireUsage::reported),
        model: response.model,
        stop_reason: choice.finish_reason,
        ..RawCompletion::default()
    };
    for (index, call) in message.tool_calls.into_iter().enumerate() {
        let function = call.function.unwrap_or_default();
        raw.call_piece(
            index as u64,
            call.id.as_deref(),
            function.name.as_deref(),
            Some(&function.arguments.into_text()),
        );
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ProviderKind, ToolCall, ToolSpec, Usage};

    fn config(base_url: &str) -> ProviderConfig {
        let mut config = ProviderConfig::new(ProviderKind::OpenAi, "gpt-test");
        config.base_url = Some(base_url.into());
        config
    }

    #[test]
    fn body_carries_messages_and_stream_options() {
        let provider = OpenAiProvider::new(&config("http://127.0.0.1:9/v1/"), None).unwrap();
        assert_eq!(
            provider.endpoint(),
            "http://127.0.0.1:9/v1/chat/completions"
        );
        let request = ChatRequest {
            messages: vec![ChatMessage::system("be brief"), ChatMessage::user("hi")],
            max_tokens: Some(12),
            ..ChatRequest::default()
        };
        let body = provider.body(&request);
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["messages"][1]["content"], "hi");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["max_tokens"], 12);
        assert!(body.get("temperature").is_none());
        let mut warm = config("http://127.0.0.1:9/v1/");
        warm.temperature = Some(0.0);
        let body = OpenAiProvider::new(&warm, None).unwrap().body(&request);
        assert_eq!(body["temperature"], 0.0);
    }

    fn tool_conversation() -> ChatRequest {
        let call = ToolCall {
            id: "call_1".into(),
            name: "ctx_grep".into(),
            arguments: r#"{"variable":"context","pattern":"x"}"#.into(),
        };
        ChatRequest {
            messages: vec![
                ChatMessage::user("find x"),
                ChatMessage::assistant_calls("", vec![call]),
                ChatMessage::tool_result("call_1", "no line matches", false),
                ChatMessage::user("State: iteration 2"),
            ],
            tools: vec![ToolSpec {
                name: "ctx_grep".into(),
                description: "grep".into(),
                parameters: json!({"type": "object"}),
            }],
            ..ChatRequest::default()
        }
    }

    #[test]
    fn tools_calls_and_results_take_the_chat_completions_shape() {
        let provider = OpenAiProvider::new(&config("http://127.0.0.1:9/v1/"), None).unwrap();
        let mut request = tool_conversation();
        let body = provider.body(&request);
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["tools"][0]["function"]["name"], "ctx_grep");
        assert_eq!(body["tools"][0]["function"]["parameters"]["type"], "object");
        assert_eq!(body["tool_choice"], "auto");
        let assistant = &body["messages"][1];
        assert_eq!(assistant["role"], "assistant");
        // llama.cpp's server refuses `null` content beside tool calls.
        assert_eq!(assistant["content"], "");
        assert_eq!(assistant["tool_calls"][0]["id"], "call_1");
        assert_eq!(assistant["tool_calls"][0]["type"], "function");
        assert_eq!(
            assistant["tool_calls"][0]["function"]["arguments"],
            r#"{"variable":"context","pattern":"x"}"#
        );
        assert_eq!(body["messages"][2]["role"], "tool");
        assert_eq!(body["messages"][2]["tool_call_id"], "call_1");
        assert_eq!(body["messages"][2]["content"], "no line matches");
        assert_eq!(body["messages"][3]["role"], "user");
        request.required_tool = Some("ctx_grep".into());
        let forced = provider.body(&request);
        assert_eq!(
            forced["tool_choice"],
            json!({"type": "function", "function": {"name": "ctx_grep"}})
        );
        let plain = provider.body(&ChatRequest {
            tools: Vec::new(),
            ..tool_conversation()
        });
        assert!(plain.get("tools").is_none() && plain.get("tool_choice").is_none());
    }

    #[test]
    fn missing_key_is_fine_only_locally() {
        assert!(OpenAiProvider::new(&config("http://localhost:8080/v1"), None).is_ok());
        let mut remote = config("https://api.openai.com/v1");
        remote.api_key_env = Some("RLM_TEST_KEY_VAR".into());
        match OpenAiProvider::new(&remote, None) {
            Err(ProviderError::MissingKey { var }) => assert_eq!(var, "RLM_TEST_KEY_VAR"),
            other => panic!("unexpected {other:?}"),
        }
        assert!(OpenAiProvider::new(&remote, Some(ApiKey::new("k"))).is_ok());
    }

    #[test]
    fn completions_parse_leniently() {
        let value = json!({
            "model": "served-name",
            "choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2}
        });
        let raw = parse_completion(&value, "e").unwrap();
        assert_eq!(raw.text, "ab");
        assert_eq!(
            raw.usage,
            Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 2
            })
        );
        assert_eq!(raw.model.as_deref(), Some("served-name"));
        let null_content = json!({"choices": [{"message": {"content": null}}], "usage": null});
        let raw = parse_completion(&null_content, "e").unwrap();
        assert_eq!(raw.text, "");
        assert_eq!(raw.usage, None);
        assert!(parse_completion(&json!({"error": {"message": "x"}}), "e").is_err());
        assert!(parse_completion(&json!({"id": 1}), "e").is_err());
    }

    #[test]
    fn a_response_format_goes_in_the_form_the_server_takes() {
        let provider = OpenAiProvider::new(&config("http://127.0.0.1:9/v1"), None).unwrap();
        let request = ChatRequest {
            messages: vec![ChatMessage::user("plan")],
            response_format: Some(crate::ResponseFormat {
                name: "step".into(),
                schema: json!({"type": "object"}),
            }),
            ..ChatRequest::default()
        };
        let schema = provider.body_with(&request, FormatStyle::JsonSchema);
        assert_eq!(
            schema["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "step", "schema": {"type": "object"}}})
        );
        let object = provider.body_with(&request, FormatStyle::JsonObject);
        assert_eq!(
            object["response_format"],
            json!({"type": "json_object", "schema": {"type": "object"}})
        );
        assert!(provider
            .body_with(&request, FormatStyle::Off)
            .get("response_format")
            .is_none());
        let refusal = |status, body: &str| ProviderError::Http {
            endpoint: "e".into(),
            status,
            body: body.into(),
            attempts: 1,
        };
        assert!(refuses_response_format(&refusal(
            422,
            "Input should be 'text' or 'json_object'"
        )));
        assert!(!refuses_response_format(&refusal(400, "context too long")));
        assert!(!refuses_response_format(&refusal(500, "response_format")));
        // llama-cpp-python: 500 for a request its schema refuses.
        assert!(refuses_response_format(&refusal(
            500,
            "1 validation error: {'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\"}"
        )));
    }

    #[test]
    fn preview_cuts_on_char_boundaries() {
        let long = "é".repeat(300);
        assert_eq!(preview(&long).chars().count(), 201);
        assert_eq!(preview("short"), "short");
    }
}

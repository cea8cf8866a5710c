//! Model providers: one interface over OpenAI-compatible endpoints, the Anthropic
//! Messages API and a command used as a model.
//!
//! The loop only sees [`Provider::complete`]. Retries, timeouts, streaming and usage
//! accounting are each provider's business; errors name the endpoint or command. The
//! crate stands on its own: build a provider from a [`ProviderConfig`] and ask it.
//!
//! ```
//! use rlm_provider::{build_provider, ChatMessage, ChatRequest, ProviderConfig, ProviderKind};
//! use rlm_test_support::mock_llm::{MockLlm, MockReply, MockScript};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A scripted OpenAI-compatible server on 127.0.0.1 stands in for a real endpoint.
//! let server = MockLlm::start(MockScript::replies([MockReply::text("Paris.")])).await?;
//!
//! let mut config = ProviderConfig::new(ProviderKind::OpenAi, "any-model");
//! config.base_url = Some(server.base_url());
//! let provider = build_provider(&config)?;
//!
//! let request = ChatRequest {
//!     messages: vec![ChatMessage::user("The capital of France?")],
//!     ..ChatRequest::default()
//! };
//! let completion = provider.complete(&request, None).await?;
//! assert_eq!(completion.text, "Paris.");
//! assert_eq!(completion.attempts, 1);
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

mod address;
pub mod anthropic;
mod build;
pub mod cli;
pub mod config;
pub mod constrain;
pub mod discovery;
mod http;
pub mod openai;
pub mod retry;
#[cfg(test)]
mod stream_fuzz;
pub mod window;
mod wire;

pub use address::redact_url;
pub use anthropic::AnthropicProvider;
pub use build::build_provider;
pub use cli::CliProvider;
pub use config::{
    install_crypto_provider, is_local_url, ApiKey, Prices, ProviderConfig, ProviderKind,
};
pub use constrain::{ConstrainMode, Constraint, Support};
pub use discovery::{ServerFacts, Tokenizer};
pub use openai::OpenAiProvider;
pub use retry::RetryPolicy;
pub use rlm_protocol::{ToolCall, ToolSpec, Usage};
pub use window::{ContextWindow, TokenEstimator, WindowSource};

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions.
    System,
    /// The user (and REPL output fed back).
    User,
    /// The model.
    Assistant,
    /// The result of a tool call (native tool calling).
    Tool,
}

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who said it.
    pub role: Role,
    /// What was said (for a tool result: the result).
    pub content: String,
    /// The tools an assistant message called.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a [`Role::Tool`] message: the id of the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For a [`Role::Tool`] message: the call failed (an unknown tool, a bad argument…).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

impl ChatMessage {
    fn of(role: Role, content: String) -> Self {
        Self {
            role,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
            is_error: false,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::of(Role::System, content.into())
    }
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::of(Role::User, content.into())
    }
    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::of(Role::Assistant, content.into())
    }
    /// An assistant message that called tools (with any text it wrote besides).
    pub fn assistant_calls(content: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls: calls,
            ..Self::of(Role::Assistant, content.into())
        }
    }
    /// The result of the tool call `call_id`.
    pub fn tool_result(
        call_id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            is_error,
            ..Self::of(Role::Tool, content.into())
        }
    }
}

/// A request for one completion.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    /// The conversation, system message first if any.
    pub messages: Vec<ChatMessage>,
    /// Upper bound on generated tokens, if the caller wants one.
    pub max_tokens: Option<u32>,
    /// Sampling temperature, if the caller wants one.
    pub temperature: Option<f32>,
    /// Tools offered to the model (native tool calling); empty: none.
    pub tools: Vec<ToolSpec>,
    /// The tool the model must call (`None`: it chooses, or answers in text).
    pub required_tool: Option<String>,
    /// A JSON Schema the reply's text must follow, where the server constrains output
    /// (`response_format`; `None`: free text).
    pub response_format: Option<ResponseFormat>,
    /// A GBNF grammar the reply's text must follow (the loop's protocol for code
    /// replies), sent where [`ChatRequest::constraint`] names a field for it.
    pub grammar: Option<std::sync::Arc<str>>,
    /// Which constraint fields go with the request (`--constrain`, resolved against
    /// what the server supports). `None`: not resolved — `response_format` goes as
    /// before (the forms tried in turn), no grammar and no strict tools.
    pub constraint: Option<Constraint>,
}

/// Constrained output: the reply is one JSON value of this schema. The OpenAI
/// provider sends it as `response_format` (`json_schema`, or llama-cpp-python's
/// `json_object` with a `schema`, learned from a refusal); other providers ignore it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseFormat {
    /// A name for the schema (OpenAI's `json_schema.name`).
    pub name: String,
    /// The JSON Schema.
    pub schema: serde_json::Value,
}

/// Estimated usage when a provider reports none: about four characters a token,
/// rounded up, over every message of the request and over the answer.
pub fn estimate_usage(request: &ChatRequest, answer: &str) -> Usage {
    Usage {
        prompt_tokens: estimate_prompt_tokens(&request.messages),
        completion_tokens: chars_to_tokens(answer.chars().count()),
    }
}

/// The prompt tokens of `messages`, estimated as [`estimate_usage`] does.
pub fn estimate_prompt_tokens(messages: &[ChatMessage]) -> u64 {
    let prompt_chars: usize = messages
        .iter()
        .map(|m| {
            m.content.chars().count()
                + m.tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.chars().count())
                    .sum::<usize>()
        })
        .sum();
    chars_to_tokens(prompt_chars)
}

/// About four characters a token, rounded up.
fn chars_to_tokens(chars: usize) -> u64 {
    u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX)
}

/// A finished completion.
#[derive(Debug, Clone)]
pub struct Completion {
    /// The model's text.
    pub text: String,
    /// The tools it called (native tool calling), in order.
    pub tool_calls: Vec<ToolCall>,
    /// Tokens used; estimated (chars / 4) when the provider reports none.
    pub usage: Usage,
    /// True when `usage` came from the provider, false when estimated.
    pub usage_reported: bool,
    /// The model that answered (as reported, else as configured).
    pub model: String,
    /// Wall time of the call including retries.
    pub latency: Duration,
    /// How many attempts it took (1 = no retry).
    pub attempts: u32,
    /// True when the model stopped at its output-token limit (OpenAI `finish_reason:
    /// "length"`, Anthropic `stop_reason: "max_tokens"`): the text is cut short.
    pub truncated: bool,
}

/// Receives streamed text as it arrives (for the live view).
pub type DeltaSink<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// A model.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// Asks for one completion. `on_delta`, when given, receives text as it streams.
    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: Option<DeltaSink<'_>>,
    ) -> Result<Completion, ProviderError>;

    /// The model name used in events and cache keys.
    fn model(&self) -> &str;

    /// A short description for messages, e.g. `openai http://127.0.0.1:8080/v1 (gpt-4o)`.
    fn describe(&self) -> String;
}

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The endpoint could not be reached after all retries.
    #[error("cannot reach the model endpoint {endpoint} after {attempts} attempt(s): {message}; check --base-url and that the server is running")]
    Unreachable {
        /// URL of the endpoint.
        endpoint: String,
        /// Attempts made.
        attempts: u32,
        /// The last error, in words.
        message: String,
    },
    /// The endpoint accepted the connection, but closed or reset it before answering,
    /// on every attempt: it is reachable, so the message does not point at `--base-url`.
    #[error("model endpoint {endpoint} accepted the connection but closed it before answering, on each of {attempts} attempt(s): {message}; the server (or a proxy in between) may have crashed or be overloaded: check its log, try again, or raise --retries")]
    Dropped {
        /// URL of the endpoint.
        endpoint: String,
        /// Attempts made.
        attempts: u32,
        /// The last attempt's failure, in words.
        message: String,
    },
    /// The endpoint answered, but every attempt's answer was cut short (a stream that
    /// broke or ended without its end event): the server is reachable, so the message
    /// does not point at `--base-url`.
    #[error("model endpoint {endpoint} answered, but the answer was cut short on each of {attempts} attempt(s): {message}; the server (or a proxy in between) ended the stream early; try again, raise --retries, or pass --no-stream")]
    Interrupted {
        /// URL of the endpoint.
        endpoint: String,
        /// Attempts made.
        attempts: u32,
        /// The last attempt's failure, in words.
        message: String,
    },
    /// The endpoint answered with an error status.
    #[error(
        "model endpoint {endpoint} answered HTTP {status} after {attempts} attempt(s): {body}"
    )]
    Http {
        /// URL of the endpoint.
        endpoint: String,
        /// HTTP status.
        status: u16,
        /// Start of the response body.
        body: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The request took longer than the request timeout.
    #[error("model endpoint {endpoint} did not answer within {timeout_secs} s ({attempts} attempt(s)); raise --request-timeout or check the server")]
    Timeout {
        /// URL of the endpoint.
        endpoint: String,
        /// The timeout.
        timeout_secs: u64,
        /// Attempts made.
        attempts: u32,
    },
    /// The reply (a whole body, or a stream) went past the bound on a reply's size:
    /// a runaway model or server would otherwise grow the process without end. Not
    /// retried (another attempt would run away the same).
    #[error("model endpoint {endpoint} sent a reply larger than {limit_bytes} bytes (the bound --max-reply-bytes sets) and rlm stopped reading it; the model may be repeating itself or the server misbehaving: check the server, or raise --max-reply-bytes")]
    ReplyTooLarge {
        /// URL of the endpoint.
        endpoint: String,
        /// The bound, in bytes.
        limit_bytes: u64,
    },
    /// The run's deadline (`--max-time`) passed while a call was under way: the call
    /// was abandoned, stream and all.
    #[error("the run's time budget (--max-time {max_time_secs} s) ran out while {endpoint} was answering, and the call was abandoned; raise --max-time")]
    OutOfTime {
        /// The model, as [`Provider::describe`] says it.
        endpoint: String,
        /// The time budget, in seconds.
        max_time_secs: u64,
    },
    /// The response could not be understood.
    #[error("model endpoint {endpoint} sent a response rlm cannot read: {message}")]
    Protocol {
        /// URL of the endpoint.
        endpoint: String,
        /// What was wrong.
        message: String,
    },
    /// The API key's environment variable is not set.
    #[error(
        "the API key variable {var} is not set; export it, or name another with --api-key-env"
    )]
    MissingKey {
        /// The environment variable's name.
        var: String,
    },
    /// A command used as the model failed.
    #[error("model command `{command}` failed ({status}): {stderr_tail}")]
    Command {
        /// The command line.
        command: String,
        /// Exit status in words.
        status: String,
        /// The end of its stderr.
        stderr_tail: String,
    },
    /// Invalid provider configuration.
    #[error("invalid model configuration: {0}")]
    Config(String),
}

//! The Chat Completions response as it comes over the wire: a whole
//! `chat.completion` and the `chat.completion.chunk`s of a stream.
//!
//! One set of types serves OpenAI, OpenRouter, vLLM, llama.cpp's server, Ollama and LM
//! Studio, which differ in what they leave out (`usage` when streaming, `index` on tool
//! call pieces, `id` after the first piece) and what they send as `null` (`content`
//! beside tool calls, `usage`). Every field is read by the lenient rules of
//! [`crate::wire`]: missing, `null` and mistyped fields read as absent.

use serde::Deserialize;
use serde_json::Value;

use crate::wire::{object, objects, part_text, present, scalar, Content, TextPart};
use crate::Usage;

/// A whole (non-streamed) response: `choices[0].message`, `usage`, `model`; or an
/// `error` object from a server that answers errors with a success status.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ChatCompletion {
    /// An error report; present at all (even `null`) means the call failed.
    #[serde(default, deserialize_with = "present")]
    pub(crate) error: Option<Value>,
    /// The answers; rlm reads the first.
    #[serde(default, deserialize_with = "objects")]
    pub(crate) choices: Vec<Choice>,
    /// The model that answered, as the server names it.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) model: Option<String>,
    /// Tokens used.
    #[serde(default, deserialize_with = "object")]
    pub(crate) usage: Option<WireUsage>,
}

/// One answer of a whole response.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Choice {
    /// The assistant's message.
    #[serde(default, deserialize_with = "object")]
    pub(crate) message: Option<Message>,
    /// The text, where legacy completions-style servers put it (no `message`).
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) text: Option<String>,
    /// Why generation stopped (`stop`, `length`, `tool_calls`), when given.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) finish_reason: Option<String>,
}

/// The assistant's message of a whole response.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Message {
    /// Its text: a string or content parts; `null` beside tool calls. `None` only when
    /// the member is missing (then the choice's `text` is read instead).
    #[serde(default, deserialize_with = "present_content")]
    pub(crate) content: Option<Content<ContentPart>>,
    /// The tools it called.
    #[serde(default, deserialize_with = "objects")]
    pub(crate) tool_calls: Vec<ToolCall>,
}

/// One stream chunk: text and tool call pieces in `choices[].delta`; `usage` (in the
/// last chunk, with `choices: []`, when `stream_options.include_usage` was honoured);
/// or an `error` object.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ChatCompletionChunk {
    /// An error report; present at all (even `null`) means the stream failed.
    #[serde(default, deserialize_with = "present")]
    pub(crate) error: Option<Value>,
    /// The model that answers, as the server names it.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) model: Option<String>,
    /// Tokens used, usually in the last chunk only.
    #[serde(default, deserialize_with = "object")]
    pub(crate) usage: Option<WireUsage>,
    /// The pieces of this chunk, one per choice.
    #[serde(default, deserialize_with = "objects")]
    pub(crate) choices: Vec<ChunkChoice>,
}

/// One choice of a stream chunk.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ChunkChoice {
    /// What this chunk adds to the message.
    #[serde(default, deserialize_with = "object")]
    pub(crate) delta: Option<Delta>,
    /// Why generation stopped, in the choice's last chunk.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) finish_reason: Option<String>,
}

/// A piece of the message: text and tool call pieces.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Delta {
    /// More text (a string or parts; `null` or `""` in role-only and tool chunks).
    #[serde(default, deserialize_with = "present_content")]
    pub(crate) content: Option<Content<ContentPart>>,
    /// Pieces of tool calls, joined by `index`.
    #[serde(default, deserialize_with = "objects")]
    pub(crate) tool_calls: Vec<ToolCall>,
}

/// A tool call, whole or as a stream piece: the first piece carries `id` and
/// `function.name`, later ones more of `function.arguments` (llama.cpp's server repeats
/// the id and name in every piece).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ToolCall {
    /// Which call of the message a stream piece belongs to (some servers omit it; the
    /// piece's position stands in).
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) index: Option<u64>,
    /// The call's id, echoed back with its result.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) id: Option<String>,
    /// The function called.
    #[serde(default, deserialize_with = "object")]
    pub(crate) function: Option<FunctionCall>,
}

/// The function of a tool call.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FunctionCall {
    /// The tool's name.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) name: Option<String>,
    /// Its arguments: a JSON string per the API, but Ollama sends an object.
    #[serde(default)]
    pub(crate) arguments: Arguments,
}

/// A tool call's `arguments` as sent.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub(crate) enum Arguments {
    /// Missing or `null`.
    #[default]
    Absent,
    /// The JSON text of the arguments (or a piece of it, when streamed).
    Text(String),
    /// The arguments as a JSON value instead of its text.
    Json(Value),
}

impl Arguments {
    /// The text to record for a whole call: the string, a JSON value as its text,
    /// nothing for `null`.
    pub(crate) fn into_text(self) -> String {
        match self {
            Self::Absent => String::new(),
            Self::Text(text) => text,
            Self::Json(value) => value.to_string(),
        }
    }

    /// A streamed piece: only a string is a piece of the arguments' text.
    pub(crate) fn piece(&self) -> Option<&str> {
        match self {
            Self::Text(text) => Some(text),
            Self::Absent | Self::Json(_) => None,
        }
    }
}

/// `usage`: `prompt_tokens` and `completion_tokens` (servers add more; ignored).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireUsage {
    /// Tokens of the prompt.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) prompt_tokens: Option<u64>,
    /// Tokens generated.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) completion_tokens: Option<u64>,
}

impl WireUsage {
    /// The usage, when at least one count was reported (a missing one counts 0).
    pub(crate) fn reported(&self) -> Option<Usage> {
        if self.prompt_tokens.is_none() && self.completion_tokens.is_none() {
            return None;
        }
        Some(Usage {
            prompt_tokens: self.prompt_tokens.unwrap_or_default(),
            completion_tokens: self.completion_tokens.unwrap_or_default(),
        })
    }
}

/// A content part: `{"type": "text", "text": …}` (other types carry no text).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ContentPart {
    /// The part's type.
    #[serde(default, rename = "type", deserialize_with = "scalar")]
    pub(crate) kind: Option<String>,
    /// Its text, for a text part.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) text: Option<String>,
}

impl TextPart for ContentPart {
    fn text(&self) -> Option<&str> {
        part_text(self.kind.as_deref(), self.text.as_deref())
    }
}

/// `content` kept apart from a missing one even when it is `null`.
fn present_content<'de, D>(deserializer: D) -> Result<Option<Content<ContentPart>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Content::deserialize(deserializer).map(Some)
}

//! The Messages API response as it comes over the wire: a whole `message` and the
//! typed events of a stream (`message_start`, `content_block_start`,
//! `content_block_delta`, `message_delta`, `message_stop`, `ping`, `error`).
//!
//! Usage is split: input tokens (with cache writes and reads) arrive in
//! `message_start`, output tokens in `message_delta`; [`WireUsage::merge`] joins them.
//! Every field is read by the lenient rules of [`crate::wire`], so servers that imitate
//! the API loosely (proxies, local gateways) are read as far as they go.

use serde::Deserialize;
use serde_json::Value;

use crate::wire::{object, part_text, present, scalar, Content, TextPart};
use crate::Usage;

/// A whole (non-streamed) response: `{"type": "message", "content": [...], ...}`, or
/// `{"type": "error", "error": {...}}`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Message {
    /// `message`, or `error` for an error report.
    #[serde(default, rename = "type", deserialize_with = "scalar")]
    pub(crate) kind: Option<String>,
    /// The error report of an `error` (shown whole).
    #[serde(default, deserialize_with = "present")]
    pub(crate) error: Option<Value>,
    /// The content blocks (a plain string is accepted too); `None` only when the
    /// member is missing.
    #[serde(default, deserialize_with = "present_content")]
    pub(crate) content: Option<Content<ContentBlock>>,
    /// The model that answered.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) model: Option<String>,
    /// Why generation stopped (`end_turn`, `max_tokens`, `tool_use`…).
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) stop_reason: Option<String>,
    /// Tokens used.
    #[serde(default, deserialize_with = "object")]
    pub(crate) usage: Option<WireUsage>,
}

/// A content block: text, or a tool the model calls.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ContentBlock {
    /// `text`, `tool_use`, `thinking`…
    #[serde(default, rename = "type", deserialize_with = "scalar")]
    pub(crate) kind: Option<String>,
    /// The text of a text block.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) text: Option<String>,
    /// The id of a `tool_use` block, echoed back with its result.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) id: Option<String>,
    /// The tool a `tool_use` block calls.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) name: Option<String>,
    /// The arguments of a `tool_use` block, as a JSON value (empty in a stream's
    /// `content_block_start`: they follow as `input_json_delta` pieces).
    #[serde(default, deserialize_with = "present")]
    pub(crate) input: Option<Value>,
}

impl ContentBlock {
    /// True for a block that calls a tool.
    pub(crate) fn is_tool_use(&self) -> bool {
        self.kind.as_deref() == Some("tool_use")
    }
}

impl TextPart for ContentBlock {
    fn text(&self) -> Option<&str> {
        part_text(self.kind.as_deref(), self.text.as_deref())
    }
}

/// One event of a stream. Its `type` says which of the other fields it carries.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct StreamEvent {
    /// The event's type (the SSE event name stands in when it is missing).
    #[serde(default, rename = "type", deserialize_with = "scalar")]
    pub(crate) kind: Option<String>,
    /// `message_start`: the message so far (model, input usage).
    #[serde(default, deserialize_with = "object")]
    pub(crate) message: Option<MessageStart>,
    /// `content_block_*`: the block's position in the message.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) index: Option<u64>,
    /// `content_block_start`: the block (a tool's id and name).
    #[serde(default, deserialize_with = "object")]
    pub(crate) content_block: Option<ContentBlock>,
    /// `content_block_delta`: more of a block; `message_delta`: the stop reason.
    #[serde(default, deserialize_with = "object")]
    pub(crate) delta: Option<Delta>,
    /// `message_delta`: output usage so far.
    #[serde(default, deserialize_with = "object")]
    pub(crate) usage: Option<WireUsage>,
    /// `error`: the error report (shown whole; the event itself when missing).
    #[serde(default, deserialize_with = "present")]
    pub(crate) error: Option<Value>,
}

/// The `message` of `message_start`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct MessageStart {
    /// The model that answers.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) model: Option<String>,
    /// Input usage (and a first output count).
    #[serde(default, deserialize_with = "object")]
    pub(crate) usage: Option<WireUsage>,
}

/// The `delta` of `content_block_delta` or `message_delta`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Delta {
    /// `text_delta` or `input_json_delta` (`thinking_delta`… are ignored); missing in
    /// a `message_delta`.
    #[serde(default, rename = "type", deserialize_with = "scalar")]
    pub(crate) kind: Option<String>,
    /// More text, for a `text_delta`.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) text: Option<String>,
    /// A piece of a tool call's arguments, for an `input_json_delta`.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) partial_json: Option<String>,
    /// Why generation stopped, in a `message_delta`.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) stop_reason: Option<String>,
}

/// An error report's `type`, which says whether another attempt may help.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ErrorKind {
    /// `overloaded_error`, `api_error`, `invalid_request_error`…
    #[serde(default, rename = "type", deserialize_with = "scalar")]
    pub(crate) kind: Option<String>,
}

/// True for the error types another attempt may cure (the server was busy or broke).
pub(crate) fn is_transient_error(kind: Option<&str>) -> bool {
    matches!(kind, Some("overloaded_error" | "api_error"))
}

/// `usage`: input tokens in three parts (fresh, cache writes, cache reads) and output
/// tokens.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireUsage {
    /// Input tokens read fresh.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) input_tokens: Option<u64>,
    /// Input tokens written to the prompt cache.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) cache_creation_input_tokens: Option<u64>,
    /// Input tokens read from the prompt cache.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) cache_read_input_tokens: Option<u64>,
    /// Output tokens.
    #[serde(default, deserialize_with = "scalar")]
    pub(crate) output_tokens: Option<u64>,
}

impl WireUsage {
    /// Merges these counts into what is `known`: the prompt is every input part that
    /// was reported, summed; a side not reported keeps its known count. Nothing
    /// reported leaves `known` as it was.
    pub(crate) fn merge(&self, known: Option<Usage>) -> Option<Usage> {
        let input = [
            self.input_tokens,
            self.cache_creation_input_tokens,
            self.cache_read_input_tokens,
        ]
        .into_iter()
        .flatten()
        .reduce(u64::saturating_add);
        if input.is_none() && self.output_tokens.is_none() {
            return known;
        }
        let known = known.unwrap_or_default();
        Some(Usage {
            prompt_tokens: input.unwrap_or(known.prompt_tokens),
            completion_tokens: self.output_tokens.unwrap_or(known.completion_tokens),
        })
    }
}

/// `content` kept apart from a missing one even when it is `null`.
fn present_content<'de, D>(deserializer: D) -> Result<Option<Content<ContentBlock>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Content::deserialize(deserializer).map(Some)
}

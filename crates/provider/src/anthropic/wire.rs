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

#[cfg(test)]
mod tests {
    //! Answers shaped as the Messages API sends them, read into what the provider
    //! returns.

    use serde_json::{json, Value};

    use super::super::Messages;
    use crate::wire::replay::{failure, stream, whole};
    use crate::{ToolCall, Usage};

    /// An SSE body with each event named, as the API sends it.
    fn events(events: &[Value]) -> String {
        events
            .iter()
            .map(|event| {
                format!(
                    "event: {}\ndata: {event}\n\n",
                    event["type"].as_str().unwrap()
                )
            })
            .collect()
    }

    fn message_start(usage: Value) -> Value {
        json!({"type": "message_start", "message": {
            "id": "msg_01", "type": "message", "role": "assistant", "content": [],
            "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null,
            "usage": usage
        }})
    }

    #[test]
    fn whole_answer_with_cache_usage() {
        let body = json!({
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": "Paris."}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 12, "cache_creation_input_tokens": 100,
                      "cache_read_input_tokens": 2000, "output_tokens": 4, "service_tier": "standard"}
        });
        let completion = whole::<Messages>(&body).unwrap();
        assert_eq!(completion.text, "Paris.");
        assert_eq!(
            completion.usage,
            Usage {
                prompt_tokens: 2112,
                completion_tokens: 4
            }
        );
        assert!(completion.usage_reported);
        assert_eq!(completion.model, "claude-sonnet-4-5-20250929");
    }

    #[test]
    fn whole_answer_with_thinking_text_and_tool_use() {
        let body = json!({
            "id": "msg_02", "type": "message", "role": "assistant", "model": "claude-opus-4-1",
            "content": [
                {"type": "thinking", "thinking": "the user wants x", "signature": "EqQB"},
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "toolu_01A", "name": "ctx_grep", "input": {"pattern": "x"}},
                {"type": "tool_use", "id": "toolu_01B", "name": "ctx_slice", "input": {}}
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 500, "output_tokens": 60}
        });
        let completion = whole::<Messages>(&body).unwrap();
        assert_eq!(completion.text, "Looking.");
        assert_eq!(
            completion.tool_calls,
            [
                ToolCall {
                    id: "toolu_01A".into(),
                    name: "ctx_grep".into(),
                    arguments: r#"{"pattern":"x"}"#.into()
                },
                ToolCall {
                    id: "toolu_01B".into(),
                    name: "ctx_slice".into(),
                    arguments: "{}".into()
                },
            ]
        );
    }

    #[test]
    fn whole_answer_without_usage_is_estimated() {
        let body = json!({"type": "message", "content": [{"type": "text", "text": "Hi"}]});
        let completion = whole::<Messages>(&body).unwrap();
        assert!(!completion.usage_reported);
        assert_eq!(
            completion.usage,
            Usage {
                prompt_tokens: 3,
                completion_tokens: 1
            }
        );
        assert_eq!(completion.model, "configured");
    }

    #[test]
    fn stream_of_text_and_a_tool_call_with_split_usage() {
        let body = events(&[
            message_start(
                json!({"input_tokens": 25, "cache_read_input_tokens": 5, "output_tokens": 1}),
            ),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "ping"}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Look"}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ing."}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_01", "name": "ctx_grep", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"pattern\": "}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "\"x\"}"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 89}}),
            json!({"type": "message_stop"}),
        ]);
        let (outcome, shown) = stream::<Messages>(&body);
        let completion = outcome.unwrap();
        assert_eq!(completion.text, "Looking.");
        assert_eq!(shown, "Looking.");
        assert_eq!(
            completion.tool_calls,
            [ToolCall {
                id: "toolu_01".into(),
                name: "ctx_grep".into(),
                arguments: r#"{"pattern": "x"}"#.into()
            }]
        );
        assert_eq!(
            completion.usage,
            Usage {
                prompt_tokens: 30,
                completion_tokens: 89
            }
        );
        assert_eq!(completion.model, "claude-sonnet-4-5-20250929");
    }

    #[test]
    fn stream_errors_are_retried_only_when_transient() {
        let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        let (outcome, _) =
            stream::<Messages>(&events(&[message_start(json!({})), overloaded.clone()]));
        assert_eq!(
            failure(outcome),
            format!(
                "interrupted: the stream broke before any text: the stream reported an error: {}",
                overloaded["error"]
            )
        );
        let invalid =
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "no"}});
        let (outcome, _) = stream::<Messages>(&events(std::slice::from_ref(&invalid)));
        assert!(failure(outcome).starts_with("fatal: "));
        // Without an `error` member, the event itself is shown.
        let bare = json!({"type": "error", "message": "gone"});
        let (outcome, _) = stream::<Messages>(&events(std::slice::from_ref(&bare)));
        assert!(failure(outcome).ends_with(&format!("the stream reported an error: {bare}")));
    }

    #[test]
    fn malformed_answers_keep_their_messages() {
        let error =
            json!({"type": "error", "error": {"type": "not_found_error", "message": "model: x"}});
        assert!(failure(whole::<Messages>(&error)).ends_with(&format!(
            "the response reports an error: {}",
            error["error"]
        )));
        let no_content = json!({"type": "message", "model": "m"});
        assert!(failure(whole::<Messages>(&no_content))
            .ends_with(r#"the response has no content: {"model":"m","type":"message"}"#));
        let cut = events(&[
            message_start(json!({"input_tokens": 3})),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "par"}}),
        ]);
        assert_eq!(
            failure(stream::<Messages>(&cut).0),
            "interrupted: the stream broke after 3 characters of the answer: \
             the stream ended after 2 event(s) without message_stop"
        );
    }
}

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
    /// Its arguments: a JSON string per the API; an object from servers that send
    /// Ollama's native shape.
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

#[cfg(test)]
mod tests {
    //! Answers shaped as each server family sends them, read into what the provider
    //! returns.

    use serde_json::json;

    use super::super::ChatCompletions;
    use crate::wire::replay::{failure, sse, stream, whole};
    use crate::{ToolCall, Usage};

    fn usage(prompt_tokens: u64, completion_tokens: u64) -> Usage {
        Usage {
            prompt_tokens,
            completion_tokens,
        }
    }

    #[test]
    fn openai_whole_answer_with_usage_details() {
        let body = json!({
            "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", "object": "chat.completion",
            "created": 1741570283, "model": "gpt-4o-2024-08-06",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": "Paris.", "refusal": null, "annotations": []},
                "logprobs": null, "finish_reason": "stop"
            }],
            "usage": {
                "prompt_tokens": 19, "completion_tokens": 2, "total_tokens": 21,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}
            },
            "service_tier": "default", "system_fingerprint": "fp_f9f4fb6dbf"
        });
        let completion = whole::<ChatCompletions>(&body).unwrap();
        assert_eq!(completion.text, "Paris.");
        assert_eq!(completion.usage, usage(19, 2));
        assert!(completion.usage_reported);
        assert_eq!(completion.model, "gpt-4o-2024-08-06");
        assert!(completion.tool_calls.is_empty());
    }

    #[test]
    fn openai_whole_tool_calls_with_null_content() {
        let body = json!({
            "id": "chatcmpl-abc", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant", "content": null, "refusal": null,
                    "tool_calls": [
                        {"id": "call_a", "type": "function", "function": {"name": "ctx_grep", "arguments": "{\"pattern\":\"x\"}"}},
                        {"id": "call_b", "type": "function", "function": {"name": "ctx_slice", "arguments": ""}}
                    ]
                },
                "finish_reason": "tool_calls"
            }],
            "usage": {"prompt_tokens": 80, "completion_tokens": 30, "total_tokens": 110}
        });
        let completion = whole::<ChatCompletions>(&body).unwrap();
        assert_eq!(completion.text, "");
        assert_eq!(
            completion.tool_calls,
            [
                ToolCall {
                    id: "call_a".into(),
                    name: "ctx_grep".into(),
                    arguments: r#"{"pattern":"x"}"#.into()
                },
                // Empty arguments read as an empty object.
                ToolCall {
                    id: "call_b".into(),
                    name: "ctx_slice".into(),
                    arguments: "{}".into()
                },
            ]
        );
    }

    #[test]
    fn openai_stream_with_usage_in_the_last_chunk() {
        let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                   "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_1",
                   "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
                   "usage": null})
        };
        let mut body = sse(&[
            chunk(
                json!({"role": "assistant", "content": "", "refusal": null}),
                json!(null),
            ),
            chunk(json!({"content": "Par"}), json!(null)),
            chunk(json!({"content": "is."}), json!(null)),
            chunk(json!({}), json!("stop")),
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o-2024-08-06",
                   "choices": [], "usage": {"prompt_tokens": 19, "completion_tokens": 2, "total_tokens": 21}}),
        ]);
        body.push_str("data: [DONE]\n\n");
        let (outcome, shown) = stream::<ChatCompletions>(&body);
        let completion = outcome.unwrap();
        assert_eq!(completion.text, "Paris.");
        assert_eq!(shown, "Paris.");
        assert_eq!(completion.usage, usage(19, 2));
        assert!(completion.usage_reported);
    }

    #[test]
    fn openai_streamed_tool_call_pieces_join_by_index() {
        let call = |piece: serde_json::Value| json!({"model": "gpt-4o", "choices": [{"index": 0, "delta": {"tool_calls": [piece]}, "finish_reason": null}]});
        let mut body = sse(&[
            json!({"model": "gpt-4o", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null}}]}),
            call(
                json!({"index": 0, "id": "call_1", "type": "function", "function": {"name": "ctx_grep", "arguments": ""}}),
            ),
            call(
                json!({"index": 1, "id": "call_2", "type": "function", "function": {"name": "ctx_slice", "arguments": "{}"}}),
            ),
            call(json!({"index": 0, "function": {"arguments": "{\"pat"}})),
            call(json!({"index": 0, "function": {"arguments": "tern\": \"x\"}"}})),
            json!({"model": "gpt-4o", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        ]);
        body.push_str("data: [DONE]\n\n");
        let completion = stream::<ChatCompletions>(&body).0.unwrap();
        let calls: Vec<(&str, &str, &str)> = completion
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            [
                ("call_1", "ctx_grep", r#"{"pattern": "x"}"#),
                ("call_2", "ctx_slice", "{}")
            ]
        );
        // No usage reported: estimated from the request and the answer.
        assert!(!completion.usage_reported);
        assert_eq!(completion.usage.prompt_tokens, 3);
    }

    #[test]
    fn vllm_whole_answer_with_its_extra_nulls() {
        let body = json!({
            "id": "chatcmpl-5c6a", "object": "chat.completion", "created": 1741000000,
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "reasoning_content": null, "content": "42", "tool_calls": []},
                "logprobs": null, "finish_reason": "stop", "stop_reason": null
            }],
            "usage": {"prompt_tokens": 30, "total_tokens": 32, "completion_tokens": 2, "prompt_tokens_details": null},
            "prompt_logprobs": null, "kv_transfer_params": null
        });
        let completion = whole::<ChatCompletions>(&body).unwrap();
        assert_eq!(completion.text, "42");
        assert_eq!(completion.usage, usage(30, 2));
        assert_eq!(completion.model, "Qwen/Qwen2.5-7B-Instruct");
        assert!(completion.tool_calls.is_empty());
    }

    #[test]
    fn vllm_stream_without_usage_is_estimated() {
        let chunk = |content: &str, finish: serde_json::Value| {
            json!({"id": "chatcmpl-5c6a", "object": "chat.completion.chunk", "created": 1,
                   "model": "Qwen/Qwen2.5-7B-Instruct",
                   "choices": [{"index": 0, "delta": {"content": content}, "logprobs": null,
                                "finish_reason": finish, "stop_reason": null}]})
        };
        let mut body = sse(&[
            chunk("", json!(null)),
            chunk("FINAL(42)", json!(null)),
            chunk("", json!("stop")),
        ]);
        body.push_str("data: [DONE]\n\n");
        let (outcome, shown) = stream::<ChatCompletions>(&body);
        let completion = outcome.unwrap();
        assert_eq!(completion.text, "FINAL(42)");
        assert_eq!(shown, "FINAL(42)");
        assert!(!completion.usage_reported);
        assert_eq!(completion.usage, usage(3, 3));
        assert_eq!(completion.model, "Qwen/Qwen2.5-7B-Instruct");
    }

    #[test]
    fn llama_cpp_whole_answer_with_timings() {
        let body = json!({
            "choices": [{"finish_reason": "stop", "index": 0,
                         "message": {"role": "assistant", "content": "Hello."}}],
            "created": 1741000000, "model": "gpt-3.5-turbo", "system_fingerprint": "b5000-abc",
            "object": "chat.completion",
            "usage": {"completion_tokens": 3, "prompt_tokens": 11, "total_tokens": 14},
            "id": "chatcmpl-xyz",
            "timings": {"prompt_n": 11, "prompt_ms": 20.5, "predicted_n": 3, "predicted_per_second": 50.1}
        });
        let completion = whole::<ChatCompletions>(&body).unwrap();
        assert_eq!(completion.text, "Hello.");
        assert_eq!(completion.usage, usage(11, 3));
    }

    #[test]
    fn llama_cpp_stream_with_usage_and_timings_in_the_finish_chunk() {
        let mut body = sse(&[
            json!({"choices": [{"finish_reason": null, "index": 0, "delta": {"role": "assistant", "content": null}}],
                   "created": 1, "id": "chatcmpl-x", "model": "local", "object": "chat.completion.chunk"}),
            json!({"choices": [{"finish_reason": null, "index": 0, "delta": {"content": "Hel"}}],
                   "created": 1, "id": "chatcmpl-x", "model": "local", "object": "chat.completion.chunk"}),
            json!({"choices": [{"finish_reason": null, "index": 0, "delta": {"content": "lo."}}],
                   "created": 1, "id": "chatcmpl-x", "model": "local", "object": "chat.completion.chunk"}),
            json!({"choices": [{"finish_reason": "stop", "index": 0, "delta": {}}],
                   "created": 1, "id": "chatcmpl-x", "model": "local", "object": "chat.completion.chunk",
                   "usage": {"completion_tokens": 3, "prompt_tokens": 11, "total_tokens": 14},
                   "timings": {"prompt_n": 11, "predicted_n": 3}}),
        ]);
        body.push_str("data: [DONE]\n\n");
        let completion = stream::<ChatCompletions>(&body).0.unwrap();
        assert_eq!(completion.text, "Hello.");
        assert_eq!(completion.usage, usage(11, 3));
        assert_eq!(completion.model, "local");
    }

    #[test]
    fn ollama_whole_answer_and_tool_call_with_object_arguments() {
        let body = json!({
            "id": "chatcmpl-123", "object": "chat.completion", "created": 1741000000,
            "model": "llama3.2", "system_fingerprint": "fp_ollama",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "",
                "tool_calls": [{"id": "call_x1", "index": 0, "type": "function",
                                "function": {"name": "ctx_grep", "arguments": {"pattern": "x"}}}]
            }}],
            "usage": {"prompt_tokens": 26, "completion_tokens": 10, "total_tokens": 36}
        });
        let completion = whole::<ChatCompletions>(&body).unwrap();
        assert_eq!(completion.text, "");
        assert_eq!(completion.tool_calls[0].id, "call_x1");
        assert_eq!(completion.tool_calls[0].arguments, r#"{"pattern":"x"}"#);
        assert_eq!(completion.usage, usage(26, 10));
        assert_eq!(completion.model, "llama3.2");
    }

    #[test]
    fn ollama_stream_sends_a_whole_tool_call_in_one_chunk() {
        let mut body = sse(&[
            json!({"id": "chatcmpl-7", "object": "chat.completion.chunk", "model": "qwen3",
                   "system_fingerprint": "fp_ollama",
                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": "",
                       "tool_calls": [{"id": "call_q", "index": 0, "type": "function",
                                       "function": {"name": "ctx_slice", "arguments": "{\"start\":0}"}}]},
                       "finish_reason": null}]}),
            json!({"id": "chatcmpl-7", "object": "chat.completion.chunk", "model": "qwen3",
                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": "tool_calls"}]}),
        ]);
        body.push_str("data: [DONE]\n\n");
        let completion = stream::<ChatCompletions>(&body).0.unwrap();
        assert_eq!(
            completion.tool_calls,
            [ToolCall {
                id: "call_q".into(),
                name: "ctx_slice".into(),
                arguments: r#"{"start":0}"#.into()
            }]
        );
    }

    #[test]
    fn openrouter_comments_and_an_error_sent_with_success_status() {
        let mut body = String::from(": OPENROUTER PROCESSING\n\n");
        body.push_str(&sse(&[
            json!({"id": "gen-1", "provider": "Together", "model": "meta-llama/llama-3.3-70b-instruct",
                   "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}, "finish_reason": null, "native_finish_reason": null}]}),
            json!({"id": "gen-1", "provider": "Together", "model": "meta-llama/llama-3.3-70b-instruct",
                   "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9, "cost": 0.0001}}),
        ]));
        body.push_str("data: [DONE]\n\n");
        let completion = stream::<ChatCompletions>(&body).0.unwrap();
        assert_eq!(completion.text, "Hi");
        assert_eq!(completion.usage, usage(8, 1));

        let error =
            json!({"error": {"code": 502, "message": "Provider returned error"}, "user_id": "u"});
        assert_eq!(
            failure(whole::<ChatCompletions>(&error)),
            format!(
                "fatal: model endpoint http://127.0.0.1:1/v1/test sent a response rlm cannot read: \
                 the response reports an error: {}",
                error["error"]
            )
        );
        let (outcome, _) = stream::<ChatCompletions>(&sse(std::slice::from_ref(&error)));
        assert!(failure(outcome)
            .ends_with(&format!("the stream reported an error: {}", error["error"])));
    }

    #[test]
    fn malformed_answers_keep_their_messages() {
        let no_choices = json!({"object": "chat.completion", "choices": []});
        assert!(failure(whole::<ChatCompletions>(&no_choices)).ends_with(
            r#"the response has no choices: {"choices":[],"object":"chat.completion"}"#
        ));
        let (outcome, _) = stream::<ChatCompletions>("data: {\"choices\": [\n\n");
        assert!(failure(outcome).contains("a stream chunk is not JSON"));
        let (outcome, shown) = stream::<ChatCompletions>(&sse(&[
            json!({"choices": [{"delta": {"content": "half"}}]}),
        ]));
        assert_eq!(shown, "half");
        assert_eq!(
            failure(outcome),
            "interrupted: the stream broke after 4 characters of the answer: \
             the stream ended after 1 chunk(s) without data: [DONE]"
        );
    }

    #[test]
    fn legacy_text_and_content_parts() {
        let legacy = json!({"choices": [{"text": "old style", "index": 0}], "model": 7});
        let completion = whole::<ChatCompletions>(&legacy).unwrap();
        assert_eq!(completion.text, "old style");
        // A model name of another type is no name: the configured one stands.
        assert_eq!(completion.model, "configured");
        let parts = json!({"choices": [{"message": {"content": [
            {"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "b"}
        ]}}]});
        assert_eq!(whole::<ChatCompletions>(&parts).unwrap().text, "ab");
    }
}

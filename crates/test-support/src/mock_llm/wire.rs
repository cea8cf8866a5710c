//! The bodies the mock sends: OpenAI Chat Completions and Anthropic Messages, whole or
//! as SSE streams, and each API's error object.
//!
//! Shapes follow the public APIs closely enough that a real client library would accept
//! them; the providers under test must not be able to tell the difference.

use serde_json::{json, Value};

use super::{Api, RecordedRequest};

/// A text answer as one JSON body.
pub(crate) fn completion_body(
    api: Api,
    id: u64,
    model: &str,
    text: &str,
    usage: Option<(u64, u64)>,
) -> Value {
    match api {
        Api::OpenAi => {
            let mut body = json!({
                "id": format!("chatcmpl-mock-{id}"),
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop"
                }],
            });
            if let Some((prompt, completion)) = usage {
                body["usage"] = json!({
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                });
            }
            body
        }
        Api::Anthropic => {
            let mut body = json!({
                "id": format!("msg_mock_{id}"),
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "stop_sequence": null,
            });
            if let Some((input, output)) = usage {
                body["usage"] = json!({"input_tokens": input, "output_tokens": output});
            }
            body
        }
    }
}

/// A text answer as SSE events, each a complete `event:`/`data:` block.
pub(crate) fn stream_events(
    api: Api,
    id: u64,
    model: &str,
    text: &str,
    usage: Option<(u64, u64)>,
    include_usage: bool,
) -> Vec<String> {
    let deltas = split_deltas(text);
    match api {
        Api::OpenAi => {
            let chunk = |delta: Value, finish: Value| {
                data_event(&json!({
                    "id": format!("chatcmpl-mock-{id}"),
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }))
            };
            let mut events = vec![chunk(
                json!({"role": "assistant", "content": ""}),
                Value::Null,
            )];
            events.extend(
                deltas
                    .iter()
                    .map(|piece| chunk(json!({"content": piece}), Value::Null)),
            );
            events.push(chunk(json!({}), json!("stop")));
            if let (Some((prompt, completion)), true) = (usage, include_usage) {
                events.push(data_event(&json!({
                    "id": format!("chatcmpl-mock-{id}"),
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": prompt,
                        "completion_tokens": completion,
                        "total_tokens": prompt + completion,
                    },
                })));
            }
            events.push("data: [DONE]\n\n".to_owned());
            events
        }
        Api::Anthropic => {
            let mut start = json!({
                "type": "message_start",
                "message": {
                    "id": format!("msg_mock_{id}"),
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": null,
                    "stop_sequence": null,
                },
            });
            if let Some((input, _)) = usage {
                start["message"]["usage"] = json!({"input_tokens": input, "output_tokens": 1});
            }
            let mut events = vec![
                named_event("message_start", &start),
                named_event(
                    "content_block_start",
                    &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                ),
                named_event("ping", &json!({"type": "ping"})),
            ];
            events.extend(deltas.iter().map(|piece| {
                named_event(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}),
                )
            }));
            events.push(named_event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": 0}),
            ));
            let mut delta = json!({
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            });
            if let Some((_, output)) = usage {
                delta["usage"] = json!({"output_tokens": output});
            }
            events.push(named_event("message_delta", &delta));
            events.push(named_event(
                "message_stop",
                &json!({"type": "message_stop"}),
            ));
            events
        }
    }
}

/// The body of an error status: JSON bodies as given, text wrapped in the API's shape.
pub(crate) fn error_body(api: Option<Api>, status: u16, body: &str) -> String {
    if serde_json::from_str::<Value>(body).is_ok() {
        return body.to_owned();
    }
    let value = match api {
        Some(Api::Anthropic) => json!({
            "type": "error",
            "error": {"type": if status == 429 { "rate_limit_error" } else { "api_error" }, "message": body},
        }),
        _ => json!({"error": {"message": body, "type": "mock_error", "code": status}}),
    };
    value.to_string()
}

/// Usage estimated as the providers do: characters / 4, rounded up.
pub(crate) fn estimate_usage(request: &RecordedRequest, answer: &str) -> (u64, u64) {
    let tokens = |chars: usize| u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX);
    (
        tokens(request.prompt_chars()),
        tokens(answer.chars().count()),
    )
}

/// Cuts an answer into stream deltas: one per word, with the whitespace that follows.
fn split_deltas(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (index, ch) in text.char_indices() {
        if ch.is_whitespace() {
            in_space = true;
        } else if in_space {
            pieces.push(&text[start..index]);
            start = index;
            in_space = false;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

fn data_event(value: &Value) -> String {
    format!("data: {value}\n\n")
}

fn named_event(name: &str, value: &Value) -> String {
    format!("event: {name}\ndata: {value}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_keep_every_character() {
        assert_eq!(split_deltas("héllo  wörld !"), ["héllo  ", "wörld ", "!"]);
        assert!(split_deltas("").is_empty());
        assert_eq!(split_deltas(" lead").concat(), " lead");
    }

    #[test]
    fn openai_stream_ends_with_done_and_usage_when_asked() {
        let events = stream_events(Api::OpenAi, 1, "m", "a b", Some((3, 1)), true);
        assert_eq!(events.last().map(String::as_str), Some("data: [DONE]\n\n"));
        assert!(events[events.len() - 2].contains("\"prompt_tokens\":3"));
        let without = stream_events(Api::OpenAi, 1, "m", "a b", Some((3, 1)), false);
        assert!(!without.iter().any(|event| event.contains("prompt_tokens")));
    }

    #[test]
    fn errors_are_wrapped_unless_json() {
        assert_eq!(error_body(Some(Api::OpenAi), 500, "{\"x\":1}"), "{\"x\":1}");
        assert!(error_body(Some(Api::Anthropic), 429, "slow").contains("rate_limit_error"));
        assert!(error_body(None, 500, "boom").contains("\"message\":\"boom\""));
    }

    fn data(json: &str) -> String {
        format!("data: {json}\n\n")
    }

    fn named(name: &str, json: &str) -> String {
        format!("event: {name}\ndata: {json}\n\n")
    }

    /// Text replies are pinned byte for byte: tool calls must not change them.
    #[test]
    fn text_replies_keep_their_exact_shape() {
        let usage = Some((3, 2));
        assert_eq!(
            stream_events(Api::OpenAi, 7, "m", "hé there", usage, true),
            [
                data(
                    r#"{"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0}],"created":0,"id":"chatcmpl-mock-7","model":"m","object":"chat.completion.chunk"}"#
                ),
                data(
                    r#"{"choices":[{"delta":{"content":"hé "},"finish_reason":null,"index":0}],"created":0,"id":"chatcmpl-mock-7","model":"m","object":"chat.completion.chunk"}"#
                ),
                data(
                    r#"{"choices":[{"delta":{"content":"there"},"finish_reason":null,"index":0}],"created":0,"id":"chatcmpl-mock-7","model":"m","object":"chat.completion.chunk"}"#
                ),
                data(
                    r#"{"choices":[{"delta":{},"finish_reason":"stop","index":0}],"created":0,"id":"chatcmpl-mock-7","model":"m","object":"chat.completion.chunk"}"#
                ),
                data(
                    r#"{"choices":[],"created":0,"id":"chatcmpl-mock-7","model":"m","object":"chat.completion.chunk","usage":{"completion_tokens":2,"prompt_tokens":3,"total_tokens":5}}"#
                ),
                "data: [DONE]\n\n".to_owned(),
            ]
        );
        assert_eq!(
            stream_events(Api::Anthropic, 7, "m", "hé there", usage, true),
            [
                named(
                    "message_start",
                    r#"{"message":{"content":[],"id":"msg_mock_7","model":"m","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"input_tokens":3,"output_tokens":1}},"type":"message_start"}"#
                ),
                named(
                    "content_block_start",
                    r#"{"content_block":{"text":"","type":"text"},"index":0,"type":"content_block_start"}"#
                ),
                named("ping", r#"{"type":"ping"}"#),
                named(
                    "content_block_delta",
                    r#"{"delta":{"text":"hé ","type":"text_delta"},"index":0,"type":"content_block_delta"}"#
                ),
                named(
                    "content_block_delta",
                    r#"{"delta":{"text":"there","type":"text_delta"},"index":0,"type":"content_block_delta"}"#
                ),
                named(
                    "content_block_stop",
                    r#"{"index":0,"type":"content_block_stop"}"#
                ),
                named(
                    "message_delta",
                    r#"{"delta":{"stop_reason":"end_turn","stop_sequence":null},"type":"message_delta","usage":{"output_tokens":2}}"#
                ),
                named("message_stop", r#"{"type":"message_stop"}"#),
            ]
        );
        assert_eq!(
            completion_body(Api::OpenAi, 7, "m", "hé", usage).to_string(),
            r#"{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"hé","role":"assistant"}}],"created":0,"id":"chatcmpl-mock-7","model":"m","object":"chat.completion","usage":{"completion_tokens":2,"prompt_tokens":3,"total_tokens":5}}"#
        );
        assert_eq!(
            completion_body(Api::Anthropic, 7, "m", "hé", usage).to_string(),
            r#"{"content":[{"text":"hé","type":"text"}],"id":"msg_mock_7","model":"m","role":"assistant","stop_reason":"end_turn","stop_sequence":null,"type":"message","usage":{"input_tokens":3,"output_tokens":2}}"#
        );
        assert_eq!(
            completion_body(Api::OpenAi, 7, "m", "", None).to_string(),
            r#"{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"","role":"assistant"}}],"created":0,"id":"chatcmpl-mock-7","model":"m","object":"chat.completion"}"#
        );
    }
}

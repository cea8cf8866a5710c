//! The bodies the mock sends: OpenAI Chat Completions and Anthropic Messages, text or
//! tool calls, whole or as SSE streams, and each API's error object.
//!
//! Shapes follow the public APIs closely enough that a real client library would accept
//! them; the providers under test must not be able to tell the difference. Streamed
//! tool-call arguments arrive in pieces cut wherever they fall, as real servers cut
//! them, so a client that does not join them by call index fails here first.

use serde_json::{json, Value};

use super::answer::{named_event, split_arguments, split_deltas, Answer};
use super::{Api, RecordedRequest};

/// How a stream is cut beyond its content.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StreamOptions {
    /// OpenAI: end with a usage chunk (Anthropic always reports usage).
    pub(crate) include_usage: bool,
    /// OpenAI: repeat each call's `id`, `type` and `function.name` in every argument
    /// chunk, as llama.cpp's server once did.
    pub(crate) repeat_tool_names: bool,
}

/// An answer as one JSON body.
pub(crate) fn completion_body(
    api: Api,
    id: u64,
    model: &str,
    answer: &Answer<'_>,
    usage: Option<(u64, u64)>,
) -> Value {
    let text = answer.text;
    match api {
        Api::Responses => super::responses::body(id, model, answer, usage),
        Api::OpenAi => {
            let (message, finish) = if answer.is_tool_use() {
                let calls: Vec<Value> = answer
                    .calls()
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        })
                    })
                    .collect();
                let content = if text.is_empty() {
                    Value::Null
                } else {
                    json!(text)
                };
                (
                    json!({"role": "assistant", "content": content, "tool_calls": calls}),
                    "tool_calls",
                )
            } else {
                (json!({"role": "assistant", "content": text}), "stop")
            };
            let mut body = json!({
                "id": format!("chatcmpl-mock-{id}"),
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [{
                    "index": 0,
                    "message": message,
                    "finish_reason": finish
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
            let mut content = Vec::new();
            if !answer.is_tool_use() || !text.is_empty() {
                content.push(json!({"type": "text", "text": text}));
            }
            content.extend(answer.calls().iter().map(|call| {
                json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input})
            }));
            let mut body = json!({
                "id": format!("msg_mock_{id}"),
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": if answer.is_tool_use() { "tool_use" } else { "end_turn" },
                "stop_sequence": null,
            });
            if let Some((input, output)) = usage {
                body["usage"] = json!({"input_tokens": input, "output_tokens": output});
            }
            body
        }
    }
}

/// An answer as SSE events, each a complete `event:`/`data:` block.
pub(crate) fn stream_events(
    api: Api,
    id: u64,
    model: &str,
    answer: &Answer<'_>,
    usage: Option<(u64, u64)>,
    options: StreamOptions,
) -> Vec<String> {
    match api {
        Api::OpenAi => openai_stream(id, model, answer, usage, options),
        Api::Anthropic => anthropic_stream(id, model, answer, usage),
        Api::Responses => super::responses::stream(id, model, answer, usage),
    }
}

/// OpenAI: a role chunk, text deltas, then per call a chunk naming it followed by its
/// argument text in pieces, a finish chunk, usage when asked, `[DONE]`.
fn openai_stream(
    id: u64,
    model: &str,
    answer: &Answer<'_>,
    usage: Option<(u64, u64)>,
    options: StreamOptions,
) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        data_event(&json!({
            "id": format!("chatcmpl-mock-{id}"),
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }))
    };
    // As OpenAI does, a reply that only calls tools starts with `content: null`.
    let first_content = if answer.is_tool_use() && answer.text.is_empty() {
        Value::Null
    } else {
        json!("")
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": first_content}),
        Value::Null,
    )];
    events.extend(
        split_deltas(answer.text)
            .iter()
            .map(|piece| chunk(json!({"content": piece}), Value::Null)),
    );
    for (index, call) in answer.calls().iter().enumerate() {
        let named = |arguments: &str| {
            json!({
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": arguments},
            })
        };
        events.push(chunk(json!({"tool_calls": [named("")]}), Value::Null));
        for piece in split_arguments(&call.arguments) {
            let delta = if options.repeat_tool_names {
                named(piece)
            } else {
                json!({"index": index, "function": {"arguments": piece}})
            };
            events.push(chunk(json!({"tool_calls": [delta]}), Value::Null));
        }
    }
    let finish = if answer.is_tool_use() {
        "tool_calls"
    } else {
        "stop"
    };
    events.push(chunk(json!({}), json!(finish)));
    if let (Some((prompt, completion)), true) = (usage, options.include_usage) {
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

/// Anthropic: `message_start`, one content block per text and per call (start, a
/// `ping` after the first, deltas, stop), `message_delta` with the stop reason and
/// usage, `message_stop`.
fn anthropic_stream(
    id: u64,
    model: &str,
    answer: &Answer<'_>,
    usage: Option<(u64, u64)>,
) -> Vec<String> {
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
    // Each block: what `content_block_start` announces, then its deltas.
    let mut blocks: Vec<(Value, Vec<Value>)> = Vec::new();
    if !answer.is_tool_use() || !answer.text.is_empty() {
        let deltas = split_deltas(answer.text)
            .into_iter()
            .map(|piece| json!({"type": "text_delta", "text": piece}))
            .collect();
        blocks.push((json!({"type": "text", "text": ""}), deltas));
    }
    for call in answer.calls() {
        let deltas = split_arguments(&call.arguments)
            .into_iter()
            .map(|piece| json!({"type": "input_json_delta", "partial_json": piece}))
            .collect();
        blocks.push((
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
            deltas,
        ));
    }
    let ping = named_event("ping", &json!({"type": "ping"}));
    let mut events = vec![named_event("message_start", &start)];
    if blocks.is_empty() {
        events.push(ping.clone());
    }
    for (index, (block, deltas)) in blocks.into_iter().enumerate() {
        events.push(named_event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        if index == 0 {
            events.push(ping.clone());
        }
        events.extend(deltas.into_iter().map(|delta| {
            named_event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            )
        }));
        events.push(named_event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
    let stop_reason = if answer.is_tool_use() {
        "tool_use"
    } else {
        "end_turn"
    };
    let mut delta = json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": null},
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
/// A tool call's arguments count as completion text.
pub(crate) fn estimate_usage(request: &RecordedRequest, answer: &Answer<'_>) -> (u64, u64) {
    let tokens = |chars: usize| u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX);
    (
        tokens(request.prompt_chars()),
        tokens(answer.completion_chars()),
    )
}

fn data_event(value: &Value) -> String {
    format!("data: {value}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock_llm::MockToolCall;

    const USAGE: StreamOptions = StreamOptions {
        include_usage: true,
        repeat_tool_names: false,
    };

    #[test]
    fn deltas_keep_every_character() {
        assert_eq!(split_deltas("héllo  wörld !"), ["héllo  ", "wörld ", "!"]);
        assert!(split_deltas("").is_empty());
        assert_eq!(split_deltas(" lead").concat(), " lead");
    }

    #[test]
    fn openai_stream_ends_with_done_and_usage_when_asked() {
        let text = Answer::text("a b");
        let events = stream_events(Api::OpenAi, 1, "m", &text, Some((3, 1)), USAGE);
        assert_eq!(events.last().map(String::as_str), Some("data: [DONE]\n\n"));
        assert!(events[events.len() - 2].contains("\"prompt_tokens\":3"));
        let no_usage = StreamOptions::default();
        let without = stream_events(Api::OpenAi, 1, "m", &text, Some((3, 1)), no_usage);
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
            stream_events(Api::OpenAi, 7, "m", &Answer::text("hé there"), usage, USAGE),
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
            stream_events(
                Api::Anthropic,
                7,
                "m",
                &Answer::text("hé there"),
                usage,
                USAGE
            ),
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
            completion_body(Api::OpenAi, 7, "m", &Answer::text("hé"), usage).to_string(),
            r#"{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"hé","role":"assistant"}}],"created":0,"id":"chatcmpl-mock-7","model":"m","object":"chat.completion","usage":{"completion_tokens":2,"prompt_tokens":3,"total_tokens":5}}"#
        );
        assert_eq!(
            completion_body(Api::Anthropic, 7, "m", &Answer::text("hé"), usage).to_string(),
            r#"{"content":[{"text":"hé","type":"text"}],"id":"msg_mock_7","model":"m","role":"assistant","stop_reason":"end_turn","stop_sequence":null,"type":"message","usage":{"input_tokens":3,"output_tokens":2}}"#
        );
        assert_eq!(
            completion_body(Api::OpenAi, 7, "m", &Answer::text(""), None).to_string(),
            r#"{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"","role":"assistant"}}],"created":0,"id":"chatcmpl-mock-7","model":"m","object":"chat.completion"}"#
        );
    }

    fn grep_call() -> MockToolCall {
        MockToolCall::new(
            "ctx_grep",
            json!({"variable": "context", "pattern": "ERROR"}),
        )
    }

    /// `(event name, data)` of each SSE block; OpenAI's blocks have no name.
    fn parse(events: &[String]) -> Vec<(Option<String>, Value)> {
        events
            .iter()
            .map(|event| {
                let block = event.strip_suffix("\n\n").unwrap();
                let (name, data) = match block.strip_prefix("event: ") {
                    Some(rest) => {
                        let (name, data) = rest.split_once('\n').unwrap();
                        (Some(name.to_owned()), data)
                    }
                    None => (None, block),
                };
                let data = data.strip_prefix("data: ").unwrap();
                let value = if data == "[DONE]" {
                    json!("[DONE]")
                } else {
                    serde_json::from_str(data).unwrap()
                };
                (name, value)
            })
            .collect()
    }

    /// The OpenAI stream's deltas, one per chunk (`Null` for the usage chunk and
    /// `[DONE]`).
    fn openai_deltas(events: &[String]) -> Vec<Value> {
        parse(events)
            .into_iter()
            .map(|(_, data)| {
                data.pointer("/choices/0/delta")
                    .cloned()
                    .unwrap_or_default()
            })
            .collect()
    }

    /// Joins streamed OpenAI argument pieces by call index, as a client must.
    fn openai_arguments(events: &[String]) -> Vec<String> {
        let mut joined: Vec<String> = Vec::new();
        for delta in openai_deltas(events) {
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                let index = usize::try_from(call["index"].as_u64().unwrap()).unwrap();
                if joined.len() <= index {
                    joined.resize(index + 1, String::new());
                }
                joined[index].push_str(call["function"]["arguments"].as_str().unwrap());
            }
        }
        joined
    }

    /// Joins Anthropic `partial_json` pieces by block index (text blocks give "").
    fn anthropic_arguments(events: &[String]) -> Vec<String> {
        let mut joined: Vec<String> = Vec::new();
        for (name, data) in parse(events) {
            let index = data["index"].as_u64().map(|i| usize::try_from(i).unwrap());
            match (name.as_deref(), index) {
                (Some("content_block_start"), Some(_)) => joined.push(String::new()),
                (Some("content_block_delta"), Some(index)) => {
                    if let Some(piece) = data["delta"]["partial_json"].as_str() {
                        joined[index].push_str(piece);
                    }
                }
                _ => {}
            }
        }
        joined
    }

    #[test]
    fn arguments_are_cut_on_character_boundaries_into_at_most_three_pieces() {
        assert_eq!(split_arguments(""), [""]);
        assert_eq!(split_arguments("x"), ["x"]);
        assert_eq!(split_arguments("{}"), ["{", "}"]);
        assert_eq!(
            split_arguments(r#"{"pattern":"ERROR","variable":"context"}"#),
            [r#"{"pattern":"E"#, r#"RROR","variab"#, r#"le":"context"}"#]
        );
        let wide = r#"{"pattern":"é🙂ü","variable":"ctx"}"#;
        for cut in 0..wide.chars().count() {
            let text: String = wide.chars().take(cut).collect();
            let pieces = split_arguments(&text);
            assert_eq!(pieces.concat(), text);
            assert!(pieces.len() <= 3);
        }
        assert_eq!(split_arguments("é🙂ü"), ["é", "🙂", "ü"]);
    }

    #[test]
    fn openai_whole_tool_calls() {
        let calls = [
            grep_call(),
            MockToolCall::raw("ctx_len", "{").with_id("mine"),
        ];
        let answer = Answer::tool_calls(Api::OpenAi, 4, "", &calls);
        let body = completion_body(Api::OpenAi, 4, "m", &answer, Some((10, 5)));
        assert_eq!(
            body["choices"][0],
            json!({
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [
                        {"id": "call_4_0", "type": "function", "function": {
                            "name": "ctx_grep",
                            "arguments": r#"{"pattern":"ERROR","variable":"context"}"#}},
                        {"id": "mine", "type": "function", "function": {
                            "name": "ctx_len", "arguments": "{"}},
                    ],
                },
                "finish_reason": "tool_calls",
            })
        );
        assert_eq!(body["usage"]["total_tokens"], 15);
        let with_text = Answer::tool_calls(Api::OpenAi, 4, "Looking.", &calls);
        let body = completion_body(Api::OpenAi, 4, "m", &with_text, None);
        assert_eq!(body["choices"][0]["message"]["content"], "Looking.");
    }

    /// The OpenAI stream a test of the orchestrator's tools mode sees, event by event.
    #[test]
    fn openai_streamed_tool_calls() {
        let answer = Answer::tool_calls(Api::OpenAi, 3, "", &[grep_call()]);
        let events = stream_events(Api::OpenAi, 3, "m", &answer, Some((10, 13)), USAGE);
        let chunks = parse(&events);
        assert_eq!(
            openai_deltas(&events),
            [
                json!({"role": "assistant", "content": null}),
                json!({"tool_calls": [{"index": 0, "id": "call_3_0", "type": "function",
                    "function": {"name": "ctx_grep", "arguments": ""}}]}),
                json!({"tool_calls": [{"index": 0, "function": {"arguments": r#"{"pattern":"E"#}}]}),
                json!({"tool_calls": [{"index": 0, "function": {"arguments": r#"RROR","variab"#}}]}),
                json!({"tool_calls": [{"index": 0, "function": {"arguments": r#"le":"context"}"#}}]}),
                json!({}),
                Value::Null,
                Value::Null,
            ]
        );
        let finishes: Vec<&Value> = chunks
            .iter()
            .map(|(_, data)| &data["choices"][0]["finish_reason"])
            .collect();
        assert_eq!(finishes[5], "tool_calls");
        assert!(finishes[..5].iter().all(|finish| finish.is_null()));
        assert_eq!(chunks[6].1["usage"]["completion_tokens"], 13);
        assert_eq!(events[7], "data: [DONE]\n\n");
        assert!(chunks.iter().all(|(name, _)| name.is_none()));
    }

    #[test]
    fn openai_streams_text_then_every_call_by_index() {
        let calls = [
            grep_call(),
            MockToolCall::new(
                "ctx_slice",
                json!({"variable": "é🙂", "start": 0, "end": 9}),
            ),
            MockToolCall::raw("ctx_grep", r#"{"pattern": "unterminated"#),
        ];
        let answer = Answer::tool_calls(Api::OpenAi, 0, "Let me look.", &calls);
        let events = stream_events(Api::OpenAi, 0, "m", &answer, None, USAGE);
        let deltas = openai_deltas(&events);
        assert_eq!(deltas[0], json!({"role": "assistant", "content": ""}));
        let text: String = deltas
            .iter()
            .filter_map(|delta| delta["content"].as_str())
            .collect();
        assert_eq!(text, "Let me look.");
        let expected: Vec<String> = calls.iter().map(MockToolCall::arguments_text).collect();
        assert_eq!(openai_arguments(&events), expected);
        // Each call: a chunk naming it, then 2 or 3 chunks of arguments alone.
        let per_call: Vec<usize> = (0..calls.len())
            .map(|index| {
                deltas
                    .iter()
                    .filter(|delta| delta["tool_calls"][0]["index"] == index)
                    .count()
            })
            .collect();
        assert_eq!(per_call, [4, 4, 4]);
        let names: Vec<&str> = deltas
            .iter()
            .filter_map(|delta| delta["tool_calls"][0]["function"]["name"].as_str())
            .collect();
        assert_eq!(names, ["ctx_grep", "ctx_slice", "ctx_grep"]);
        // No usage: no usage chunk, still `[DONE]`.
        assert_eq!(events.last().map(String::as_str), Some("data: [DONE]\n\n"));
        assert!(!events.iter().any(|event| event.contains("usage")));
    }

    #[test]
    fn llama_cpp_style_repeats_id_type_and_name_in_every_argument_chunk() {
        let calls = [grep_call(), MockToolCall::new("ctx_len", json!({}))];
        let answer = Answer::tool_calls(Api::OpenAi, 1, "", &calls);
        let options = StreamOptions {
            repeat_tool_names: true,
            ..USAGE
        };
        let events = stream_events(Api::OpenAi, 1, "m", &answer, None, options);
        let tool_chunks: Vec<Value> = openai_deltas(&events)
            .into_iter()
            .filter_map(|delta| delta.get("tool_calls").map(|calls| calls[0].clone()))
            .collect();
        assert_eq!(tool_chunks.len(), 4 + 3);
        assert_eq!(
            tool_chunks[1],
            json!({"index": 0, "id": "call_1_0", "type": "function",
                "function": {"name": "ctx_grep", "arguments": r#"{"pattern":"E"#}})
        );
        assert!(tool_chunks
            .iter()
            .all(|chunk| chunk["id"].is_string() && chunk["function"]["name"].is_string()));
        // Joining only the arguments by index gives them back; joining names would not.
        assert_eq!(
            openai_arguments(&events),
            [calls[0].arguments_text(), "{}".to_owned()]
        );
    }

    #[test]
    fn anthropic_whole_tool_calls() {
        let calls = [
            grep_call().with_id("toolu_given"),
            MockToolCall::new("ctx_len", json!({})),
        ];
        let answer = Answer::tool_calls(Api::Anthropic, 2, "", &calls);
        let body = completion_body(Api::Anthropic, 2, "m", &answer, Some((10, 5)));
        assert_eq!(
            body["content"],
            json!([
                {"type": "tool_use", "id": "toolu_given", "name": "ctx_grep",
                    "input": {"variable": "context", "pattern": "ERROR"}},
                {"type": "tool_use", "id": "toolu_2_1", "name": "ctx_len", "input": {}},
            ])
        );
        assert_eq!(body["stop_reason"], "tool_use");
        assert_eq!(
            body["usage"],
            json!({"input_tokens": 10, "output_tokens": 5})
        );
        let answer = Answer::tool_calls(Api::Anthropic, 2, "Looking.", &calls[..1]);
        let body = completion_body(Api::Anthropic, 2, "m", &answer, None);
        assert_eq!(
            body["content"][0],
            json!({"type": "text", "text": "Looking."})
        );
        assert_eq!(body["content"][1]["type"], "tool_use");
    }

    /// The Anthropic stream a test of the orchestrator's tools mode sees, event by event.
    #[test]
    fn anthropic_streamed_tool_calls() {
        let calls = [grep_call()];
        let answer = Answer::tool_calls(Api::Anthropic, 5, "Looking.", &calls);
        let events = stream_events(Api::Anthropic, 5, "m", &answer, Some((10, 6)), USAGE);
        let parsed = parse(&events);
        let names: Vec<&str> = parsed
            .iter()
            .map(|(name, _)| name.as_deref().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "ping",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        let data: Vec<&Value> = parsed.iter().map(|(_, data)| data).collect();
        assert_eq!(
            *data[1],
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}})
        );
        assert_eq!(
            *data[3],
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": "Looking."}})
        );
        assert_eq!(
            *data[5],
            json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_5_0", "name": "ctx_grep",
                    "input": {}}})
        );
        assert_eq!(
            *data[6],
            json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": r#"{"pattern":"E"#}})
        );
        assert_eq!(*data[9], json!({"type": "content_block_stop", "index": 1}));
        assert_eq!(
            *data[10],
            json!({"type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                "usage": {"output_tokens": 6}})
        );
        assert_eq!(
            anthropic_arguments(&events),
            ["", &calls[0].arguments_text()]
        );
    }

    #[test]
    fn anthropic_streams_calls_without_text_from_block_zero() {
        let calls = [
            MockToolCall::new("ctx_slice", json!({"variable": "é🙂"})),
            MockToolCall::raw("ctx_grep", "not json"),
        ];
        let answer = Answer::tool_calls(Api::Anthropic, 0, "", &calls);
        let events = stream_events(Api::Anthropic, 0, "m", &answer, None, USAGE);
        let parsed = parse(&events);
        assert_eq!(parsed[1].1["content_block"]["type"], "tool_use");
        assert_eq!(parsed[1].1["index"], 0);
        assert_eq!(parsed[2].0.as_deref(), Some("ping"));
        assert_eq!(
            anthropic_arguments(&events),
            [r#"{"variable":"é🙂"}"#, "not json"]
        );
        // The raw text, whole, is a JSON string instead of an input object.
        let body = completion_body(Api::Anthropic, 0, "m", &answer, None);
        assert_eq!(body["content"][1]["input"], "not json");
    }

    #[test]
    fn tool_calls_count_as_completion_characters() {
        let request = RecordedRequest {
            index: 0,
            connection: 0,
            method: "POST".into(),
            path: "/v1/messages".into(),
            api: Some(Api::Anthropic),
            headers: Vec::new(),
            auth_headers: Vec::new(),
            body: json!({"messages": [{"role": "user", "content": [
                {"type": "text", "text": "abcd"},
                {"type": "tool_result", "tool_use_id": "t", "content": "efgh"}
            ]}]}),
            body_bytes: 0,
            received_unix_us: 0,
            side_in_flight: 0,
            side_answered: 0,
        };
        // 8 characters of name and 40 of arguments: 48 / 4.
        let calls = [grep_call()];
        let answer = Answer::tool_calls(Api::Anthropic, 0, "", &calls);
        assert_eq!(estimate_usage(&request, &answer), (2, 12));
        let answer = Answer::tool_calls(Api::Anthropic, 0, "abcd", &calls);
        assert_eq!(estimate_usage(&request, &answer), (2, 13));
    }
}

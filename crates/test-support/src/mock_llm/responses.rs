//! The OpenAI Responses API on the wire (`POST /v1/responses`), as the Codex CLI
//! speaks it: a response object whose `output` is a list of items (an assistant
//! `message` with `output_text` parts, `function_call`s, `custom_tool_call`s), whole or
//! as a typed SSE stream.
//!
//! Every streamed event is an `event: <type>` line and a `data:` JSON object carrying
//! the same `type` and a `sequence_number` counting from 0, as OpenAI sends them:
//! `response.created`, `response.in_progress`, per output item
//! `response.output_item.added` … `response.output_item.done` (with
//! `response.content_part.*` and `response.output_text.delta`/`.done` for a message,
//! `response.function_call_arguments.delta`/`.done` for a function call,
//! `response.custom_tool_call_input.delta`/`.done` for a custom tool call), and last
//! `response.completed` holding the whole response and its `usage`. There is no
//! `[DONE]` sentinel.

use serde_json::{json, Value};

use super::answer::{named_event, split_arguments, split_deltas, Answer, WireCall};

/// The response's id for request number `id`.
fn response_id(id: u64) -> String {
    format!("resp_mock_{id}")
}

/// The `usage` object: `input_tokens`, `output_tokens`, `total_tokens` and their
/// details (nothing cached, no reasoning).
fn usage_value(usage: Option<(u64, u64)>) -> Value {
    match usage {
        Some((input, output)) => json!({
            "input_tokens": input,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input + output,
        }),
        None => Value::Null,
    }
}

/// The response object with `status` and these output items.
fn response_object(
    id: u64,
    model: &str,
    status: &str,
    output: Vec<Value>,
    usage: Option<(u64, u64)>,
) -> Value {
    json!({
        "id": response_id(id),
        "object": "response",
        "created_at": 0,
        "status": status,
        "error": null,
        "incomplete_details": null,
        "model": model,
        "output": output,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "usage": if status == "completed" { usage_value(usage) } else { Value::Null },
    })
}

/// One output item as it ends up: the message (index 0 when there is text) or a
/// call.
enum Item<'a> {
    Message(&'a str),
    Call(&'a WireCall),
}

/// The output items of an answer: a message when there is text (or nothing else),
/// then one item per call.
fn items<'a>(answer: &'a Answer<'_>) -> Vec<Item<'a>> {
    let mut items = Vec::new();
    if !answer.is_tool_use() || !answer.text.is_empty() {
        items.push(Item::Message(answer.text));
    }
    items.extend(answer.calls().iter().map(Item::Call));
    items
}

/// The id of output item `index` of request `id`.
fn item_id(id: u64, index: usize, item: &Item<'_>) -> String {
    let prefix = match item {
        Item::Message(_) => "msg",
        Item::Call(call) if call.custom => "ctc",
        Item::Call(_) => "fc",
    };
    format!("{prefix}_mock_{id}_{index}")
}

/// An item as `response.output_item.done` and a whole body show it (`done`), or as
/// `response.output_item.added` announces it (empty, `in_progress`).
fn item_value(item_id: &str, item: &Item<'_>, done: bool) -> Value {
    let status = if done { "completed" } else { "in_progress" };
    match item {
        Item::Message(text) => {
            let content = if done {
                json!([{"type": "output_text", "text": text, "annotations": []}])
            } else {
                json!([])
            };
            json!({"id": item_id, "type": "message", "status": status, "role": "assistant",
                "content": content})
        }
        Item::Call(call) if call.custom => json!({
            "id": item_id, "type": "custom_tool_call", "status": status,
            "call_id": call.id, "name": call.name,
            "input": if done { call.freeform.as_str() } else { "" },
        }),
        Item::Call(call) => json!({
            "id": item_id, "type": "function_call", "status": status,
            "call_id": call.id, "name": call.name,
            "arguments": if done { call.arguments.as_str() } else { "" },
        }),
    }
}

/// The whole response (not streamed).
pub(crate) fn body(id: u64, model: &str, answer: &Answer<'_>, usage: Option<(u64, u64)>) -> Value {
    let output = items(answer)
        .iter()
        .enumerate()
        .map(|(index, item)| item_value(&item_id(id, index, item), item, true))
        .collect();
    response_object(id, model, "completed", output, usage)
}

/// The response as SSE events, each numbered by `sequence_number`.
pub(crate) fn stream(
    id: u64,
    model: &str,
    answer: &Answer<'_>,
    usage: Option<(u64, u64)>,
) -> Vec<String> {
    let mut events = Events::default();
    events.push(
        "response.created",
        json!({"response": response_object(id, model, "in_progress", Vec::new(), None)}),
    );
    events.push(
        "response.in_progress",
        json!({"response": response_object(id, model, "in_progress", Vec::new(), None)}),
    );
    let mut output = Vec::new();
    for (index, item) in items(answer).iter().enumerate() {
        let item_id = item_id(id, index, item);
        events.push(
            "response.output_item.added",
            json!({"output_index": index, "item": item_value(&item_id, item, false)}),
        );
        let at = json!({"item_id": item_id, "output_index": index});
        let with = |extra: Value| {
            let mut value = at.clone();
            if let (Some(value), Value::Object(extra)) = (value.as_object_mut(), extra) {
                value.extend(extra);
            }
            value
        };
        match item {
            Item::Message(text) => {
                let part =
                    |text: &str| json!({"type": "output_text", "text": text, "annotations": []});
                events.push(
                    "response.content_part.added",
                    with(json!({"content_index": 0, "part": part("")})),
                );
                for piece in split_deltas(text) {
                    events.push(
                        "response.output_text.delta",
                        with(json!({"content_index": 0, "delta": piece, "logprobs": []})),
                    );
                }
                events.push(
                    "response.output_text.done",
                    with(json!({"content_index": 0, "text": text, "logprobs": []})),
                );
                events.push(
                    "response.content_part.done",
                    with(json!({"content_index": 0, "part": part(text)})),
                );
            }
            Item::Call(call) if call.custom => {
                for piece in split_arguments(&call.freeform) {
                    events.push(
                        "response.custom_tool_call_input.delta",
                        with(json!({"delta": piece})),
                    );
                }
                events.push(
                    "response.custom_tool_call_input.done",
                    with(json!({"input": call.freeform})),
                );
            }
            Item::Call(call) => {
                for piece in split_arguments(&call.arguments) {
                    events.push(
                        "response.function_call_arguments.delta",
                        with(json!({"delta": piece})),
                    );
                }
                events.push(
                    "response.function_call_arguments.done",
                    with(json!({"name": call.name, "arguments": call.arguments})),
                );
            }
        }
        let done = item_value(&item_id, item, true);
        events.push(
            "response.output_item.done",
            json!({"output_index": index, "item": done}),
        );
        output.push(done);
    }
    events.push(
        "response.completed",
        json!({"response": response_object(id, model, "completed", output, usage)}),
    );
    events.0
}

/// SSE events being numbered.
#[derive(Default)]
struct Events(Vec<String>);

impl Events {
    /// Adds event `kind` with `fields`, stamping `type` and the next
    /// `sequence_number` into the data.
    fn push(&mut self, kind: &str, fields: Value) {
        let mut data = json!({"type": kind, "sequence_number": self.0.len()});
        if let (Some(data), Value::Object(fields)) = (data.as_object_mut(), fields) {
            data.extend(fields);
        }
        self.0.push(named_event(kind, &data));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{Api, MockToolCall};
    use super::*;

    /// `(event name, data)` of each SSE block.
    fn parse(events: &[String]) -> Vec<(String, Value)> {
        events
            .iter()
            .map(|event| {
                let block = event.strip_prefix("event: ").unwrap();
                let (name, data) = block.trim_end().split_once("\ndata: ").unwrap();
                (name.to_owned(), serde_json::from_str(data).unwrap())
            })
            .collect()
    }

    #[test]
    fn a_streamed_text_answer_has_the_real_event_names_in_sequence() {
        let answer = Answer::text("hello there");
        let events = parse(&stream(7, "m", &answer, Some((10, 3))));
        let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(
            names,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        for (number, (name, data)) in events.iter().enumerate() {
            assert_eq!(data["type"], name.as_str());
            assert_eq!(data["sequence_number"], number);
        }
        assert_eq!(events[4].1["delta"], "hello ");
        assert_eq!(events[4].1["item_id"], "msg_mock_7_0");
        let done = &events[9].1["response"];
        assert_eq!(done["status"], "completed");
        assert_eq!(done["output"][0]["content"][0]["text"], "hello there");
        assert_eq!(
            done["usage"],
            json!({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 13})
        );
        assert!(events[0].1["response"]["usage"].is_null());
    }

    #[test]
    fn function_calls_stream_their_arguments_in_pieces() {
        let call = MockToolCall::new("exec_command", json!({"cmd": "echo hi"}));
        let answer = Answer::tool_calls(Api::Responses, 2, "", std::slice::from_ref(&call));
        let events = parse(&stream(2, "m", &answer, None));
        let added = &events[2].1;
        assert_eq!(added["type"], "response.output_item.added");
        assert_eq!(
            added["item"],
            json!({"id": "fc_mock_2_0", "type": "function_call", "status": "in_progress",
                "call_id": "call_2_0", "name": "exec_command", "arguments": ""})
        );
        let joined: String = events
            .iter()
            .filter(|(name, _)| name == "response.function_call_arguments.delta")
            .map(|(_, data)| data["delta"].as_str().unwrap())
            .collect();
        assert_eq!(joined, call.arguments_text());
        let done = events
            .iter()
            .find(|(name, _)| name == "response.function_call_arguments.done")
            .unwrap();
        assert_eq!(done.1["arguments"], call.arguments_text());
        let completed = &events.last().unwrap().1["response"];
        assert_eq!(completed["output"][0]["arguments"], call.arguments_text());
        assert!(completed["usage"].is_null());
    }

    #[test]
    fn whole_bodies_hold_text_then_calls_custom_ones_as_custom_tool_calls() {
        let calls = [
            MockToolCall::new("exec", json!("text(1);")),
            MockToolCall::new("exec_command", json!({"cmd": "ls"})).with_id("mine"),
        ];
        let request = crate::mock_llm::RecordedRequest {
            index: 0,
            connection: 0,
            method: "POST".into(),
            path: "/v1/responses".into(),
            api: Some(Api::Responses),
            headers: Vec::new(),
            auth_headers: Vec::new(),
            body: json!({"input": [{"type": "additional_tools", "role": "developer", "tools": [
                {"type": "namespace", "name": "functions", "tools": [
                    {"type": "custom", "name": "exec"}]}]}]}),
            body_bytes: 0,
            received_unix_us: 0,
            side_in_flight: 0,
            side_answered: 0,
        };
        let answer =
            Answer::tool_calls(Api::Responses, 1, "Looking.", &calls).with_custom_tools(&request);
        let whole = body(1, "m", &answer, Some((1, 2)));
        assert_eq!(whole["object"], "response");
        assert_eq!(whole["output"][0]["type"], "message");
        assert_eq!(
            whole["output"][1],
            json!({"id": "ctc_mock_1_1", "type": "custom_tool_call", "status": "completed",
                "call_id": "call_1_0", "name": "exec", "input": "text(1);"})
        );
        assert_eq!(whole["output"][2]["call_id"], "mine");
        assert_eq!(whole["output"][2]["arguments"], r#"{"cmd":"ls"}"#);
        let events = parse(&stream(1, "m", &answer, None));
        let input: String = events
            .iter()
            .filter(|(name, _)| name == "response.custom_tool_call_input.delta")
            .map(|(_, data)| data["delta"].as_str().unwrap())
            .collect();
        assert_eq!(input, "text(1);");
    }
}

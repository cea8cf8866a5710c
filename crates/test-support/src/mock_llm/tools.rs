//! Tool calling in the mock: readers for what the client sent about tools (the tools
//! it offered, the results it returned).
//!
//! In the orchestrator's tools mode the model drives micro-tools (`ctx_grep` and the
//! like) through each provider's own tool-calling API; its tests check what the client
//! offered and what it sent back, in either wire format.

use serde_json::Value;

use super::{content_text, RecordedRequest};

/// One tool result a client sent back to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedToolResult {
    /// The id of the call it answers (OpenAI `tool_call_id`, Anthropic `tool_use_id`).
    pub tool_call_id: String,
    /// Its text (a string content, or the text parts joined).
    pub content: String,
    /// Anthropic's `is_error` flag (OpenAI has none: always `false` there).
    pub is_error: bool,
}

impl RecordedRequest {
    /// The tools the request offered (the top-level `tools` array both APIs use),
    /// empty when absent.
    pub fn tools(&self) -> &[Value] {
        self.body
            .get("tools")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The names of the offered tools, in order: OpenAI's `tools[].function.name` or
    /// Anthropic's `tools[].name`.
    pub fn tool_names(&self) -> Vec<String> {
        self.tools()
            .iter()
            .filter_map(|tool| {
                tool.pointer("/function/name")
                    .or_else(|| tool.get("name"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .collect()
    }

    /// The tool results the client sent back, in order, as `(tool_call_id, content)`
    /// pairs.
    pub fn tool_results(&self) -> Vec<(String, String)> {
        self.tool_result_details()
            .into_iter()
            .map(|result| (result.tool_call_id, result.content))
            .collect()
    }

    /// The tool results the client sent back, in order: OpenAI messages with
    /// `role: "tool"`, and the `tool_result` parts of Anthropic user messages.
    pub fn tool_result_details(&self) -> Vec<RecordedToolResult> {
        let text_of = |value: &Value, key: &str| {
            value
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let mut results = Vec::new();
        for message in self.messages() {
            let content = message.get("content").unwrap_or(&Value::Null);
            match message.get("role").and_then(Value::as_str) {
                Some("tool") => results.push(RecordedToolResult {
                    tool_call_id: text_of(message, "tool_call_id"),
                    content: content_text(content),
                    is_error: false,
                }),
                Some("user") => {
                    results.extend(
                        anthropic_tool_results(content).map(|part| RecordedToolResult {
                            tool_call_id: text_of(part, "tool_use_id"),
                            content: content_text(part.get("content").unwrap_or(&Value::Null)),
                            is_error: part.get("is_error").and_then(Value::as_bool) == Some(true),
                        }),
                    )
                }
                _ => {}
            }
        }
        results
    }
}

/// The `tool_result` parts of an Anthropic message's `content` (none when it is a
/// string).
pub(crate) fn anthropic_tool_results(content: &Value) -> impl Iterator<Item = &Value> {
    content
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|part| part.get("type").and_then(Value::as_str) == Some("tool_result"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(body: Value) -> RecordedRequest {
        RecordedRequest {
            index: 0,
            connection: 0,
            method: "POST".into(),
            path: "/v1/messages".into(),
            api: None,
            headers: Vec::new(),
            auth_headers: Vec::new(),
            body_bytes: body.to_string().len(),
            body,
            received_unix_us: 0,
        }
    }

    #[test]
    fn openai_tools_and_results_are_read() {
        let request = request(json!({
            "tools": [
                {"type": "function", "function": {"name": "ctx_grep", "parameters": {}}},
                {"type": "function", "function": {"name": "ctx_slice", "parameters": {}}}
            ],
            "messages": [
                {"role": "user", "content": "find errors"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "ctx_grep", "arguments": "{}"}},
                    {"id": "call_b", "type": "function", "function": {"name": "ctx_slice", "arguments": "{}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_a", "content": "3 matches"},
                {"role": "tool", "tool_call_id": "call_b", "content": [{"type": "text", "text": "line 1"}]}
            ]
        }));
        assert_eq!(request.tools().len(), 2);
        assert_eq!(request.tool_names(), ["ctx_grep", "ctx_slice"]);
        assert_eq!(
            request.tool_results(),
            [
                ("call_a".to_owned(), "3 matches".to_owned()),
                ("call_b".to_owned(), "line 1".to_owned())
            ]
        );
        assert!(request.tool_result_details().iter().all(|r| !r.is_error));
    }

    #[test]
    fn anthropic_tools_and_results_are_read() {
        let request = request(json!({
            "tools": [{"name": "ctx_grep", "input_schema": {"type": "object"}}],
            "messages": [
                {"role": "user", "content": "find errors"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_a", "name": "ctx_grep", "input": {}},
                    {"type": "tool_use", "id": "toolu_b", "name": "ctx_grep", "input": {}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "3 matches"},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "is_error": true,
                     "content": [{"type": "text", "text": "bad "}, {"type": "text", "text": "JSON"}]},
                    {"type": "text", "text": "go on"}
                ]}
            ]
        }));
        assert_eq!(request.tool_names(), ["ctx_grep"]);
        assert_eq!(
            request.tool_result_details(),
            [
                RecordedToolResult {
                    tool_call_id: "toolu_a".into(),
                    content: "3 matches".into(),
                    is_error: false
                },
                RecordedToolResult {
                    tool_call_id: "toolu_b".into(),
                    content: "bad JSON".into(),
                    is_error: true
                },
            ]
        );
        // The user's own text is still the last user message.
        assert_eq!(request.last_user_message().as_deref(), Some("go on"));
    }

    #[test]
    fn requests_without_tools_have_none() {
        let request = request(json!({"messages": [{"role": "user", "content": "hi"}]}));
        assert!(request.tools().is_empty());
        assert!(request.tool_names().is_empty());
        assert!(request.tool_results().is_empty());
    }
}

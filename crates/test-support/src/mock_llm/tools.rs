//! Tool calling in the mock: the calls a test scripts for the "model" to make, and
//! readers for what the client sent about tools (the tools it offered, the results it
//! returned).
//!
//! In the orchestrator's tools mode the model drives micro-tools (`ctx_grep` and the
//! like) through each provider's own tool-calling API. Its tests need a model that
//! calls those tools on cue — in both wire formats, whole and streamed, and sometimes
//! wrongly (arguments that are not JSON) — and a way to check what came back. How the
//! calls look on the wire is `wire.rs`'s business; this module only describes them.

use serde_json::Value;

use super::{content_text, RecordedRequest};

/// One tool call the mock's "model" makes.
///
/// The arguments travel as each API carries them: OpenAI gets them as a JSON *string*
/// (`function.arguments`), Anthropic as the `input` object (or, streamed, as
/// `partial_json` pieces of its text), Responses as a `function_call` item's
/// `arguments` string, or, when the request offers the tool as a custom (freeform)
/// tool, as a `custom_tool_call` item's `input` text ([`MockToolCall::freeform_text`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MockToolCall {
    /// The call's id. `None` lets the mock make one from the request's arrival index
    /// and the call's position: `call_<request>_<n>` for OpenAI, `toolu_<request>_<n>`
    /// for Anthropic (both from 0).
    pub id: Option<String>,
    /// The tool's name, e.g. `ctx_grep`.
    pub name: String,
    /// The arguments, usually an object; ignored when `raw` is set.
    pub arguments: Value,
    /// Argument text sent verbatim instead of `arguments`, so a test can send text that
    /// is not JSON (the client must tell the model). A whole (not streamed) Anthropic
    /// body cannot carry invalid JSON: there `input` is the text parsed when it is
    /// JSON, else the text as a JSON string (still not the object a client expects).
    pub raw: Option<String>,
}

impl MockToolCall {
    /// A call of `name` with these arguments and an id made by the mock.
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        Self {
            id: None,
            name: name.into(),
            arguments,
            raw: None,
        }
    }

    /// A call of `name` whose argument text is `raw_arguments`, verbatim (for
    /// arguments that are not valid JSON).
    pub fn raw(name: impl Into<String>, raw_arguments: impl Into<String>) -> Self {
        Self {
            id: None,
            name: name.into(),
            arguments: Value::Null,
            raw: Some(raw_arguments.into()),
        }
    }

    /// The same call with this id instead of one made by the mock.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The argument text as sent: `raw` verbatim, else `arguments` as compact JSON.
    pub fn arguments_text(&self) -> String {
        match &self.raw {
            Some(raw) => raw.clone(),
            None => self.arguments.to_string(),
        }
    }

    /// The text a Responses custom (freeform) tool gets as its `input`: `raw`
    /// verbatim, else `arguments` itself when it is a JSON string (so
    /// `MockToolCall::new("exec", json!("js source"))` sends the source as is), else
    /// `arguments` as compact JSON.
    pub fn freeform_text(&self) -> String {
        match (&self.raw, &self.arguments) {
            (Some(raw), _) => raw.clone(),
            (None, Value::String(text)) => text.clone(),
            (None, other) => other.to_string(),
        }
    }

    /// The arguments as one JSON value, for a whole Anthropic body's `input`.
    pub(crate) fn input(&self) -> Value {
        match &self.raw {
            Some(raw) => serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone())),
            None => self.arguments.clone(),
        }
    }
}

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
    /// The tools the request offered (the top-level `tools` array every API uses),
    /// empty when absent. See [`RecordedRequest::offered_tools`] for every tool,
    /// namespaces opened.
    pub fn tools(&self) -> &[Value] {
        self.body
            .get("tools")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// Every tool the request offered, in order, as the tool objects themselves: the
    /// top-level `tools`, then those of Responses `input` items of type
    /// `additional_tools` (as the Codex CLI sends its tools to its own models), with
    /// each `type: "namespace"` entry replaced by the tools inside it.
    pub fn offered_tools(&self) -> Vec<Value> {
        fn flatten(tools: &[Value], out: &mut Vec<Value>) {
            for tool in tools {
                match tool.get("tools").and_then(Value::as_array) {
                    Some(inner)
                        if tool.get("type").and_then(Value::as_str) == Some("namespace") =>
                    {
                        flatten(inner, out)
                    }
                    _ => out.push(tool.clone()),
                }
            }
        }
        let mut out = Vec::new();
        flatten(self.tools(), &mut out);
        for item in self.input_items() {
            if item.get("type").and_then(Value::as_str) == Some("additional_tools") {
                if let Some(tools) = item.get("tools").and_then(Value::as_array) {
                    flatten(tools, &mut out);
                }
            }
        }
        out
    }

    /// The names of the offered tools, in order: OpenAI Chat's
    /// `tools[].function.name`, or the `name` of Anthropic tools and Responses tools
    /// (functions and custom/freeform tools alike, namespaces opened: see
    /// [`RecordedRequest::offered_tools`]). Tools without a name (Responses'
    /// `web_search` and the like) are left out.
    pub fn tool_names(&self) -> Vec<String> {
        self.offered_tools()
            .iter()
            .filter_map(|tool| {
                tool.pointer("/function/name")
                    .or_else(|| tool.get("name"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .collect()
    }

    /// True when the request offers a tool `name` of Responses `type: "custom"` (a
    /// freeform tool whose input is plain text, not JSON): the mock then calls it with
    /// a `custom_tool_call` instead of a `function_call`.
    pub fn offers_custom_tool(&self, name: &str) -> bool {
        self.offered_tools().iter().any(|tool| {
            tool.get("type").and_then(Value::as_str) == Some("custom")
                && tool.get("name").and_then(Value::as_str) == Some(name)
        })
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
    /// `role: "tool"`, the `tool_result` parts of Anthropic user messages, and
    /// Responses `function_call_output` and `custom_tool_call_output` input items
    /// (`call_id`, and `output` as a string or as parts with `text`).
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
        for item in self.input_items() {
            if matches!(
                item.get("type").and_then(Value::as_str),
                Some("function_call_output" | "custom_tool_call_output")
            ) {
                results.push(RecordedToolResult {
                    tool_call_id: text_of(&item, "call_id"),
                    content: content_text(item.get("output").unwrap_or(&Value::Null)),
                    is_error: false,
                });
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
            side_in_flight: 0,
            side_answered: 0,
        }
    }

    #[test]
    fn arguments_are_compact_json_unless_raw() {
        let call = MockToolCall::new("ctx_grep", json!({"variable": "context", "pattern": "E"}));
        assert_eq!(
            call.arguments_text(),
            r#"{"pattern":"E","variable":"context"}"#
        );
        assert_eq!(call.input(), call.arguments);
        let raw = MockToolCall::raw("ctx_grep", "{\"pattern\": ").with_id("mine");
        assert_eq!(raw.arguments_text(), "{\"pattern\": ");
        assert_eq!(raw.input(), json!("{\"pattern\": "));
        assert_eq!(raw.id.as_deref(), Some("mine"));
        assert_eq!(MockToolCall::raw("t", "[1]").input(), json!([1]));
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

    /// Posts `body` over a fresh connection; returns the status line and the body, with
    /// chunked transfer coding undone.
    fn post(addr: std::net::SocketAddr, path: &str, body: &Value) -> (String, String) {
        use std::io::{Read, Write};
        let body = body.to_string();
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).unwrap();
        let answer = String::from_utf8(answer).unwrap();
        let (head, mut rest) = answer.split_once("\r\n\r\n").unwrap();
        let status = head.lines().next().unwrap().to_owned();
        if !head.contains("transfer-encoding: chunked") {
            return (status, rest.to_owned());
        }
        let mut body = String::new();
        loop {
            let (size, after) = rest.split_once("\r\n").unwrap();
            let size = usize::from_str_radix(size, 16).unwrap();
            if size == 0 {
                return (status, body);
            }
            body.push_str(&after[..size]);
            rest = after[size..].strip_prefix("\r\n").unwrap();
        }
    }

    #[test]
    fn the_server_answers_tool_calls_whole_and_streamed_in_both_formats() {
        use super::super::{MockLlm, MockReply, MockScript};

        let grep = MockToolCall::new("ctx_grep", json!({"variable": "context", "pattern": "é"}));
        let reply = MockReply::tool_calls("", [grep.clone()]);
        let mock = MockLlm::spawn_blocking_thread(MockScript::always(reply.clone())).unwrap();
        let openai_tools = json!([{"type": "function", "function": {"name": "ctx_grep"}}]);

        let (status, body) = post(
            mock.addr(),
            "/v1/chat/completions",
            &json!({"model": "m", "tools": openai_tools, "messages": [
                {"role": "user", "content": "find it"},
                {"role": "tool", "tool_call_id": "call_0_0", "content": "2 matches"}
            ]}),
        );
        assert_eq!(status, "HTTP/1.1 200 OK");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(
            body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
            grep.arguments_text()
        );
        // 8 characters of name and 36 of arguments.
        assert_eq!(body["usage"]["completion_tokens"], 44_u64.div_ceil(4));

        // Streamed in 7-byte writes, which split `é` and every event.
        mock.push_reply(reply.chunked(7, std::time::Duration::ZERO));
        let (_, stream) = post(
            mock.addr(),
            "/v1/messages",
            &json!({"model": "m", "stream": true, "tools": [{"name": "ctx_grep"}],
                "messages": [{"role": "user", "content": "find it"}]}),
        );
        let partial_json: String = stream
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .filter_map(|data| serde_json::from_str::<Value>(data).ok())
            .filter_map(|event| event["delta"]["partial_json"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(partial_json, grep.arguments_text());
        assert!(stream.contains(r#""id":"toolu_1_0""#), "{stream}");
        assert!(stream.contains(r#""stop_reason":"tool_use""#), "{stream}");

        let requests = mock.requests();
        assert_eq!(requests[0].tool_names(), ["ctx_grep"]);
        assert_eq!(
            requests[0].tool_results(),
            [("call_0_0".to_owned(), "2 matches".to_owned())]
        );
        assert_eq!(requests[1].tool_names(), ["ctx_grep"]);
        assert!(requests[1].tool_results().is_empty());
    }
}

#[cfg(test)]
mod responses_tests {
    use serde_json::json;

    use super::super::{Api, RecordedRequest};

    fn request(body: serde_json::Value) -> RecordedRequest {
        RecordedRequest {
            index: 0,
            connection: 0,
            method: "POST".into(),
            path: "/v1/responses".into(),
            api: Some(Api::Responses),
            headers: Vec::new(),
            auth_headers: Vec::new(),
            body_bytes: 0,
            body,
            received_unix_us: 0,
            side_in_flight: 0,
            side_answered: 0,
        }
    }

    #[test]
    fn responses_inputs_tools_and_outputs_are_read() {
        let request = request(json!({
            "instructions": "be brief",
            "tools": [
                {"type": "function", "name": "exec_command", "parameters": {}},
                {"type": "web_search"},
                {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "inner"}]}
            ],
            "input": [
                {"type": "additional_tools", "role": "developer", "tools": [
                    {"type": "custom", "name": "exec", "format": {"type": "grammar"}}]},
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "say "}, {"type": "input_text", "text": "hi"}]},
                {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "done"},
                {"type": "custom_tool_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "ran"}]}
            ]
        }));
        assert_eq!(request.tool_names(), ["exec_command", "inner", "exec"]);
        assert!(request.offers_custom_tool("exec"));
        assert!(!request.offers_custom_tool("exec_command"));
        assert_eq!(request.last_user_message().as_deref(), Some("say hi"));
        assert_eq!(request.system_prompt().as_deref(), Some("be brief\n\ndev"));
        assert_eq!(request.message_texts(), ["dev", "say hi"]);
        assert_eq!(
            request.tool_results(),
            [
                ("c1".to_owned(), "done".to_owned()),
                ("c2".to_owned(), "ran".to_owned())
            ]
        );
        let plain = self::request(json!({"input": "just text"}));
        assert_eq!(plain.last_user_message().as_deref(), Some("just text"));
        assert_eq!(plain.prompt_chars(), 9);
        assert!(plain.tool_names().is_empty());
    }
}

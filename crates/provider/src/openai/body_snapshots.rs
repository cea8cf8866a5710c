//! The constraint fields of the Chat Completions body, for each `--constrain` mode and
//! each kind of server, pinned as one snapshot: a code reply's grammar, a plan reply's
//! `response_format`, and strict tools.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{FormatStyle, OpenAiProvider};
use crate::constrain::{in_listing, in_props, resolve, ConstrainMode, Support};
use crate::{ChatMessage, ChatRequest, ProviderConfig, ProviderKind, ResponseFormat, ToolSpec};

/// The servers rlm meets, by what each says of itself.
fn servers() -> Vec<(&'static str, Option<Support>)> {
    let python = json!({"components": {"schemas": {"CreateChatCompletionRequest": {
        "properties": {"grammar": {}, "response_format": {"$ref": "#/components/schemas/F"}}},
        "F": {"properties": {"type": {"enum": ["text", "json_object"]}, "schema": {}}}}}});
    let vllm = json!({"components": {"schemas": {"ChatCompletionRequest": {
        "properties": {"guided_grammar": {}, "response_format": {"properties": {
            "type": {"enum": ["json_object", "json_schema"]}}}}}}}});
    vec![
        (
            "llama.cpp",
            in_props(&json!({"default_generation_settings": {}})),
        ),
        ("llama-cpp-python", in_listing(&python)),
        ("vllm", in_listing(&vllm)),
        (
            "openai",
            crate::constrain::documented(&ProviderConfig::new(ProviderKind::OpenAi, "m")),
        ),
        ("silent", None),
    ]
}

/// The fields of `body` a constraint may set.
fn constraint_fields(body: &Value) -> Value {
    let mut fields = serde_json::Map::new();
    for key in ["grammar", "guided_grammar", "response_format"] {
        if let Some(value) = body.get(key) {
            fields.insert(key.to_owned(), value.clone());
        }
    }
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        let strict: Vec<Value> = tools
            .iter()
            .map(|t| t["function"].get("strict").cloned().unwrap_or(json!(false)))
            .collect();
        fields.insert("tools_strict".to_owned(), json!(strict));
    }
    Value::Object(fields)
}

#[test]
fn each_mode_and_server_gets_the_fields_it_should() {
    let provider = match OpenAiProvider::new(
        &ProviderConfig {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            ..ProviderConfig::new(ProviderKind::OpenAi, "m")
        },
        None,
    ) {
        Ok(provider) => provider,
        Err(error) => panic!("{error}"),
    };
    let code = ChatRequest {
        messages: vec![ChatMessage::user("task")],
        grammar: Some(Arc::from("root ::= \"FINAL(\" [^)]* \")\"")),
        ..ChatRequest::default()
    };
    let plan = ChatRequest {
        messages: vec![ChatMessage::user("task")],
        response_format: Some(ResponseFormat {
            name: "step".into(),
            schema: json!({"type": "object"}),
        }),
        ..ChatRequest::default()
    };
    let closed = json!({"type": "object", "additionalProperties": false,
        "required": ["answer"], "properties": {"answer": {"type": "string"}}});
    let tools = ChatRequest {
        messages: vec![ChatMessage::user("task")],
        tools: vec![
            ToolSpec {
                name: "final_answer".into(),
                description: "answer".into(),
                parameters: closed,
            },
            ToolSpec {
                name: "ctx_grep".into(),
                description: "grep".into(),
                parameters: json!({"type": "object", "properties": {"pattern": {}}}),
            },
        ],
        ..ChatRequest::default()
    };
    let mut table = serde_json::Map::new();
    for (server, support) in servers() {
        for mode in [
            ConstrainMode::Auto,
            ConstrainMode::Off,
            ConstrainMode::Json,
            ConstrainMode::Grammar,
        ] {
            let constraint = Some(resolve(mode, support.as_ref()));
            let mut row = serde_json::Map::new();
            for (kind, request) in [("code", &code), ("plan", &plan), ("tools", &tools)] {
                let request = ChatRequest {
                    constraint,
                    ..request.clone()
                };
                let body = provider.body_with(&request, FormatStyle::JsonSchema);
                row.insert(kind.to_owned(), constraint_fields(&body));
            }
            table.insert(format!("{server} --constrain {mode}"), Value::Object(row));
        }
    }
    insta::assert_json_snapshot!(Value::Object(table));
}

#[test]
fn an_unresolved_request_sends_its_format_as_before_and_no_grammar() {
    let provider = match OpenAiProvider::new(
        &ProviderConfig {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            ..ProviderConfig::new(ProviderKind::OpenAi, "m")
        },
        None,
    ) {
        Ok(provider) => provider,
        Err(error) => panic!("{error}"),
    };
    let request = ChatRequest {
        messages: vec![ChatMessage::user("task")],
        grammar: Some(Arc::from("root ::= \"x\"")),
        response_format: Some(ResponseFormat {
            name: "step".into(),
            schema: json!({"type": "object"}),
        }),
        ..ChatRequest::default()
    };
    let body = provider.body_with(&request, FormatStyle::JsonObject);
    assert_eq!(body["response_format"]["type"], "json_object");
    assert!(body.get("grammar").is_none(), "{body}");
}

//! Detection as a table (the server says X → the constraint is Y), and the modes.

use serde_json::json;

use super::*;

/// llama-cpp-python 0.3.36's listing, cut to what detection reads (as its server at
/// 127.0.0.1 gave it).
fn llama_cpp_python_listing() -> Value {
    json!({"paths": {"/v1/chat/completions": {}, "/extras/tokenize/count": {}},
        "components": {"schemas": {
            "CreateChatCompletionRequest": {"properties": {
                "messages": {}, "grammar": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "response_format": {"anyOf": [
                    {"$ref": "#/components/schemas/ChatCompletionRequestResponseFormat"},
                    {"type": "null"}]}}},
            "ChatCompletionRequestResponseFormat": {"properties": {
                "type": {"type": "string", "enum": ["text", "json_object"]},
                "schema": {}}, "required": ["type"]}}}})
}

/// vLLM's listing, cut the same way.
fn vllm_listing() -> Value {
    json!({"components": {"schemas": {
        "ChatCompletionRequest": {"properties": {
            "messages": {}, "guided_json": {}, "guided_grammar": {},
            "response_format": {"anyOf": [{"$ref": "#/components/schemas/ResponseFormat"},
                {"$ref": "#/components/schemas/StructuralTagResponseFormat"}]}}},
        "ResponseFormat": {"properties": {
            "type": {"type": "string", "enum": ["text", "json_object", "json_schema"]},
            "json_schema": {}}},
        "StructuralTagResponseFormat": {"properties": {"type": {"const": "structural_tag"}}}}}})
}

#[test]
fn what_a_server_says_is_what_it_is_taken_to_support() {
    let llama_cpp = Support {
        grammar: Some(GrammarField::Grammar),
        json_schema: Some(SchemaForm::JsonSchema),
        ..Support::default()
    };
    let table: Vec<(&str, Option<Support>, Option<Support>)> = vec![
        (
            "llama-cpp-python's listing",
            in_listing(&llama_cpp_python_listing()),
            Some(Support {
                grammar: Some(GrammarField::Grammar),
                json_schema: Some(SchemaForm::JsonObject),
                ..Support::default()
            }),
        ),
        (
            "vLLM's listing",
            in_listing(&vllm_listing()),
            Some(Support {
                grammar: Some(GrammarField::GuidedGrammar),
                json_schema: Some(SchemaForm::JsonSchema),
                ..Support::default()
            }),
        ),
        (
            "a listing of routes only (mock-llm's, a proxy's)",
            in_listing(&json!({"paths": {"/v1/chat/completions": {}}})),
            None,
        ),
        (
            "a listing whose request takes nothing",
            in_listing(&json!({"components": {"schemas": {
                "ChatCompletionRequest": {"properties": {"messages": {}}}}}})),
            None,
        ),
        (
            "llama.cpp's /props",
            in_props(&json!({"default_generation_settings": {"n_ctx": 4096}})),
            Some(llama_cpp),
        ),
        ("another /props", in_props(&json!({"n_ctx": 4096})), None),
        (
            "/v1/models owned by llamacpp",
            in_models(&json!({"data": [{"id": "m", "owned_by": "llamacpp"}]})),
            Some(llama_cpp),
        ),
        (
            "/v1/models owned by anyone else",
            in_models(&json!({"data": [{"id": "m", "owned_by": "me"}]})),
            None,
        ),
    ];
    for (what, found, expected) in table {
        assert_eq!(found, expected, "{what}");
    }
}

fn config(kind: ProviderKind, base_url: Option<&str>) -> ProviderConfig {
    ProviderConfig {
        base_url: base_url.map(str::to_owned),
        ..ProviderConfig::new(kind, "m")
    }
}

#[test]
fn a_hosted_api_is_known_by_its_base_url_and_nothing_else_is() {
    let openai = documented(&config(ProviderKind::OpenAi, None));
    assert_eq!(
        openai.map(|s| (s.json_schema, s.strict_tools)),
        Some((Some(SchemaForm::JsonSchema), true))
    );
    let explicit = documented(&config(
        ProviderKind::OpenAi,
        Some("https://API.openai.com/v1"),
    ));
    assert_eq!(explicit, openai);
    assert_eq!(
        documented(&config(ProviderKind::Anthropic, None)).map(|s| s.tools),
        Some(true)
    );
    for local in [
        "http://127.0.0.1:8080/v1",
        "https://api.openai.com.example.org/v1",
        "https://openrouter.ai/api/v1",
    ] {
        assert_eq!(
            documented(&config(ProviderKind::OpenAi, Some(local))),
            None,
            "{local}"
        );
    }
    assert_eq!(documented(&config(ProviderKind::Cli, None)), None);
}

#[test]
fn each_mode_sends_what_it_says() {
    let python = in_listing(&llama_cpp_python_listing());
    let grammar_only = Some(Support {
        grammar: Some(GrammarField::GuidedGrammar),
        ..Support::default()
    });
    let none = Constraint::default();
    let table = [
        (ConstrainMode::Off, python, none),
        (
            ConstrainMode::Auto,
            python,
            Constraint {
                grammar: Some(GrammarField::Grammar),
                json_schema: Some(SchemaForm::JsonObject),
                strict_tools: false,
            },
        ),
        // A server that says nothing gets no constraint field under auto…
        (ConstrainMode::Auto, None, none),
        // …and what was asked for under json or grammar, in the default spelling.
        (
            ConstrainMode::Json,
            None,
            Constraint {
                json_schema: Some(SchemaForm::JsonSchema),
                ..none
            },
        ),
        (
            ConstrainMode::Grammar,
            None,
            Constraint {
                grammar: Some(GrammarField::Grammar),
                json_schema: Some(SchemaForm::JsonSchema),
                strict_tools: false,
            },
        ),
        (
            ConstrainMode::Json,
            python,
            Constraint {
                json_schema: Some(SchemaForm::JsonObject),
                ..none
            },
        ),
        // A server that takes grammars and no schema: a JSON reply goes as a grammar
        // (no `response_format`), under auto and grammar alike.
        (
            ConstrainMode::Grammar,
            grammar_only,
            Constraint {
                grammar: Some(GrammarField::GuidedGrammar),
                ..none
            },
        ),
        (
            ConstrainMode::Auto,
            grammar_only,
            Constraint {
                grammar: Some(GrammarField::GuidedGrammar),
                ..none
            },
        ),
    ];
    for (mode, support, expected) in table {
        assert_eq!(
            resolve(mode, support.as_ref()),
            expected,
            "{mode} {support:?}"
        );
    }
    assert_eq!(
        "GRAMMAR".parse::<ConstrainMode>().ok(),
        Some(ConstrainMode::Grammar)
    );
    assert!("strict".parse::<ConstrainMode>().is_err());
}

#[test]
fn only_closed_schemas_go_strict() {
    let closed = json!({"type": "object", "additionalProperties": false,
        "required": ["a"], "properties": {"a": {"type": "array", "items": {
            "type": "object", "additionalProperties": false, "required": [],
            "properties": {}}}}});
    assert!(strict_compatible(&closed));
    let optional = json!({"type": "object", "additionalProperties": false,
        "required": [], "properties": {"a": {"type": "string"}}});
    assert!(!strict_compatible(&optional));
    let open = json!({"type": "object", "required": ["a"], "properties": {"a": {}}});
    assert!(!strict_compatible(&open));
    assert!(!strict_compatible(&json!({"type": "object"})));
}

#[test]
fn support_reads_back_and_says_itself_in_words() {
    let support = in_listing(&llama_cpp_python_listing()).unwrap_or_default();
    let text = serde_json::to_string(&support).unwrap_or_default();
    assert_eq!(serde_json::from_str::<Support>(&text).ok(), Some(support));
    assert_eq!(
        support.to_string(),
        "GBNF grammar (`grammar`), JSON schema (`json_object` with `schema`)"
    );
    assert_eq!(Support::default().to_string(), "nothing");
}

#[test]
fn only_the_server_that_returns_calls_as_text_holds_them_to_one_call() {
    let python = Support {
        grammar: Some(GrammarField::Grammar),
        json_schema: Some(SchemaForm::JsonObject),
        ..Support::default()
    };
    let llama_cpp = Support {
        grammar: Some(GrammarField::Grammar),
        json_schema: Some(SchemaForm::JsonSchema),
        ..Support::default()
    };
    let openai = Support {
        json_schema: Some(SchemaForm::JsonSchema),
        strict_tools: true,
        tools: true,
        ..Support::default()
    };
    let cases = [
        (ConstrainMode::Auto, Some(&python), true),
        (ConstrainMode::Json, Some(&python), true),
        (ConstrainMode::Grammar, Some(&python), true),
        (ConstrainMode::Off, Some(&python), false),
        (ConstrainMode::Auto, Some(&llama_cpp), false),
        (ConstrainMode::Auto, Some(&openai), false),
        (ConstrainMode::Auto, None, false),
        (ConstrainMode::Json, None, false),
    ];
    for (mode, support, holds) in cases {
        assert_eq!(
            resolve(mode, support).sends_call_schema(),
            holds,
            "{mode:?} {support:?}"
        );
    }
}

#[test]
fn the_schema_of_one_call_names_each_offered_tool_with_its_arguments() {
    let tool = |name: &str| crate::ToolSpec {
        name: name.to_owned(),
        description: String::new(),
        parameters: serde_json::json!({"type": "object", "properties": {"x": {"type": "string"}}}),
    };
    let tools = [tool("ctx_grep"), tool("final_answer")];
    let schema = one_call_schema(&tools, None);
    let calls = schema["oneOf"].as_array().expect("oneOf");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["properties"]["name"]["const"], "ctx_grep");
    assert_eq!(calls[0]["properties"]["arguments"], tools[0].parameters);
    assert_eq!(
        calls[1]["required"],
        serde_json::json!(["name", "arguments"])
    );
    let only = one_call_schema(&tools, Some("final_answer"));
    assert_eq!(only["oneOf"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        only["oneOf"][0]["properties"]["name"]["const"],
        "final_answer"
    );
}

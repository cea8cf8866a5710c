//! `--constrain` end to end through `run`, asserted from the mock's request log: the
//! request body carries `grammar` / `response_format` / strict tools exactly when the
//! server said it takes them (or the user asked), and a server that says nothing gets
//! no constraint field while the run still works.

use std::process::Output;

use rlm_orchestrator::grammar::REPL_REPLY_GBNF;
use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockScript, MockTokenizer};
use serde_json::Value;

use crate::support::{assert_answer, Sandbox};

/// `run` against `mock` with `extra` flags.
fn run(sb: &Sandbox, mock: &MockLlmThread, extra: &[&str]) -> Output {
    sb.bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "say hello", "--model", "mock"])
        .arg("--base-url")
        .arg(mock.control().openai_base_url())
        .args(extra)
        .output()
        .unwrap()
}

/// A mock playing `server`, answering every request with `reply`.
fn serving(server: MockTokenizer, reply: &str) -> MockLlmThread {
    let mut script = MockScript::always(MockReply::text(reply));
    script.tokenizer = server;
    MockLlm::spawn_blocking_thread(script).unwrap()
}

/// The body of the first model request.
fn first_body(mock: &MockLlmThread) -> Value {
    mock.control().requests()[0].body.clone()
}

#[test]
fn a_code_reply_is_held_to_the_protocol_where_the_server_takes_grammars() {
    for (server, env) in [
        (MockTokenizer::LlamaCppPython, "js"),
        (MockTokenizer::LlamaCpp, "python"),
    ] {
        let sb = Sandbox::new();
        let mock = serving(server, "FINAL(hello)");
        assert_answer(&run(&sb, &mock, &["--env", env]), "hello");
        let body = first_body(&mock);
        assert_eq!(body["grammar"], REPL_REPLY_GBNF, "{server:?}: {body}");
        // A second run reads the record: nothing asked, the same constraint.
        let asked = mock.control().side_requests().len();
        assert_answer(&run(&sb, &mock, &["--env", env]), "hello");
        assert_eq!(mock.control().side_requests().len(), asked, "asked again");
        let last = mock.control().requests().last().unwrap().body.clone();
        assert_eq!(last["grammar"], REPL_REPLY_GBNF);
        // Off sends nothing.
        assert_answer(
            &run(&sb, &mock, &["--env", env, "--constrain", "off"]),
            "hello",
        );
        let off = mock.control().requests().last().unwrap().body.clone();
        assert!(off.get("grammar").is_none(), "{off}");
    }
}

#[test]
fn a_server_that_says_nothing_gets_no_constraint_field_and_the_run_works() {
    for env in ["js", "plan", "tools"] {
        let env_flags = ["--env", env, "--tool-protocol", "text"];
        let sb = Sandbox::new();
        let mock = serving(MockTokenizer::Unadvertised, "FINAL(hello)");
        let out = run(&sb, &mock, &env_flags);
        assert!(
            out.status.success(),
            "{env}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for request in mock.control().requests() {
            let body = &request.body;
            for field in ["grammar", "guided_grammar", "response_format"] {
                assert!(body.get(field).is_none(), "{env}: {field} in {body}");
            }
            let strict = body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["function"].get("strict").is_some());
            assert!(!strict, "{env}: {body}");
        }
    }
}

#[test]
fn a_plan_reply_is_held_to_its_schema_in_the_form_the_server_takes() {
    let sb = Sandbox::new();
    let mock = serving(
        MockTokenizer::LlamaCppPython,
        r#"{"final_answer": {"answer": "hello"}}"#,
    );
    let out = run(&sb, &mock, &["--env", "plan", "--tool-protocol", "text"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body = first_body(&mock);
    assert_eq!(body["response_format"]["type"], "json_object", "{body}");
    assert!(
        body["response_format"]["schema"]["anyOf"].is_array(),
        "{body}"
    );
    assert!(body.get("grammar").is_none(), "{body}");
    // Asked for whatever the server said, a grammar goes too in a code environment.
    let sb = Sandbox::new();
    let silent = serving(MockTokenizer::Unadvertised, "FINAL(hello)");
    assert_answer(
        &run(&sb, &silent, &["--env", "js", "--constrain", "grammar"]),
        "hello",
    );
    assert_eq!(first_body(&silent)["grammar"], REPL_REPLY_GBNF);
}

/// The names of the calls a `response_format` schema of one call admits.
fn call_names(body: &Value) -> Vec<String> {
    body["response_format"]["schema"]["oneOf"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|call| call["properties"]["name"]["const"].as_str())
        .map(str::to_owned)
        .collect()
}

#[test]
fn native_tools_on_a_server_that_returns_calls_as_text_are_held_to_one_call() {
    // llama-cpp-python renders the tools into the prompt and returns the call as JSON
    // text: the text is held to the schema of one call of an offered tool.
    let sb = Sandbox::new();
    let reply = r#"{"name": "final_answer", "arguments": {"answer": "hello"}}"#;
    let mock = serving(MockTokenizer::LlamaCppPython, reply);
    assert_answer(&run(&sb, &mock, &["--env", "tools"]), "hello");
    let body = first_body(&mock);
    let offered: Vec<String> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["function"]["name"].as_str())
        .map(str::to_owned)
        .collect();
    assert!(offered.contains(&"final_answer".to_owned()), "{body}");
    assert_eq!(body["response_format"]["type"], "json_object", "{body}");
    assert_eq!(call_names(&body), offered, "{body}");
    // Off sends the tools alone.
    assert_answer(
        &run(&sb, &mock, &["--env", "tools", "--constrain", "off"]),
        "hello",
    );
    let off = mock.control().requests().last().unwrap().body.clone();
    assert!(off.get("response_format").is_none(), "{off}");
    // llama.cpp's server parses tool calls itself: its tools go as offered.
    let sb = Sandbox::new();
    let llama_cpp = serving(MockTokenizer::LlamaCpp, reply);
    assert_answer(&run(&sb, &llama_cpp, &["--env", "tools"]), "hello");
    let body = first_body(&llama_cpp);
    assert!(body["tools"].is_array(), "{body}");
    assert!(body.get("response_format").is_none(), "{body}");
}

#[test]
fn config_show_says_what_auto_resolves_to_and_shows_the_grammar() {
    let sb = Sandbox::new();
    let mock = serving(MockTokenizer::LlamaCppPython, "FINAL(hello)");
    let out = sb
        .bare()
        .args(["config", "show", "--json", "--base-url"])
        .arg(mock.control().openai_base_url())
        .args(["--sub-constrain", "off"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let constrain = &shown["constrain"];
    assert_eq!(constrain[0]["mode"], "auto");
    assert_eq!(constrain[0]["sends"]["grammar"], "grammar", "{constrain}");
    assert_eq!(constrain[0]["sends"]["json_schema"], "json_object");
    assert_eq!(constrain[0]["sends"]["tool_calls_schema"], true);
    assert_eq!(constrain[1]["mode"], "off");
    assert_eq!(constrain[1]["sends"]["grammar"], Value::Null);
    assert_eq!(constrain[1]["sends"]["tool_calls_schema"], false);
    assert_eq!(shown["reply_grammar"], REPL_REPLY_GBNF);
    let text = sb
        .bare()
        .args(["config", "show", "--base-url"])
        .arg(mock.control().openai_base_url())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("model: auto (the server takes GBNF grammar"),
        "{text}"
    );
    assert!(text.contains("root ::= prose action"), "{text}");
}

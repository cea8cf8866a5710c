//! Sub-calls that return structure (`llm_query(…, schema=…)`, a plan's
//! `{"ask", "schema"}` map), the text tool protocol held to one call, a schema sent as
//! a grammar to a server that takes only grammars, and the bounded wait for
//! discovery: end to end through `run`, asserted from the mock's request log and what
//! the model's code received.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use rlm_test_support::mock_llm::{
    MockLlm, MockLlmThread, MockReply, MockRule, MockScript, MockTokenizer, MockToolCall,
};
use serde_json::{json, Value};

use crate::plans::after_step;
use crate::support::{assert_answer, Sandbox};

/// What every structured sub-prompt says (and no root prompt does).
const SUB_PROMPT_MARK: &str = "Answer with JSON only";

/// `run` against `mock` with `extra` flags.
fn run(sb: &Sandbox, mock: &MockLlmThread, extra: &[&str]) -> Output {
    sb.bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "count things", "--model", "mock", "--no-stream"])
        .arg("--base-url")
        .arg(mock.control().openai_base_url())
        .args(extra)
        .output()
        .unwrap()
}

/// `run "count the pears"` under `--env env` over `context`, against `mock`.
fn count_the_pears(sb: &Sandbox, mock: &MockLlmThread, env: &str, context: &Path) -> Output {
    sb.bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "count the pears", "--model", "mock", "--no-stream"])
        .args(["--env", env, "--context"])
        .arg(context)
        .arg("--base-url")
        .arg(mock.control().openai_base_url())
        .output()
        .unwrap()
}

/// A mock playing `server`: sub-prompts that contain a rule's needle get its reply,
/// the root gets `root` in turn.
fn serving(server: MockTokenizer, subs: &[(&str, &str)], root: &[String]) -> MockLlmThread {
    let mut script = MockScript::new();
    for (needle, reply) in subs {
        script = script.rule(MockRule::contains(*needle, MockReply::text(*reply)));
    }
    for reply in root {
        script = script.then(MockReply::text(reply.clone()));
    }
    script.tokenizer = server;
    MockLlm::spawn_blocking_thread(script).unwrap()
}

/// The bodies of the structured sub-calls, in order.
fn sub_bodies(mock: &MockLlmThread) -> Vec<Value> {
    mock.control()
        .requests()
        .into_iter()
        .filter(|r| r.prompt_text().contains(SUB_PROMPT_MARK))
        .map(|r| r.body)
        .collect()
}

/// Everything the root model was shown after its code ran.
fn root_saw(mock: &MockLlmThread) -> String {
    mock.control()
        .requests()
        .into_iter()
        .filter(|r| !r.prompt_text().contains(SUB_PROMPT_MARK))
        .map(|r| r.prompt_text())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The root's code, fenced.
fn block(code: &str) -> String {
    format!("```repl\n{code}\n```")
}

const COUNT_SCHEMA: &str =
    r#"{"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}"#;

#[test]
fn a_sub_call_with_a_schema_gets_its_value_and_the_schema_goes_to_the_server() {
    let python = block(&format!(
        r#"v = llm_query("How many pears?", schema={COUNT_SCHEMA})
print("got", type(v).__name__, v["count"] + 1)
labels = llm_query_parallel(["Which labels for pears?", "Which labels for figs?"], schema={{"type": "array", "items": {{"type": "string"}}}})
print("labels", labels[0][0], labels[1])"#
    ));
    let js = block(&format!(
        r#"const v = await llm_query("How many pears?", null, {{schema: {COUNT_SCHEMA}}});
console.log("got", typeof v, v.count + 1);
const labels = await llm_query_parallel(["Which labels for pears?", "Which labels for figs?"], {{schema: {{type: "array", items: {{type: "string"}}}}}});
console.log("labels", labels[0][0], labels[1]);"#
    ));
    for (env, code, kind, failed) in [
        ("python", python, "dict", "[llm_query error:"),
        ("js", js, "object", "[llm_query error:"),
    ] {
        let sb = Sandbox::new();
        let mock = serving(
            MockTokenizer::LlamaCppPython,
            &[
                ("How many pears?\n\nAnswer", r#"{"count": 3}"#),
                (
                    "labels for pears?\n\nAnswer",
                    "```json\n[\"ripe\", \"green\"]\n```",
                ),
                ("labels for figs?\n\nAnswer", "ripe and green"),
            ],
            &[code, "FINAL(done)".to_owned()],
        );
        assert_answer(&run(&sb, &mock, &["--env", env]), "done");
        let saw = root_saw(&mock);
        assert!(saw.contains(&format!("got {kind} 4")), "{env}: {saw}");
        // A reply that is not JSON is an error value in its place, naming the schema.
        assert!(
            saw.contains(&format!("labels ripe {failed}")),
            "{env}: {saw}"
        );
        assert!(saw.contains("does not match the schema"), "{env}: {saw}");
        let bodies = sub_bodies(&mock);
        assert_eq!(bodies.len(), 3, "{env}");
        assert_eq!(
            bodies[0]["response_format"],
            json!({"type": "json_object", "schema": serde_json::from_str::<Value>(COUNT_SCHEMA).unwrap()}),
            "{env}"
        );
        assert_eq!(
            bodies[1]["response_format"]["schema"],
            json!({"type": "array", "items": {"type": "string"}})
        );
    }
}

#[test]
fn a_mismatch_or_a_bad_schema_is_an_error_the_code_can_catch() {
    let python = block(
        r#"for schema in [{"type": "integer"}, "integer", {"type": "integr"}]:
    try:
        llm_query("How many apples?", schema=schema)
    except Exception as e:
        print("caught:", type(e).__name__, e)"#,
    );
    let js = block(
        r#"for (const schema of [{type: "integer"}, "integer", {type: "integr"}]) {
  try { await llm_query("How many apples?", null, {schema}); }
  catch (e) { console.log("caught:", e.name, e.message); }
}"#,
    );
    for (env, code) in [("python", python), ("js", js)] {
        let sb = Sandbox::new();
        let mock = serving(
            MockTokenizer::LlamaCppPython,
            &[("How many apples?\n\nAnswer", "three")],
            &[code, "FINAL(done)".to_owned()],
        );
        assert_answer(&run(&sb, &mock, &["--env", env]), "done");
        let saw = root_saw(&mock);
        for expected in [
            "caught: HostError llm_query: the sub-model's answer does not match the schema {\"type\":\"integer\"}: it is not JSON",
            "caught: HostError llm_query: `schema` must be a JSON Schema object",
            "caught: HostError llm_query: `schema` is not a valid JSON Schema",
        ] {
            assert!(saw.contains(expected), "{env}: {expected}\n{saw}");
        }
        // A bad schema sends nothing.
        assert_eq!(sub_bodies(&mock).len(), 1, "{env}");
    }
}

#[test]
fn a_server_that_says_nothing_gets_the_schema_in_the_prompt_alone() {
    let sb = Sandbox::new();
    let mock = serving(
        MockTokenizer::Unadvertised,
        &[("How many pears?\n\nAnswer", "42")],
        &[
            block(r#"print("got", llm_query("How many pears?", schema={"type": "integer"}) + 1)"#),
            "FINAL(done)".to_owned(),
        ],
    );
    assert_answer(&run(&sb, &mock, &["--env", "python"]), "done");
    assert!(root_saw(&mock).contains("got 43"));
    let sub = mock
        .control()
        .requests()
        .into_iter()
        .find(|r| r.prompt_text().contains(SUB_PROMPT_MARK))
        .unwrap();
    assert!(sub.body.get("response_format").is_none(), "{}", sub.body);
    assert!(sub.body.get("grammar").is_none(), "{}", sub.body);
    assert!(
        sub.prompt_text().contains(r#"Schema: {"type":"integer"}"#),
        "{}",
        sub.prompt_text()
    );
}

#[test]
fn a_plan_ask_map_with_a_schema_sums_the_values_it_read() {
    let fruit: String = (0..40).map(|i| format!("pear {i}\n")).collect();
    let sb = Sandbox::new();
    let context = sb.file("fruit.txt", &fruit);
    let mock = serving(
        MockTokenizer::LlamaCppPython,
        &[("listed?\n\nContext:", r#"{"count": 2}"#)],
        &[
            block(
                r#"r = map_reduce(split={"by": "chars", "size": 100}, map={"ask": "How many pears are listed?", "schema": {"type": "integer"}}, reduce={"op": "sum"})
print("total", r)"#,
            ),
            "FINAL(done)".to_owned(),
        ],
    );
    // The reply `{"count": 2}` is not an integer: every piece fails, naming why.
    let out = count_the_pears(&sb, &mock, "python", &context);
    assert_answer(&out, "done");
    let saw = root_saw(&mock);
    assert!(saw.contains("does not match the schema"), "{saw}");
    let bodies = sub_bodies(&mock);
    assert!(!bodies.is_empty());
    assert_eq!(
        bodies[0]["response_format"],
        json!({"type": "json_object", "schema": {"type": "integer"}})
    );
    // Asked for what it can answer, the values are summed.
    let sb = Sandbox::new();
    let context = sb.file("fruit.txt", &fruit);
    let mock = serving(
        MockTokenizer::LlamaCppPython,
        &[("listed?\n\nContext:", "2")],
        &[
            block(
                r#"r = map_reduce(split={"by": "chars", "size": 100}, map={"ask": "How many pears are listed?", "schema": {"type": "integer"}}, reduce={"op": "sum"})
print("sum", int(float(r)) == 2 * map_reduce.last["pieces"], map_reduce.last["pieces"] > 1)"#,
            ),
            "FINAL(done)".to_owned(),
        ],
    );
    let out = count_the_pears(&sb, &mock, "python", &context);
    assert_answer(&out, "done");
    let saw = root_saw(&mock);
    assert!(saw.contains("sum True True"), "{saw}");
}

/// What a leaf of the tools' structured maps is asked, and what marks its prompt.
const PEARS: &str = "How many pears are listed?";

/// The integer schema the tools' structured maps give.
fn integer() -> Value {
    json!({"type": "integer"})
}

/// A `--env tools` run over 40 lines of pears against a llama-cpp-python mock: each
/// leaf is answered `leaf`, the root makes `first`, then whatever `rules` make of the
/// results, and ends with `final_answer` after a result or a failure.
fn tools_run(leaf: &str, rules: Vec<MockRule>, first: MockToolCall) -> (Sandbox, MockLlmThread) {
    let fruit: String = (0..40).map(|i| format!("pear {i}\n")).collect();
    let sb = Sandbox::new();
    let context = sb.file("fruit.txt", &fruit);
    let done = |_| MockToolCall::new("final_answer", json!({"answer": "done"}));
    let mut script = MockScript::new().rule(MockRule::contains(
        format!("{PEARS}\n\nContext:"),
        MockReply::text(leaf),
    ));
    for rule in rules {
        script = script.rule(rule);
    }
    let mut script = script
        .rule(after_step("(plan:", "", done))
        .rule(after_step("(reduced from", "", done))
        .rule(after_step("failed:", "", done))
        .then(MockReply::tool_calls("", [first]));
    script.tokenizer = MockTokenizer::LlamaCppPython;
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let out = count_the_pears(&sb, &mock, "tools", &context);
    assert_answer(&out, "done");
    (sb, mock)
}

/// Every leaf asked for an integer: the schema went as `response_format` and is
/// stated in its prompt. How many there were.
fn leaves_asked_for_an_integer(mock: &MockLlmThread) -> usize {
    let leaves: Vec<_> = mock
        .control()
        .requests()
        .into_iter()
        .filter(|r| r.prompt_text().contains(SUB_PROMPT_MARK))
        .collect();
    for leaf in &leaves {
        assert_eq!(
            leaf.body["response_format"],
            json!({"type": "json_object", "schema": integer()}),
            "{}",
            leaf.body
        );
        let prompt = leaf.prompt_text();
        assert!(
            prompt.starts_with(&format!("{PEARS}\n\nContext:\npear "))
                && prompt.ends_with(r#"Schema: {"type":"integer"}"#),
            "{prompt}"
        );
    }
    leaves.len()
}

/// The results of the root's tool calls, in order (as its last request holds them).
fn tool_results(mock: &MockLlmThread) -> Vec<String> {
    let last = mock
        .control()
        .requests()
        .into_iter()
        .rfind(|r| !r.prompt_text().contains(SUB_PROMPT_MARK))
        .unwrap();
    last.messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The number the tool result that holds `marker` leads with, on its own line.
fn number_before(results: &[String], marker: &str) -> f64 {
    let result = results
        .iter()
        .find(|r| r.contains(marker))
        .unwrap_or_else(|| panic!("{marker}: {results:?}"));
    let line = result.lines().next().unwrap_or_default();
    line.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{line:?} before {marker}"))
}

#[test]
fn the_tools_map_reduce_takes_a_schema_and_sums_the_values_it_read() {
    let map_reduce = |map: Value| {
        MockToolCall::new(
            "ctx_map_reduce",
            json!({"variable": "context", "split": {"by": "chars", "size": 100}, "map": map, "reduce": {"op": "sum"}}),
        )
    };
    let shaped = json!({"ask": PEARS, "schema": integer()});
    let (_sb, mock) = tools_run("2", Vec::new(), map_reduce(shaped.clone()));
    // Offered: the map may be an ask with a schema.
    let first = &mock.control().requests()[0];
    let tools = first.body["tools"].as_array().unwrap();
    let offered = tools
        .iter()
        .find(|t| t["function"]["name"] == "ctx_map_reduce")
        .unwrap();
    let maps = offered["function"]["parameters"]["properties"]["map"]["anyOf"]
        .as_array()
        .unwrap();
    assert!(
        maps.iter()
            .any(|m| m["required"] == json!(["ask", "schema"])),
        "{maps:?}"
    );
    let leaves = leaves_asked_for_an_integer(&mock);
    assert!(leaves > 1, "{leaves} leaves");
    let results = tool_results(&mock);
    assert_eq!(number_before(&results, "(plan:"), 2.0 * leaves as f64);
    assert!(
        results[0].contains(&format!("(plan: {leaves} pieces")),
        "{results:?}"
    );
    // An answer of another shape fails the plan, naming the mismatch: no number.
    let (_sb, mock) = tools_run(r#"{"count": 2}"#, Vec::new(), map_reduce(shaped));
    assert!(leaves_asked_for_an_integer(&mock) >= 1);
    let results = tool_results(&mock);
    assert!(
        results[0].starts_with("ctx_map_reduce failed: ")
            && results[0].contains(
                r#"the plan's map: the sub-model's answer does not match the schema {"type":"integer"}: at the top"#
            ),
        "{results:?}"
    );
    assert!(!results.iter().any(|r| r.contains("(plan:")), "{results:?}");
}

#[test]
fn the_tools_map_step_takes_a_schema_with_its_ask() {
    let split = MockToolCall::new(
        "ctx_split",
        json!({"variable": "context", "by": "chars", "size": 100}),
    );
    let steps = || {
        vec![
            after_step("Next: ctx_map", "pieces-", |key| {
                MockToolCall::new(
                    "ctx_map",
                    json!({"pieces": key, "ask": PEARS, "schema": integer()}),
                )
            }),
            after_step("Next: ctx_reduce", "results-", |key| {
                MockToolCall::new("ctx_reduce", json!({"results": key, "op": "sum"}))
            }),
        ]
    };
    let (_sb, mock) = tools_run("3", steps(), split.clone());
    let leaves = leaves_asked_for_an_integer(&mock);
    assert!(leaves > 1, "{leaves} leaves");
    let results = tool_results(&mock);
    assert_eq!(
        number_before(&results, "(reduced from"),
        3.0 * leaves as f64
    );
    let (_sb, mock) = tools_run("three", steps(), split);
    assert!(leaves_asked_for_an_integer(&mock) >= 1);
    let results = tool_results(&mock);
    assert!(
        results[1].starts_with("ctx_map failed: ")
            && results[1].contains(r#"the sub-model's answer does not match the schema {"type":"integer"}: it is not JSON"#),
        "{results:?}"
    );
    assert!(
        !results.iter().any(|r| r.contains("(reduced from")),
        "{results:?}"
    );
}

#[test]
fn the_code_envs_map_step_takes_a_schema_with_its_ask() {
    let fruit: String = (0..40).map(|i| format!("pear {i}\n")).collect();
    let python = r#"pieces = ctx_split('context', by='chars', size=100)
results = ctx_map(pieces, ask='How many pears are listed?', schema={'type': 'integer'})
print('total', int(float(ctx_reduce(results, op='sum'))))
try:
    ctx_map(pieces, count='pear', schema={'type': 'integer'})
except ValueError as e:
    print('refused:', e)"#;
    let js = r#"const pieces = await ctx_split('context', {by: 'chars', size: 100});
const results = await ctx_map(pieces, {ask: 'How many pears are listed?', schema: {type: 'integer'}});
const total = await ctx_reduce(results, {op: 'sum'});
console.log('total', Number(total));"#;
    for (env, code) in [("python", python), ("js", js)] {
        let sb = Sandbox::new();
        let context = sb.file("fruit.txt", &fruit);
        let mock = serving(
            MockTokenizer::LlamaCppPython,
            &[(&format!("{PEARS}\n\nContext:"), "3")],
            &[block(code), "FINAL(done)".to_owned()],
        );
        let out = count_the_pears(&sb, &mock, env, &context);
        assert_answer(&out, "done");
        let leaves = leaves_asked_for_an_integer(&mock);
        assert!(leaves > 1, "{env}: {leaves} leaves");
        let saw = root_saw(&mock);
        assert!(
            saw.contains(&format!("total {}", 3 * leaves)),
            "{env}: {saw}"
        );
        if env == "python" {
            assert!(
                saw.contains("refused: ctx_map: schema goes with ask only"),
                "{saw}"
            );
        }
    }
}

#[test]
fn text_tool_calls_are_held_to_one_call_of_an_offered_tool() {
    let sb = Sandbox::new();
    let mut script =
        MockScript::always(MockReply::text(r#"{"final_answer": {"answer": "hello"}}"#));
    script.tokenizer = MockTokenizer::LlamaCppPython;
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let flags = ["--env", "tools", "--tool-protocol", "text"];
    assert_answer(&run(&sb, &mock, &flags), "hello");
    let request = &mock.control().requests()[0];
    let format = &request.body["response_format"];
    assert_eq!(format["type"], "json_object", "{}", request.body);
    let calls = format["schema"]["anyOf"].as_array().unwrap();
    let names: Vec<&str> = calls
        .iter()
        .map(|c| c["required"][0].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"ctx_grep") && names.contains(&"final_answer"),
        "{names:?}"
    );
    let system = request.system_prompt().unwrap();
    assert!(system.contains("One call a reply"), "{system}");
    assert!(!system.contains("several calls in one message"), "{system}");
    // A server that says nothing: the protocol's own prompt, no field.
    let sb = Sandbox::new();
    let mut script = MockScript::always(MockReply::text("FINAL(hello)"));
    script.tokenizer = MockTokenizer::Unadvertised;
    let silent = MockLlm::spawn_blocking_thread(script).unwrap();
    assert_answer(&run(&sb, &silent, &flags), "hello");
    let request = &silent.control().requests()[0];
    assert!(request.body.get("response_format").is_none());
    let system = request.system_prompt().unwrap();
    assert!(system.contains("several calls in one message"), "{system}");
}

#[test]
fn a_server_that_takes_only_grammars_gets_the_schema_as_one() {
    let sb = Sandbox::new();
    let mock = serving(
        MockTokenizer::Unadvertised,
        &[("How many pears?\n\nAnswer", "7")],
        &[
            "FINAL(first)".to_owned(),
            block(r#"print("got", llm_query("How many pears?", schema={"type": "integer"}))"#),
            "FINAL(done)".to_owned(),
        ],
    );
    // A first run keeps the server's record; it is made to say: grammars, no schema
    // (as a vLLM listing with `guided_grammar` and no `json_schema` would).
    assert_answer(&run(&sb, &mock, &["--env", "python"]), "first");
    let dir = sb.data_dir().join("servers");
    let record = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut facts: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    facts["constrain"] = json!({"grammar": "guided_grammar"});
    std::fs::write(&record, facts.to_string()).unwrap();
    assert_answer(
        &run(&sb, &mock, &["--env", "python", "--constrain", "grammar"]),
        "done",
    );
    assert!(root_saw(&mock).contains("got 7"));
    let sub = &sub_bodies(&mock)[0];
    assert!(sub.get("response_format").is_none(), "{sub}");
    let grammar = sub["guided_grammar"].as_str().unwrap();
    assert!(grammar.starts_with("root ::= integer\n"), "{grammar}");
}

#[test]
fn a_discovery_that_hangs_sends_the_request_unconstrained_and_keeps_nothing() {
    let sb = Sandbox::new();
    let mut script = MockScript::always(MockReply::text("FINAL(hello)"));
    script.tokenizer = MockTokenizer::LlamaCpp;
    // The server says nothing about itself for far longer than discovery waits.
    script.side_latency = Some(Duration::from_secs(30));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    assert_answer(&run(&sb, &mock, &["--env", "js"]), "hello");
    let body = mock.control().requests()[0].body.clone();
    assert!(body.get("grammar").is_none(), "{body}");
    let asked = mock.control().side_requests().len();
    assert!(asked >= 1);
    // Nothing was kept: the next run asks again.
    let servers = sb.data_dir().join("servers");
    let kept = std::fs::read_dir(&servers).map_or(0, |d| d.count());
    assert_eq!(kept, 0, "a record of a server that never answered");
    assert_answer(&run(&sb, &mock, &["--env", "js"]), "hello");
    assert!(mock.control().side_requests().len() > asked);
}

//! Combinator plans (`map_reduce`) end to end through `run` against the mock: leaves
//! asked in parallel (visible in the mock's arrival times), a plan over budget refused
//! before any call, leaves memoised across runs, deterministic maps with no call.

use std::process::Output;
use std::time::Duration;

use rlm_test_support::mock_llm::{
    MockLlm, MockLlmThread, MockReply, MockRule, MockScript, MockTokenizer, MockToolCall,
};
use serde_json::Value;

use crate::support::Sandbox;

/// What only a leaf's prompt holds: its piece of the log, after the instruction.
pub(crate) const LEAF: &str = "\n\nContext:\nline ";

/// 100 lines, 3 errors in every 10.
pub(crate) fn log() -> String {
    (0..100)
        .map(|i| {
            if i % 10 < 3 {
                format!("line {i}: error\n")
            } else {
                format!("line {i}: ok\n")
            }
        })
        .collect()
}

/// A root model that runs `code`, then answers with what it printed.
pub(crate) fn script(code: &str) -> MockScript {
    MockScript::new()
        .rule(MockRule::contains(
            LEAF,
            MockReply::text("3 errors").with_delay(Duration::from_millis(150)),
        ))
        .then(MockReply::text(format!("```repl\n{code}\n```")))
        .then(MockReply::text("FINAL(done)"))
}

pub(crate) fn run(sb: &Sandbox, mock: &MockLlmThread, extra: &[&str]) -> Output {
    let context = sb.file("app.log", log());
    run_task(sb, mock, "count the errors", &context, extra)
}

/// `run TASK` over the file `context` against `mock`, with `extra` flags.
fn run_task(
    sb: &Sandbox,
    mock: &MockLlmThread,
    task: &str,
    context: &std::path::Path,
    extra: &[&str],
) -> Output {
    sb.bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", task, "--model", "mock", "--no-stream"])
        .arg("--base-url")
        .arg(mock.control().openai_base_url())
        .arg("--context")
        .arg(context)
        .args(extra)
        .output()
        .unwrap()
}

/// What the code printed in the run's first step.
pub(crate) fn printed(sb: &Sandbox) -> String {
    let runs = sb.data_dir().join("runs");
    let mut outputs = String::new();
    for run in std::fs::read_dir(runs).unwrap() {
        let events = std::fs::read_to_string(run.unwrap().path().join("events.jsonl")).unwrap();
        for line in events.lines() {
            let event: Value = serde_json::from_str(line).unwrap();
            if event["kind"] == "exec" {
                outputs.push_str(event["output"].as_str().unwrap());
            }
        }
    }
    outputs
}

/// A run whose root model runs `code` then answers, against a fresh mock, with
/// `extra` flags; it must succeed. The sandbox, the mock, and what the code printed.
pub(crate) fn run_code(code: &str, extra: &[&str]) -> (Sandbox, MockLlmThread, String) {
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(script(code)).unwrap();
    let out = run(&sb, &mock, extra);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = printed(&sb);
    (sb, mock, printed)
}

/// The stages of every plan event of the runs in `sb`, in order.
pub(crate) fn plan_stages(sb: &Sandbox) -> Vec<String> {
    let mut stages = Vec::new();
    for run in std::fs::read_dir(sb.data_dir().join("runs")).unwrap() {
        let events = std::fs::read_to_string(run.unwrap().path().join("events.jsonl")).unwrap();
        for line in events.lines() {
            let event: Value = serde_json::from_str(line).unwrap();
            if event["kind"] == "plan" {
                stages.push(event["stage"].as_str().unwrap().to_owned());
            }
        }
    }
    stages
}

/// `runs show` of the first run.
pub(crate) fn runs_show(sb: &Sandbox) -> String {
    let run = std::fs::read_dir(sb.data_dir().join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name();
    let out = sb
        .bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["runs", "show"])
        .arg(run)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The model's `ctx_map_reduce` over the context with `parts` (split, filter, map,
/// reduce).
fn map_reduce_call(mut parts: Value) -> MockToolCall {
    parts["variable"] = "context".into();
    MockToolCall::new("ctx_map_reduce", parts)
}

/// A `final_answer` call of `answer`.
fn final_answer_call(answer: &str) -> MockToolCall {
    MockToolCall::new("final_answer", serde_json::json!({ "answer": answer }))
}

/// A root model whose replies are `calls` in turn, one call a reply.
fn one_call_a_reply(calls: impl IntoIterator<Item = MockToolCall>) -> MockScript {
    calls.into_iter().fold(MockScript::new(), |script, call| {
        script.then(MockReply::tool_calls("", [call]))
    })
}

/// A root model that makes each of `calls` in turn, then answers `answer` with
/// `final_answer`.
fn calls_then_answer(calls: impl IntoIterator<Item = MockToolCall>, answer: &str) -> MockScript {
    one_call_a_reply(calls.into_iter().chain([final_answer_call(answer)]))
}

/// A `--env plan` run over the log whose root model follows `script`; it must succeed.
/// The sandbox, the mock, and the answer printed.
fn run_env_plan(script: MockScript) -> (Sandbox, MockLlmThread, String) {
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let out = run(&sb, &mock, &["--env", "plan"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (sb, mock, answer)
}

pub(crate) fn leaf_requests(mock: &MockLlmThread) -> Vec<u64> {
    mock.control()
        .requests()
        .iter()
        .filter(|r| r.last_user_message().unwrap_or_default().contains(LEAF))
        .map(|r| r.received_unix_us)
        .collect()
}

const PLAN: &str = "print(map_reduce(split={'by': 'lines', 'size': 10}, filter={'regex': 'error'}, map={'ask': 'How many errors are in this piece? Answer with a number.'}, reduce={'op': 'sum'}))\nprint(map_reduce.last)";

/// A mock rule: when the last tool result contains `marker`, call `next` with the key
/// starting with `prefix` that result names (the step's variable; keys are random).
pub(crate) fn after_step(
    marker: &'static str,
    prefix: &'static str,
    next: fn(String) -> MockToolCall,
) -> MockRule {
    MockRule::function(format!("after {marker}"), move |request| {
        // The last tool result (a state line follows it).
        let texts = request.message_texts();
        let last = texts.iter().rev().find(|t| !t.starts_with("State:"))?;
        last.contains(marker)
            .then(|| MockReply::tool_calls("", [next(key_in(last, prefix))]))
    })
}

/// The first word of `text` that starts with `prefix` (a variable's key).
fn key_in(text: &str, prefix: &str) -> String {
    let Some(at) = text.rfind(prefix).filter(|_| !prefix.is_empty()) else {
        return String::new();
    };
    text[at..]
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn a_plan_asks_its_leaves_in_parallel_and_sums_them() {
    let (sb, mock, printed) = run_code(PLAN, &["--max-parallel", "4"]);
    assert!(printed.starts_with("30\n"), "{printed}");
    assert!(
        printed.contains("'pieces': 10") && printed.contains("'calls': 10"),
        "{printed}"
    );
    let arrivals = leaf_requests(&mock);
    assert_eq!(arrivals.len(), 10);
    // The trace holds the plan: priced, each leaf, done; `runs show` draws it.
    let stages = plan_stages(&sb);
    assert_eq!(stages.first().map(String::as_str), Some("priced"));
    assert_eq!(stages.iter().filter(|s| *s == "leaf").count(), 10);
    assert_eq!(stages.last().map(String::as_str), Some("done"));
    let shown = runs_show(&sb);
    assert!(
        shown.contains("10 pieces, 10 kept, 10 calls") && shown.contains("leaf 9 · bytes"),
        "{shown}"
    );
    assert!(shown.contains("→ 30 ("), "{shown}");
    // Four at a time: the first four arrive before the first answer (150 ms) is back.
    let mut sorted = arrivals.clone();
    sorted.sort_unstable();
    assert!(sorted[3] - sorted[0] < 150_000, "{sorted:?}");

    // The same plan again over the same data: every leaf is memoised.
    let again = MockLlm::spawn_blocking_thread(script(PLAN)).unwrap();
    let out = run(&sb, &again, &["--max-parallel", "4"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        leaf_requests(&again).is_empty(),
        "memoised leaves are not asked again"
    );
}

#[test]
fn a_plan_over_budget_is_refused_before_any_call() {
    let (sb, mock, printed) = run_code(PLAN, &["--max-llm-calls", "6"]);
    assert!(
        printed.contains("refused before any call") && printed.contains("10 model calls"),
        "{printed}"
    );
    assert!(leaf_requests(&mock).is_empty());
    assert_eq!(plan_stages(&sb), ["refused"]);
}

#[test]
fn a_deterministic_map_makes_no_call() {
    let sb = Sandbox::new();
    let code = "print(map_reduce(split={'by': 'chars', 'size': 300}, map={'count': 'error'}, reduce={'op': 'sum'}))";
    let mock = MockLlm::spawn_blocking_thread(script(code)).unwrap();
    let out = run(&sb, &mock, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(printed(&sb).starts_with("30\n"), "{}", printed(&sb));
    assert_eq!(
        mock.control().request_count(),
        2,
        "the root's two turns only"
    );
}

#[test]
fn a_bad_plan_says_what_to_write() {
    let code = "map_reduce(split={'by': 'regex'}, map={'ask': 'q'}, reduce={'op': 'sum'})";
    let (_, _, printed) = run_code(code, &[]);
    assert!(printed.contains("split.pattern"), "{printed}");
}

#[test]
fn javascript_runs_the_same_plans() {
    let code = "console.log(await map_reduce({split: {by: 'chars', size: 300}, map: {count: 'error'}, reduce: {op: 'sum'}}))\nconsole.log(map_reduce.last.pieces)";
    let (_, _, printed) = run_code(code, &["--env", "js"]);
    assert!(printed.starts_with("30\n"), "{printed}");
}

#[test]
fn the_tools_environment_runs_plans_as_a_micro_tool() {
    let sb = Sandbox::new();
    let call = MockToolCall::new(
        "ctx_map_reduce",
        serde_json::json!({
            "variable": "context",
            "split": {"by": "lines", "size": 25},
            "map": {"ask": "How many errors are in this piece? Answer with a number."},
            "reduce": {"op": "sum"},
        }),
    );
    let script = MockScript::new()
        .rule(MockRule::contains(LEAF, "7 errors"))
        .then(MockReply::tool_calls("", [call]))
        .then(MockReply::text("FINAL(done)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let out = run(&sb, &mock, &["--env", "tools"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = printed(&sb);
    assert!(
        printed.starts_with("28\n(plan: 4 pieces, 4 kept, 4 calls;"),
        "{printed}"
    );
    assert_eq!(leaf_requests(&mock).len(), 4);
    // The tool is offered by default, with its schema.
    let first = &mock.control().requests()[0];
    assert!(first.tool_names().contains(&"ctx_map_reduce".to_owned()));
}

#[test]
fn env_plan_makes_a_plan_the_models_one_action() {
    let plan = map_reduce_call(serde_json::json!({
        "split": {"by": "chars", "size": 500},
        "map": {"count": "error"},
        "reduce": {"op": "sum"},
    }));
    let (sb, mock, answer) = run_env_plan(calls_then_answer([plan], "30 errors"));
    assert_eq!(answer, "30 errors");
    let requests = mock.control().requests();
    assert_eq!(
        requests[0].tool_names(),
        ["ctx_length", "ctx_map_reduce", "final_answer"]
    );
    let system = requests[0].system_prompt().unwrap();
    assert!(system.contains("each step you give one plan"), "{system}");
    // The plan's result is what the model read next.
    let second = requests[1].message_texts().join("\n");
    assert!(
        second.contains("30\n(plan: 3 pieces, 3 kept, 0 calls"),
        "{second}"
    );
    assert!(runs_show(&sb).contains("env plan"), "{}", runs_show(&sb));
}

#[test]
fn a_map_reduce_that_leaves_out_variable_and_split_counts_the_context_by_lines() {
    // The local model's call after the tools prompt showed recipes of a map and a
    // reduction only: no `variable`, no `split`. The task's context, in lines.
    let plan = MockToolCall::new(
        "ctx_map_reduce",
        serde_json::json!({"map": {"count": "error"}, "reduce": {"op": "sum"}}),
    );
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(calls_then_answer([plan], "30")).unwrap();
    let out = run(&sb, &mock, &["--env", "tools"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = mock.control().requests();
    let result = requests[1].message_texts().join("\n");
    assert!(
        result.contains("30\n(plan: 1 pieces, 1 kept, 0 calls"),
        "{result}"
    );
}

#[test]
fn a_python_plan_without_a_split_cuts_the_context_in_lines() {
    // The default lives in the plan itself: every environment gets it, not only the
    // micro-tool.
    let (_sb, mock, printed) = run_code(
        "print(map_reduce(map={'count': 'error'}, reduce={'op': 'sum'}))",
        &[],
    );
    assert!(printed.starts_with("30\n"), "{printed}");
    assert!(leaf_requests(&mock).is_empty(), "a count asks no model");
}

#[test]
fn a_literal_extract_is_refused_and_a_filter_chooses_the_lines_an_extract_reads() {
    // Two plans the local model wrote: `extract` of the bare word it wanted the values
    // of, and a filter meant to keep lines (the amounts of `label=shipping`), which
    // kept whole pieces and summed every record's until a filter chose lines.
    let plan = |map: Value| {
        map_reduce_call(serde_json::json!({
            "split": {"by": "lines", "size": 50},
            "filter": {"regex": "error"},
            "map": map,
            "reduce": {"op": "top_k", "k": 1},
        }))
    };
    let literal = plan(serde_json::json!({"extract": "error"}));
    let filtered = plan(serde_json::json!({"extract": "line \\d+: (\\w+)"}));
    let (_sb, mock, answer) = run_env_plan(calls_then_answer([literal, filtered], "ok"));
    assert_eq!(answer, "ok");
    let requests = mock.control().requests();
    let refusal = requests[1].message_texts().join("\n");
    assert!(
        refusal.contains("`map.extract` \"error\" has no group")
            && refusal.contains("{\"count\": \"error\"}"),
        "{refusal}"
    );
    // Both pieces mention an error; only the error lines are read (70 lines say ok).
    let result = requests[2].message_texts().join("\n");
    assert!(
        result.contains("error (30)\n(plan: 2 pieces, 2 kept, 0 calls"),
        "{result}"
    );
}

#[test]
fn an_answer_before_any_plan_has_a_result_is_refused_once() {
    // The local model answered `label` right after its plan was refused; the guess is
    // sent back with the plan's error, the plan is written again, then the answer is
    // taken. A second guess is taken too: a run must be able to end.
    let literal = map_reduce_call(serde_json::json!({
        "split": {"by": "lines", "size": 50},
        "map": {"extract": "error"},
        "reduce": {"op": "top_k", "k": 1},
    }));
    let fixed = map_reduce_call(serde_json::json!({
        "split": {"by": "lines", "size": 50},
        "map": {"extract": "line \\d+: (\\w+)"},
        "reduce": {"op": "top_k", "k": 1},
    }));
    let script = one_call_a_reply([
        literal.clone(),
        final_answer_call("label"),
        fixed,
        final_answer_call("ok"),
    ]);
    let (_sb, mock, got) = run_env_plan(script);
    assert_eq!(got, "ok");
    let requests = mock.control().requests();
    let refused = requests[2].message_texts().join("\n");
    assert!(
        refused.contains("Answer not taken: no plan has given a result in this run")
            && refused.contains("Your last plan failed: ctx_map_reduce failed: the plan cannot run as written: `map.extract` \"error\" has no group"),
        "{refused}"
    );
    // A guess written as FINAL(...) is sent back the same way; the second guess is
    // taken.
    let script = one_call_a_reply([literal])
        .then(MockReply::text("FINAL(label)"))
        .then(MockReply::tool_calls("", [final_answer_call("label")]));
    let (sb, mock, got) = run_env_plan(script);
    assert_eq!(got, "label", "the second guess is taken");
    let refused = mock.control().requests()[2].message_texts().join("\n");
    assert!(
        refused.contains("Answer not taken: no plan has given a result in this run"),
        "{refused}"
    );
    // The trace says why the run went on: the refusal is a correction event.
    let shown = runs_show(&sb);
    assert!(
        shown.contains("correction answer_before_result (on_answer, refuse): Answer not taken"),
        "{shown}"
    );
}

/// 100 records, `label=payments` in 3 of every 10, `label=fraud` in the rest.
fn labelled_records() -> String {
    (0..100)
        .map(|i| {
            let label = if i % 10 < 3 { "payments" } else { "fraud" };
            format!("record {i}: label={label}\n")
        })
        .collect()
}

/// The task over [`labelled_records`] the plan checks' tests ask: a count of a
/// `key=value` (30).
const PAYMENTS_TASK: &str = "How many records have label=payments? Answer with a number.";

/// A plan that fails by its own types, whatever the task: the words an `extract`
/// gives, summed.
fn summed_words() -> MockToolCall {
    map_reduce_call(serde_json::json!({
        "map": {"extract": "label=(\\w+)"},
        "reduce": {"op": "sum"},
    }))
}

/// A `--env ENV` run of `task` over [`labelled_records`] whose root model follows
/// `script`; it must succeed. The mock and the answer printed.
fn run_on_records(env: &str, task: &str, script: MockScript) -> (MockLlmThread, String) {
    run_on(env, task, labelled_records(), script)
}

/// A `--env ENV` run of `task` over the text `records` whose root model follows
/// `script`; it must succeed. The mock and the answer printed.
pub(crate) fn run_on(
    env: &str,
    task: &str,
    records: String,
    script: MockScript,
) -> (MockLlmThread, String) {
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let context = sb.file("records.txt", records);
    let out = run_task(&sb, &mock, task, &context, &["--env", env]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (mock, String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[test]
fn under_tools_an_answer_right_after_a_refused_plan_is_sent_back_once() {
    // A plan that fails by its own types (a sum of the words an extract gave), then
    // 0 answered at once. The guess goes back with the plan's error; the plan is
    // written again and its result answered.
    let task = PAYMENTS_TASK;
    let asked = summed_words();
    let counted = map_reduce_call(serde_json::json!({
        "map": {"count": "label=payments"},
        "reduce": {"op": "sum"},
    }));
    let script = one_call_a_reply([asked, final_answer_call("0"), counted])
        .then(MockReply::tool_calls("", [final_answer_call("30")]));
    let (mock, answer) = run_on_records("tools", task, script);
    assert_eq!(answer, "30");
    let sent_back = mock.control().requests()[2].message_texts().join("\n");
    assert!(
        sent_back.contains("Answer not taken: your last plan failed")
            && sent_back
                .contains("The plan's error: ctx_map_reduce failed: the plan's reduction failed")
            && sent_back.contains("the extract gave values, not numbers"),
        "{sent_back}"
    );
}

#[test]
fn under_tools_a_refused_plan_rebuilt_from_the_step_tools_is_a_result() {
    // A failed plan written again with ctx_split, ctx_map and ctx_reduce: its answer
    // must not be sent back as a guess because only ctx_map_reduce counted as a plan.
    // A ctx_reduce result counts.
    let task = PAYMENTS_TASK;
    let asked = summed_words();
    let split = MockToolCall::new(
        "ctx_split",
        serde_json::json!({"variable": "context", "by": "lines", "size": 25}),
    );
    let script = MockScript::new()
        .rule(after_step("Next: ctx_map", "pieces-", |key| {
            MockToolCall::new(
                "ctx_map",
                serde_json::json!({"pieces": key, "count": "label=payments"}),
            )
        }))
        .rule(after_step("Next: ctx_reduce", "results-", |key| {
            MockToolCall::new(
                "ctx_reduce",
                serde_json::json!({"results": key, "op": "sum"}),
            )
        }))
        .rule(after_step("(reduced from", "", |_| final_answer_call("30")))
        .then(MockReply::tool_calls("", [asked]))
        .then(MockReply::tool_calls("", [split]));
    let (mock, answer) = run_on_records("tools", task, script);
    assert_eq!(answer, "30");
    let requests = mock.control().requests();
    let refused = requests[1].message_texts().join("\n");
    assert!(
        refused.contains("the extract gave values, not numbers"),
        "{refused}"
    );
    assert_eq!(requests.len(), 5, "refused, split, map, reduce, answered");
    assert!(
        requests
            .iter()
            .all(|r| !r.message_texts().join("\n").contains("Answer not taken")),
        "the answer after ctx_reduce was taken at once"
    );
}

/// Six people, `person 000000: city=Lima year=2004` a line: of those born after 2000,
/// two pairs share a city (Lima, Oslo).
pub(crate) fn six_people() -> String {
    [
        ("Lima", 2004),
        ("Lima", 2010),
        ("Lima", 1990),
        ("Oslo", 2001),
        ("Oslo", 2003),
        ("Kyiv", 2005),
    ]
    .iter()
    .enumerate()
    .map(|(i, (city, year))| format!("person {i:06}: city={city} year={year}\n"))
    .collect()
}

#[test]
fn under_plan_an_answer_right_after_a_failed_plan_is_sent_back_once() {
    // A plan gave a result, the next failed by its own types, and `0` was answered at
    // once: sent back once with the plan's error.
    let task = "Which label appears in the most records? Answer with the label only.";
    let ranked = map_reduce_call(serde_json::json!({
        "map": {"extract": "label=(\\w+)"},
        "reduce": {"op": "top_k", "k": 1},
    }));
    let script = one_call_a_reply([
        ranked,
        summed_words(),
        final_answer_call("0"),
        final_answer_call("fraud"),
    ]);
    let (mock, answer) = run_on_records("plan", task, script);
    assert_eq!(answer, "fraud");
    let requests = mock.control().requests();
    let refused = requests[3].message_texts().join("\n");
    assert!(
        refused.contains(
            "Answer not taken: your last plan failed and no plan has given a result since"
        ) && refused.contains("the extract gave values, not numbers"),
        "{refused}"
    );
}

/// The peak resident memory of process `pid` so far (`VmHWM`), in KiB; `None` once it
/// is gone.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn a_1_gib_referenced_file_is_mapped_in_pieces_without_loading_it_whole() {
    use std::io::{Seek, SeekFrom, Write};
    let sb = Sandbox::new();
    let big = sb.root().join("huge.log");
    // Sparse: the holes cost the disk nothing and read as NUL characters.
    let mut file = std::fs::File::create(&big).unwrap();
    file.seek(SeekFrom::Start(700 << 20)).unwrap();
    file.write_all(b"\nNEEDLE-1GB\n").unwrap();
    file.set_len(1 << 30).unwrap();
    drop(file);
    let code = "print(map_reduce(split={'by': 'chars', 'size': 64000000}, map={'count': 'NEEDLE-1GB'}, reduce={'op': 'sum'}))\nprint(map_reduce.last['pieces'])";
    let mock = MockLlm::spawn_blocking_thread(script(code)).unwrap();
    let mut child = std::process::Command::new(crate::support::BIN)
        .current_dir(sb.root())
        .env_remove("RLM_DATA_DIR")
        .env_remove("RUST_LOG")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "count the needles", "--model", "mock", "--no-stream"])
        .args(["--lazy-context", "always", "--max-parallel", "2"])
        .args(["--exec-timeout", "600"])
        .arg("--base-url")
        .arg(mock.control().openai_base_url())
        .arg("--context")
        .arg(&big)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut peak = 0;
    // Bounded: a working build is done in seconds.
    for _ in 0..6_000 {
        if let Some(kib) = peak_rss_kib(pid) {
            peak = peak.max(kib);
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = printed(&sb);
    assert!(printed.starts_with("1\n17\n"), "{printed}");
    // Two 64 MB pieces in flight, never the 1 GiB whole.
    assert!(peak < 512 * 1024, "the orchestrator peaked at {peak} KiB");
    assert!(leaf_requests(&mock).is_empty(), "a count needs no model");
}

#[test]
fn plans_compose_and_their_depth_is_bounded() {
    let sb = Sandbox::new();
    let inner = "{'split': {'by': 'lines', 'size': 10}, 'map': {'count': 'error'}, 'reduce': {'op': 'sum'}}";
    let code = format!(
        "print(map_reduce(split={{'by': 'lines', 'size': 50}}, map={{'plan': {inner}}}, reduce={{'op': 'sum'}}))\nprint(map_reduce.last['pieces'])"
    );
    let mock = MockLlm::spawn_blocking_thread(script(&code)).unwrap();
    let out = run(&sb, &mock, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let composed = printed(&sb);
    assert!(composed.starts_with("30\n2\n"), "{composed}");
    // Priced as a whole before it ran: the outer 2 pieces and the inner 10.
    assert!(
        runs_show(&sb).contains("12 pieces, 12 kept, 0 calls"),
        "{}",
        runs_show(&sb)
    );

    let (_, _, refused) = run_code(&code, &["--max-depth", "0"]);
    assert!(
        refused.contains("nests 1 plans deep, over --max-depth 0"),
        "{refused}"
    );
}

#[test]
fn records_split_a_json_list_by_items() {
    let code = "rows = [{'status': 'failed' if i % 3 == 0 else 'ok'} for i in range(30)]\nprint(map_reduce(input='rows', split={'by': 'records', 'size': 4}, map={'count': 'failed'}, reduce={'op': 'sum'}))\nprint(map_reduce.last['pieces'])\nmap_reduce(split={'by': 'records'}, map={'count': 'x'}, reduce={'op': 'sum'})";
    let (_, _, printed) = run_code(code, &[]);
    assert!(printed.starts_with("10\n8\n"), "{printed}");
    // The context is text, not a list: the error says what to use.
    assert!(
        printed.contains("`records` splits a JSON list"),
        "{printed}"
    );
}

#[test]
fn a_split_into_too_many_pieces_is_refused_before_it_is_cut() {
    // Found trying a one-character size as a user would: a 950 KB log became 950 000
    // pieces, 1.7 GB of memory and a 239 MB trace.
    let code = "rows = 'a line of log text\\n' * 50000\nmap_reduce(input='rows', split={'by': 'chars', 'size': 1}, map={'count': 'a'}, reduce={'op': 'sum'})";
    let (sb, _, printed) = run_code(code, &[]);
    assert!(
        printed.contains("more than 10000 pieces") && printed.contains("larger `split.size`"),
        "{printed}"
    );
    // Nothing priced, nothing ran; the refusal is in the trace.
    assert_eq!(plan_stages(&sb), ["refused"]);
}

#[test]
fn env_plan_without_tool_calling_sends_the_plan_schema_as_response_format() {
    // A server like llama-cpp-python 0.3's: `json_schema` is refused — with a 500 and
    // its validation error, as the real server answers it (not retried) — and the
    // `json_object` form with a schema is taken; the replies are the keyed calls a
    // grammar holds the model to.
    let refuses_json_schema = MockRule::function("refuses json_schema", |request| {
        (request.body["response_format"]["type"] == "json_schema").then(|| {
            MockReply::error(
                500,
                r#"{"error":{"message":"1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}","type":"internal_server_error"}}"#,
            )
        })
    });
    let plan = r#"{"ctx_map_reduce": {"map": {"count": "error"}, "reduce": {"op": "sum"}, "split": {"by": "chars", "size": 500}, "variable": "context"}}"#;
    // Where the server's listing says it takes `json_object` with a schema (as the
    // real one's does), that form goes from the first request (--constrain auto); where
    // it says nothing and the user asks for a schema anyway (--constrain json), the
    // refusal of `json_schema` teaches the form.
    for (tokenizer, flags, expected) in [
        (
            MockTokenizer::LlamaCppPython,
            &[][..],
            &["json_object", "json_object"][..],
        ),
        (
            MockTokenizer::Unadvertised,
            &["--constrain", "json"][..],
            &["json_schema", "json_object", "json_object"][..],
        ),
    ] {
        let sb = Sandbox::new();
        let mut script = MockScript::new()
            .rule(refuses_json_schema.clone())
            .then(MockReply::text(plan))
            .then(MockReply::text(
                r#"{"final_answer": {"answer": "30 errors"}}"#,
            ));
        script.tokenizer = tokenizer;
        let mock = MockLlm::spawn_blocking_thread(script).unwrap();
        let mut args = vec!["--env", "plan", "--tool-protocol", "text"];
        args.extend(flags);
        let out = run(&sb, &mock, &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "30 errors");
        let requests = mock.control().requests();
        let formats: Vec<&Value> = requests
            .iter()
            .map(|r| &r.body["response_format"]["type"])
            .collect();
        assert_eq!(formats, expected, "{tokenizer:?}");
        let taken = &requests[requests.len() - 2];
        let schema = &taken.body["response_format"]["schema"];
        assert_eq!(schema["anyOf"][1]["required"][0], "ctx_map_reduce");
        assert!(taken.tool_names().is_empty(), "no tool calling");
        let system = taken.system_prompt().unwrap();
        assert!(system.contains("keyed by the tool you call"), "{system}");
        let second = requests[requests.len() - 1].message_texts().join("\n");
        assert!(
            second.contains("30\n(plan: 3 pieces, 3 kept, 0 calls"),
            "{second}"
        );
    }
}

#[test]
fn a_piece_too_large_is_refused_in_the_splits_own_unit() {
    // The local model's plan: `lines` with a size larger than the whole log, one
    // piece over the sub-model's window. The advice counts lines, as the plan does.
    let code = "big = 'line 7: error in the payment service\\n' * 2000\ntry:\n    map_reduce(input='big', split={'by': 'lines', 'size': 20000}, map={'ask': 'How many errors?'}, reduce={'op': 'sum'})\nexcept Exception as e:\n    print(e)";
    let (_, mock, printed) = run_code(code, &["--sub-context-window", "1024"]);
    assert!(
        printed.contains("use \"size\": ")
            && printed.contains(" or less in `split` (counted in lines): piece 0 is about "),
        "{printed}"
    );
    assert!(leaf_requests(&mock).is_empty());
}

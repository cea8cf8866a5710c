//! The reductions over records (`group_by`, `argmax`, `count_distinct`) through the
//! binary, against a scripted model that writes the right plan: `--env plan` and the
//! tools' step-by-step combinators hand back the reduction's result and the run ends
//! with the model's own answer in two calls; python and js run the same plan with
//! `map_reduce`; a reduction the plan's values cannot feed is refused with the values
//! it could not read, and the model's corrected plan then runs.

use std::process::Output;

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockScript, MockToolCall};
use serde_json::{json, Value};

use super::plans::{after_step, printed};
use crate::support::Sandbox;

/// Sales as CSV: date, kiosk, total. kiosk-3 takes 4.50 + 1.25 + 20, kiosk-1 takes 2,
/// kiosk-7 takes 9.
const SALES: &str = "date,kiosk,total\n2024-05-01,kiosk-3,4.50\n2024-05-01,kiosk-1,2\n2024-05-02,kiosk-3,1.25\n2024-05-02,kiosk-7,9\n2024-05-03,kiosk-3,20\n";

/// A sales line's kiosk, and its total (the header has no number: it is in no group).
const KIOSK: &str = "^[^,]*,([^,]+),";
const TOTAL: &str = r",([\d.]+)$";
/// A kiosk's name, wherever it is.
const KIOSK_ID: &str = r"kiosk-\d+";

/// Each kiosk's takings, the largest first, as the reduction writes them.
const PER_KIOSK: &str = "kiosk-3: 25.75\nkiosk-7: 9\nkiosk-1: 2";

/// `run TASK --context sales.csv` against `mock` with `extra` flags.
fn run_over_sales(sb: &Sandbox, mock: &MockLlmThread, task: &str, extra: &[&str]) -> Output {
    let context = sb.file("sales.csv", SALES);
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

/// The run must have succeeded: its answer.
fn answer_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A `ctx_map_reduce` over the context: every line whole, then `reduce`.
fn over_lines(reduce: Value) -> MockToolCall {
    MockToolCall::new(
        "ctx_map_reduce",
        json!({
            "variable": "context",
            "split": {"by": "lines"},
            "map": {"extract": "^.*$"},
            "reduce": reduce,
        }),
    )
}

/// A root model whose replies are `calls`, one a reply, then `final_answer(answer)`.
fn calls_then_answer(calls: impl IntoIterator<Item = MockToolCall>, answer: &str) -> MockScript {
    calls
        .into_iter()
        .chain([MockToolCall::new(
            "final_answer",
            json!({ "answer": answer }),
        )])
        .fold(MockScript::new(), |script, call| {
            script.then(MockReply::tool_calls("", [call]))
        })
}

/// The texts of the `n`th request the model was sent (from 0).
fn sent(mock: &MockLlmThread, n: usize) -> String {
    mock.control().requests()[n].message_texts().join("\n")
}

#[test]
fn env_plan_runs_a_group_by_and_the_model_answers_in_two_calls() {
    let sb = Sandbox::new();
    let plan = over_lines(json!({"op": "group_by", "key": KIOSK, "value": TOTAL, "agg": "sum"}));
    let answer = "kiosk-3 took 25.75, kiosk-7 9 and kiosk-1 2.";
    let mock = MockLlm::spawn_blocking_thread(calls_then_answer([plan], answer)).unwrap();
    let out = run_over_sales(
        &sb,
        &mock,
        "How much did each kiosk take in?",
        &["--env", "plan"],
    );
    assert_eq!(answer_of(&out), answer);
    assert_eq!(
        mock.control().request_count(),
        2,
        "the plan, then the answer"
    );
    // The model read the reduction's result, and the prompt had offered it.
    let second = sent(&mock, 1);
    assert!(second.contains(PER_KIOSK), "{second}");
    let system = mock.control().requests()[0].system_prompt().unwrap();
    assert!(system.contains("\"op\": \"group_by\""), "{system}");
}

#[test]
fn a_sum_over_values_that_are_not_numbers_is_refused_with_the_values() {
    let sb = Sandbox::new();
    // The value pattern takes the whole last field: the header's `total` too.
    let loose = over_lines(
        json!({"op": "group_by", "key": "^[^,]*,([^,]+),", "value": ",([^,]+)$", "agg": "sum"}),
    );
    let fixed = over_lines(json!({"op": "group_by", "key": KIOSK, "value": TOTAL, "agg": "sum"}));
    let mock =
        MockLlm::spawn_blocking_thread(calls_then_answer([loose, fixed], PER_KIOSK)).unwrap();
    let out = run_over_sales(
        &sb,
        &mock,
        "How much did each kiosk take in?",
        &["--env", "plan"],
    );
    assert_eq!(answer_of(&out), PER_KIOSK);
    let refusal = sent(&mock, 1);
    assert!(
        refusal.contains(r#"`sum` adds and compares numbers, but the value pattern ",([^,]+)$" captured 1 values that are not numbers: "total" (record 1)"#),
        "{refusal}"
    );
    assert!(sent(&mock, 2).contains(PER_KIOSK), "{}", sent(&mock, 2));
    assert_eq!(mock.control().request_count(), 3);
}

#[test]
fn the_tools_steps_group_and_rank_records() {
    let sb = Sandbox::new();
    let split = MockToolCall::new(
        "ctx_split",
        json!({"variable": "context", "by": "lines", "size": 2}),
    );
    let script = MockScript::new()
        .rule(after_step("characters in all", "pieces-", |pieces| {
            MockToolCall::new("ctx_map", json!({"pieces": pieces, "extract": "^.*$"}))
        }))
        .rule(after_step("results of", "results-", |results| {
            MockToolCall::new(
                "ctx_reduce",
                json!({"results": results, "op": "group_by", "key": KIOSK, "agg": "count", "k": 1}),
            )
        }))
        .rule(after_step("(reduced from", "", |_| {
            MockToolCall::new("final_answer", json!({"answer": "kiosk-3, 3 sales"}))
        }))
        .then(MockReply::tool_calls("", [split]));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let out = run_over_sales(
        &sb,
        &mock,
        "Which kiosk made the largest number of sales?",
        &["--env", "tools"],
    );
    assert_eq!(answer_of(&out), "kiosk-3, 3 sales");
    let reduced = sent(&mock, 3);
    assert!(
        reduced.contains("kiosk-3: 3\n(reduced from 6 results)"),
        "{reduced}"
    );
}

/// What a python or js run printed whose code is `code`; the model then answers.
fn code_prints(env: &str, code: &str) -> String {
    let sb = Sandbox::new();
    let script = MockScript::new()
        .then(MockReply::text(format!("```repl\n{code}\n```")))
        .then(MockReply::text("FINAL(done)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let out = run_over_sales(&sb, &mock, "Report on the sales.", &["--env", env]);
    answer_of(&out);
    assert_eq!(
        mock.control().request_count(),
        2,
        "no model call in the plan"
    );
    printed(&sb)
}

#[test]
fn python_and_js_run_the_record_reductions_with_map_reduce() {
    let python = code_prints(
        "python",
        &format!(
            "print(map_reduce(split={{'by': 'lines'}}, map={{'extract': '^.*$'}}, reduce={{'op': 'group_by', 'key': {KIOSK:?}, 'value': {TOTAL:?}, 'agg': 'sum'}}))\n\
             print(map_reduce(map={{'extract': {KIOSK_ID:?}}}, reduce={{'op': 'count_distinct'}}))\n\
             print(map_reduce(map={{'extract': '^.*$'}}, reduce={{'op': 'argmax', 'value': {TOTAL:?}}}))"
        ),
    );
    let want = format!("{PER_KIOSK}\n3\n2024-05-03,kiosk-3,20\n");
    assert_eq!(python, want);
    let js = code_prints(
        "js",
        &format!(
            "console.log(await map_reduce({{split: {{by: 'lines'}}, map: {{extract: '^.*$'}}, reduce: {{op: 'group_by', key: {KIOSK:?}, value: {TOTAL:?}, agg: 'sum'}}}}))\n\
             console.log(await map_reduce({{map: {{extract: {KIOSK_ID:?}}}, reduce: {{op: 'count_distinct'}}}}))\n\
             console.log(await map_reduce({{map: {{extract: '^.*$'}}, reduce: {{op: 'argmax', value: {TOTAL:?}}}}}))"
        ),
    );
    assert_eq!(js, want);
}

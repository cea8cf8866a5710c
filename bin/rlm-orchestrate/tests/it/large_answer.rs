//! A large answer is kept once: printed whole, stored beside the trace in `answer.txt`,
//! and clipped in `events.jsonl` and `summary.json` (a 50 MB `FINAL_VAR` used to make a
//! 100 MB trace); `runs show` gives it whole.

use rlm_test_support::mock_llm::{MockLlm, MockReply, MockScript};
use serde_json::Value;

use crate::support::Sandbox;

/// Seen failing before the fix: the trace held the answer three times over.
#[test]
fn a_large_answer_is_traced_once_by_reference() {
    const SIZE: usize = 2 << 20;
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(MockScript::replies([
        MockReply::text(format!("```repl\nbig = 'y' * {SIZE}\nprint(len(big))\n```")),
        MockReply::text("FINAL_VAR(big)"),
    ]))
    .unwrap();
    let context = sb.file("context.txt", "the context\n");
    let output = sb
        .bare()
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "a task", "--model", "mock", "--base-url"])
        .arg(mock.control().openai_base_url())
        .arg("--context")
        .arg(&context)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.stdout.len(), SIZE + 1, "the answer is printed whole");

    let runs = sb.data_dir().join("runs");
    let run_dir = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let events = std::fs::metadata(run_dir.join("events.jsonl"))
        .unwrap()
        .len();
    let summary = std::fs::metadata(run_dir.join("summary.json"))
        .unwrap()
        .len();
    let answer = std::fs::read_to_string(run_dir.join("answer.txt")).unwrap();
    assert_eq!(answer.len(), SIZE);
    assert!(events < 300 << 10, "events.jsonl is {events} bytes");
    assert!(summary < 100 << 10, "summary.json is {summary} bytes");
    let text = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    assert!(text.contains("answer.txt"), "the trace names the file");

    let run_id = run_dir.file_name().unwrap().to_string_lossy().into_owned();
    let shown = sb
        .bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["runs", "show", &run_id, "--json"])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["answer"].as_str().map(str::len), Some(SIZE));
}

/// Issue 22, item 12c: `--events` carried a large answer twice (in `final` and again
/// in `run_finished`). The `final` event carries it; `run_finished` does not repeat it,
/// and `runs show` still has the answer.
#[test]
fn events_on_stdout_carry_a_large_answer_once() {
    const SIZE: usize = 1 << 20;
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(MockScript::replies([
        MockReply::text(format!("```repl\nbig = 'y' * {SIZE}\nprint(len(big))\n```")),
        MockReply::text("FINAL_VAR(big)"),
    ]))
    .unwrap();
    let output = sb
        .bare()
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "a task", "--events", "--model", "mock", "--base-url"])
        .arg(mock.control().openai_base_url())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer = "y".repeat(SIZE);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(
        stdout.matches(&answer).count(),
        1,
        "the answer is not on stdout once"
    );
    let events: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let of = |kind: &str| {
        events
            .iter()
            .find(|e| e["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} event"))
    };
    assert_eq!(of("final")["answer"].as_str(), Some(answer.as_str()));
    assert!(of("run_finished")["answer"].is_null());
    assert_eq!(of("run_finished")["status"], "answered");
    let run_id = of("run_finished")["run_id"].as_str().unwrap().to_owned();
    let shown = sb
        .bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["runs", "show", &run_id, "--json"])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["answer"].as_str().map(str::len), Some(SIZE));
}

//! What reaches a terminal: an answer's escape sequences are shown, never obeyed (but
//! `--json` and a pipe get the answer exactly), and a failure is reported once.

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockScript};
use serde_json::Value;

use crate::support::Sandbox;

/// An answer that would retitle the window, clear the screen and hide a line.
const HOSTILE: &str = "evil \u{1b}]0;pwned\u{7} \u{1b}[2J\rdone";

fn mock_answering(answer: &str) -> MockLlmThread {
    MockLlm::spawn_blocking_thread(MockScript::replies([MockReply::text(format!(
        "FINAL({answer})"
    ))]))
    .unwrap()
}

fn run_args(sb: &Sandbox, base_url: &str) -> Vec<String> {
    [
        "--data-dir",
        &sb.data_dir().to_string_lossy(),
        "run",
        "a task",
        "--base-url",
        base_url,
        "--model",
        "mock",
        "--retries",
        "0",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Seen failing before the fix: the answer's ESC and BEL bytes reached the terminal.
#[test]
fn an_answer_is_escaped_on_a_terminal() {
    let sb = Sandbox::new();
    let mock = mock_answering(HOSTILE);
    let mut command = std::process::Command::new(crate::support::BIN);
    command
        .current_dir(sb.root())
        .env_remove("OPENAI_API_KEY")
        .env_remove("RLM_DATA_DIR")
        .env("TERM", "dumb")
        .args(run_args(&sb, &mock.control().openai_base_url()));
    let options = rexpect::reader::Options::new()
        .timeout_ms(Some(60_000))
        .strip_ansi_escape_codes(false);
    let mut term = rexpect::spawn_with_options(command, options).unwrap();
    let shown = term.exp_eof().unwrap();
    assert!(
        shown.contains(r"evil \u{1b}]0;pwned\u{7} \u{1b}[2J\rdone"),
        "{shown:?}"
    );
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
        "{shown:?}"
    );
}

#[test]
fn a_pipe_and_json_get_the_answer_exactly() {
    let sb = Sandbox::new();
    let mock = mock_answering(HOSTILE);
    let out = sb
        .bare()
        .env_remove("OPENAI_API_KEY")
        .args(run_args(&sb, &mock.control().openai_base_url()))
        .assert()
        .success();
    assert_eq!(out.get_output().stdout, format!("{HOSTILE}\n").as_bytes());

    let sb = Sandbox::new();
    let mock = mock_answering(HOSTILE);
    let out = sb
        .bare()
        .env_remove("OPENAI_API_KEY")
        .args(run_args(&sb, &mock.control().openai_base_url()))
        .arg("--json")
        .assert()
        .success();
    let report: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["answer"], HOSTILE);
}

/// Seen failing before the fix: the progress view printed the run's error, then the
/// command printed it again (with the trace directory).
#[test]
fn a_failure_is_reported_once() {
    let sb = Sandbox::new();
    let out = sb
        .bare()
        .env_remove("OPENAI_API_KEY")
        .args(run_args(&sb, "http://127.0.0.1:9/v1"))
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    let reports = stderr.matches("cannot reach the model endpoint").count();
    assert_eq!(reports, 1, "{stderr}");
    assert!(stderr.contains("trace kept in"), "{stderr}");
}

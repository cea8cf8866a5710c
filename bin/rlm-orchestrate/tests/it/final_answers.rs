//! What counts as a final answer, end to end through `run`: a reply the server cut at
//! the output-token limit (`finish_reason: "length"`) is never the answer, even with a
//! closed `FINAL(...)` in it, and an unclosed `FINAL(` is not one either; each gets a
//! correction that says why, and the next reply answers.

use std::process::Output;

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockScript};

use crate::support::{reply_with_finish, Sandbox};

/// `run "a task" --context … --no-stream` against `mock`.
fn run(sb: &Sandbox, mock: &MockLlmThread) -> Output {
    let context = sb.file("context.txt", "the context\n");
    let mut command = sb.bare();
    command
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args([
            "run",
            "a task",
            "--model",
            "mock",
            "--no-stream",
            "--base-url",
        ])
        .arg(mock.control().openai_base_url())
        .arg("--context")
        .arg(&context);
    command.output().unwrap()
}

/// The last user message of each request the mock received.
fn last_user_messages(mock: &MockLlmThread) -> Vec<String> {
    mock.control()
        .requests()
        .iter()
        .map(|r| r.last_user_message().unwrap_or_default())
        .collect()
}

#[test]
fn a_reply_cut_at_the_token_limit_is_never_the_answer() {
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(
        MockScript::new()
            .then(reply_with_finish("The total is\nFINAL(forty)", "length"))
            .then(MockReply::text("FINAL(42)")),
    )
    .unwrap();
    let output = run(&sb, &mock);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "42");
    let asked = last_user_messages(&mock);
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(
        asked[1].contains("cut off at the output-token limit") && asked[1].contains("shorter"),
        "{}",
        asked[1]
    );
}

#[test]
fn an_unclosed_final_is_not_the_answer_and_the_model_is_told() {
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(
        MockScript::new()
            .then(reply_with_finish("FINAL(the answer is four", "stop"))
            .then(MockReply::text("FINAL(42)")),
    )
    .unwrap();
    let output = run(&sb, &mock);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "42");
    let asked = last_user_messages(&mock);
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[1].contains("FINAL( was never closed"), "{}", asked[1]);
}

//! Faults of the model server, end to end through `run`: a body that is not JSON, a
//! stream whose events are not, a stream that never ends, a connection reset. Each ends
//! in a clear error (or a retry that succeeds), in bounded time, and what the store
//! held before is intact.

use std::process::Output;

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockScript, StreamCut};

use crate::support::Sandbox;

fn mock(script: MockScript) -> MockLlmThread {
    MockLlm::spawn_blocking_thread(script).unwrap()
}

/// `run "a task" --context …` against `mock`, with `extra` flags.
fn run(sb: &Sandbox, mock: &MockLlmThread, extra: &[&str]) -> Output {
    let context = sb.file("context.txt", "the context\n");
    let mut command = sb.bare();
    command
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "a task", "--model", "mock", "--base-url"])
        .arg(mock.control().openai_base_url())
        .arg("--context")
        .arg(&context)
        .args(extra);
    command.output().unwrap()
}

/// Stores a variable the faults must not touch; returns its sha256.
fn keep_something(sb: &Sandbox) -> String {
    sb.set(&["kept", "stored before the run"]);
    sb.sha("kept")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn assert_kept(sb: &Sandbox, sha: &str) {
    assert_eq!(sb.sha("kept"), sha);
    assert_eq!(sb.get("kept"), b"stored before the run");
}

#[test]
fn a_body_that_is_not_json_is_a_clear_error() {
    let sb = Sandbox::new();
    let sha = keep_something(&sb);
    let mock = mock(MockScript::always(MockReply::raw(
        "application/json",
        "{\"choices\": [ oops",
    )));
    let output = run(&sb, &mock, &["--no-stream", "--retries", "1"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("not JSON") || err.contains("JSON"), "{err}");
    assert!(
        err.contains("oops"),
        "the message quotes what was sent: {err}"
    );
    assert_kept(&sb, &sha);
}

#[test]
fn a_stream_event_that_is_not_json_is_a_clear_error() {
    let sb = Sandbox::new();
    let sha = keep_something(&sb);
    let mock = mock(MockScript::always(MockReply::raw(
        "text/event-stream",
        "data: {\"choices\": [ oops\n\ndata: [DONE]\n\n",
    )));
    let output = run(&sb, &mock, &["--retries", "1"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("is not JSON"), "{err}");
    assert!(err.contains("oops"), "{err}");
    assert_kept(&sb, &sha);
}

#[test]
fn a_stream_that_never_ends_times_out_with_a_clear_error() {
    let sb = Sandbox::new();
    let sha = keep_something(&sb);
    let mock = mock(MockScript::always(
        MockReply::text("FINAL(never finished)").cut(StreamCut::Stall(1)),
    ));
    let output = run(&sb, &mock, &["--request-timeout", "1", "--retries", "0"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("1 s"), "the message names the timeout: {err}");
    assert!(
        err.contains("--request-timeout"),
        "and the flag to raise it: {err}"
    );
    assert_kept(&sb, &sha);
}

#[test]
fn a_reset_connection_is_retried() {
    let sb = Sandbox::new();
    let sha = keep_something(&sb);
    let mock = mock(MockScript::replies([
        MockReply::reset(),
        MockReply::text("FINAL(after the reset)"),
    ]));
    let output = run(&sb, &mock, &["--retries", "2"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "after the reset"
    );
    assert_eq!(mock.control().request_count(), 2);
    assert_kept(&sb, &sha);
}

#[test]
fn connections_reset_on_every_attempt_are_a_clear_error() {
    let sb = Sandbox::new();
    let sha = keep_something(&sb);
    let mock = mock(MockScript::always(MockReply::reset()));
    let output = run(&sb, &mock, &["--retries", "1"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert_eq!(mock.control().request_count(), 2, "one retry: {err}");
    assert!(
        err.contains("accepted the connection but closed it before answering"),
        "{err}"
    );
    assert!(!err.contains("--base-url"), "the server was reached: {err}");
    assert_kept(&sb, &sha);
}

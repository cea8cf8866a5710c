//! A runaway model server, end to end through `run`: a stream of endless 4 KiB
//! deltas ends at `--max-reply-bytes` with the process's memory bounded, a stream
//! that drips a byte a second ends at `--request-timeout`, and one that drips past
//! the run's `--max-time` ends there — each with an error naming the endpoint, the
//! bound and the flag, and the run's trace kept.

use std::io::Read as _;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockScript};
use serde_json::Value;

use crate::support::{Sandbox, BIN};

/// Far above what a bounded run takes (tens of MiB), far below what a runaway
/// reaches: the build before the bound grew past 690 MiB in 40 s and went on.
const RSS_BOUND_KIB: u64 = 512 * 1024;

/// The longest a sampling loop watches a run (it ends in seconds when bounded).
const WATCH_LIMIT: Duration = Duration::from_secs(90);

/// `run` against `mock`, with `extra` flags, as a child whose memory can be watched.
fn spawn_run(sb: &Sandbox, mock: &MockLlmThread, extra: &[&str]) -> Child {
    Command::new(BIN)
        .current_dir(sb.root())
        .env_remove("RLM_DATA_DIR")
        .env_remove("RUST_LOG")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "say something", "--model", "mock", "--env", "tools"])
        .args(["--base-url", &mock.control().openai_base_url()])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The peak resident memory of `pid` so far (`VmHWM`), in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Waits for `child`, sampling its peak memory; kills it (and fails) past the bound.
/// Returns its exit code, stderr and the highest peak seen.
fn watch(mut child: Child) -> (Option<i32>, String, u64) {
    let pid = child.id();
    let started = std::time::Instant::now();
    let mut peak = 0;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        peak = peak.max(peak_rss_kib(pid).unwrap_or(0));
        if peak > RSS_BOUND_KIB || started.elapsed() > WATCH_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the run grew to {peak} KiB (bound {RSS_BOUND_KIB}) or ran past {WATCH_LIMIT:?}"
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    (status.code(), stderr, peak)
}

/// The events of the only run in the data directory.
fn events(sb: &Sandbox) -> Vec<Value> {
    let runs = sb.data_dir().join("runs");
    let run = std::fs::read_dir(&runs).unwrap().next().unwrap().unwrap();
    std::fs::read_to_string(run.path().join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The trace says the run failed, with `needle` in its error.
fn assert_trace_kept(sb: &Sandbox, needle: &str) {
    let events = events(sb);
    let finished = events
        .iter()
        .find(|e| e["kind"] == "run_finished")
        .unwrap_or_else(|| panic!("no run_finished in {events:?}"));
    assert_eq!(finished["status"], "failed", "{finished}");
    let text = serde_json::to_string(&events).unwrap();
    assert!(
        text.contains(needle),
        "{needle} not in the trace: {text:.2000}"
    );
}

#[test]
fn an_endless_stream_ends_at_the_reply_bound_with_memory_bounded() {
    let sb = Sandbox::new();
    let mock =
        MockLlm::spawn_blocking_thread(MockScript::always(MockReply::endless(4096))).unwrap();
    let (code, stderr, peak) = watch(spawn_run(&sb, &mock, &[]));
    assert_eq!(code, Some(1), "{stderr}");
    // The endpoint, the bound (the default 16 MiB) and the flag.
    assert!(
        stderr.contains(&mock.control().openai_base_url())
            && stderr.contains("16777216 bytes")
            && stderr.contains("--max-reply-bytes"),
        "{stderr}"
    );
    assert!(peak < RSS_BOUND_KIB, "{peak} KiB");
    // Not asked again: another attempt would run away the same.
    assert_eq!(mock.control().request_count(), 1, "{stderr}");
    assert_trace_kept(&sb, "--max-reply-bytes");
}

#[test]
fn the_reply_bound_is_a_flag_an_environment_variable_and_a_setting() {
    let sb = Sandbox::new();
    let mock =
        MockLlm::spawn_blocking_thread(MockScript::always(MockReply::endless(4096))).unwrap();
    // A whole (unstreamed) body that never closes is bounded the same.
    let (code, stderr, _) = watch(spawn_run(
        &sb,
        &mock,
        &["--no-stream", "--max-reply-bytes", "100000"],
    ));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("100000 bytes"), "{stderr}");
    let env = spawn_run_with_env(&sb, &mock, ("RLM_MAX_REPLY_BYTES", "200000"));
    let (code, stderr, _) = watch(env);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("200000 bytes"), "{stderr}");
    sb.file("rlm.toml", "max_reply_bytes = 300000\n");
    let (code, stderr, _) = watch(spawn_run(&sb, &mock, &[]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("300000 bytes"), "{stderr}");
}

/// [`spawn_run`] with one more environment variable.
fn spawn_run_with_env(sb: &Sandbox, mock: &MockLlmThread, var: (&str, &str)) -> Child {
    Command::new(BIN)
        .current_dir(sb.root())
        .env_remove("RLM_DATA_DIR")
        .env_remove("RUST_LOG")
        .env(var.0, var.1)
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "say something", "--model", "mock", "--env", "tools"])
        .args(["--base-url", &mock.control().openai_base_url()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A stream that sends one byte a second, for ever.
fn slow_drip() -> MockScript {
    MockScript::always(MockReply::endless(16).chunked(1, Duration::from_secs(1)))
}

#[test]
fn a_slow_drip_ends_at_the_request_timeout() {
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(slow_drip()).unwrap();
    let (code, stderr, _) = watch(spawn_run(
        &sb,
        &mock,
        &["--request-timeout", "3", "--retries", "0"],
    ));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&mock.control().openai_base_url())
            && stderr.contains("within 3 s")
            && stderr.contains("--request-timeout"),
        "{stderr}"
    );
    assert_trace_kept(&sb, "--request-timeout");
}

#[test]
fn a_slow_drip_ends_at_the_runs_deadline() {
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(slow_drip()).unwrap();
    // The request timeout is far away: the run's own deadline ends the stream.
    let (code, stderr, _) = watch(spawn_run(
        &sb,
        &mock,
        &[
            "--max-time",
            "3",
            "--request-timeout",
            "60",
            "--retries",
            "0",
        ],
    ));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&mock.control().openai_base_url()) && stderr.contains("--max-time 3 s"),
        "{stderr}"
    );
    assert_trace_kept(&sb, "--max-time 3 s");
}

//! What the test modules share: a shell child, reading the pids its script wrote,
//! asserting that processes are gone, and running one test alone in a fresh copy of
//! this test binary.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rlm_process::SpawnOptions;
use rlm_test_support::procs;

/// Upper bound of every poll (only reached when a test fails).
pub const POLL_LIMIT: Duration = Duration::from_secs(20);

/// Pause between two looks of a poll.
pub const POLL_STEP: Duration = Duration::from_millis(10);

/// Names the one `#[test]` a copy of this binary started by [`run_alone`] runs.
const ALONE_ENV: &str = "RLM_PROCESS_IT_ALONE";

/// `sh -c script` with only `PATH` in its environment.
pub fn sh(script: &str) -> SpawnOptions {
    SpawnOptions::new("sh")
        .arg("-c")
        .arg(script)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
}

/// Waits until `path` holds at least `count` lines and returns them as pids.
pub async fn read_pids(path: &Path, count: usize) -> Vec<u32> {
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let pids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        if pids.len() >= count && text.ends_with('\n') {
            return pids;
        }
        assert!(
            start.elapsed() < POLL_LIMIT,
            "{} never got {count} pids",
            path.display()
        );
        tokio::time::sleep(POLL_STEP).await;
    }
}

/// Fails unless every one of `pids` ends (or is a zombie) within [`POLL_LIMIT`].
pub async fn assert_gone(pids: &[u32]) {
    let left = procs::wait_all_gone_async(pids, POLL_LIMIT).await;
    assert!(left.is_empty(), "still running: {left:?}");
}

/// Fails unless the process group `pgid` has no running member within [`POLL_LIMIT`].
pub async fn assert_group_empty(pgid: u32) {
    let start = Instant::now();
    loop {
        let members = procs::group_members(pgid);
        if members.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < POLL_LIMIT,
            "group {pgid} still has {members:?}"
        );
        tokio::time::sleep(POLL_STEP).await;
    }
}

/// True in the copy of this binary that [`run_alone`] started for `test` (its path
/// in this binary, e.g. `kill_all::every_group_is_reached_at_once`). A test that must
/// be alone in its process returns at once when this is false.
pub fn alone(test: &str) -> bool {
    std::env::var_os(ALONE_ENV).is_some_and(|name| name == test)
}

/// Runs the `#[test]` `test` in a new copy of this test binary, where it is the only
/// test, and fails if it fails. For tests that signal every child group of their
/// process: under `cargo test` they would otherwise hit the children of tests running
/// beside them on other threads.
pub fn run_alone(test: &str) {
    let exe = std::env::current_exe()
        .unwrap_or_else(|error| panic!("cannot find this test binary: {error}"));
    let output = Command::new(&exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ALONE_ENV, test)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", exe.display()));
    assert!(
        output.status.success(),
        "{test} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // A filter that matched nothing would also succeed.
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("1 passed"), "{test} did not run:\n{stdout}");
}

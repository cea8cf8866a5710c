//! `kill_all_groups` and `terminate_all_groups` signal every child group of the
//! process, so their test runs alone in a copy of this test binary
//! ([`support::run_alone`]), one step after the other: under `cargo test` they would
//! otherwise hit the children of tests running beside them.

use std::path::Path;
use std::time::Duration;

use rlm_process::{
    kill_all_groups, live_groups, run_supervised, terminate_all_groups, Signal, SpawnError,
    SuperviseOptions, Supervised, Termination,
};
use tokio::task::JoinHandle;

use crate::support::{self, sh, POLL_LIMIT, POLL_STEP};

/// This module's test that must be alone in its process, as named by libtest.
const ALONE_TEST: &str = "kill_all::every_group_is_reached_at_once";

type Run = JoinHandle<Result<Supervised, SpawnError>>;

/// Starts `script` supervised; it must write its pid to `$PID_FILE` once ready.
async fn start(dir: &Path, name: &str, script: &str) -> (u32, Run) {
    let pid_file = dir.join(name);
    let spawn = sh(script).env("PID_FILE", &pid_file);
    let run = tokio::spawn(run_supervised(spawn, SuperviseOptions::default()));
    let start = std::time::Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(&pid_file) {
            if let Ok(pid) = text.trim().parse() {
                return (pid, run);
            }
        }
        assert!(start.elapsed() < POLL_LIMIT, "{name} never started");
        tokio::time::sleep(POLL_STEP).await;
    }
}

const READY: &str = r#"echo $$ > "$PID_FILE.tmp" && mv "$PID_FILE.tmp" "$PID_FILE""#;

#[test]
fn kill_all_and_terminate_all_reach_every_group() {
    support::run_alone(ALONE_TEST);
}

/// Runs only in the process [`kill_all_and_terminate_all_reach_every_group`] starts.
#[tokio::test]
async fn every_group_is_reached_at_once() {
    if !support::alone(ALONE_TEST) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();

    // kill_all_groups: one signal to every supervised child.
    let mut runs = Vec::new();
    for i in 0..3 {
        runs.push(
            start(
                dir.path(),
                &format!("a{i}"),
                &format!("{READY}; exec sleep 1000"),
            )
            .await,
        );
    }
    let live = live_groups();
    assert!(runs.iter().all(|(pid, _)| live.contains(pid)), "{live:?}");
    assert!(kill_all_groups(Signal::SIGTERM) >= 3);
    let mut pids = Vec::new();
    for (pid, run) in runs {
        let result = run.await.unwrap().unwrap();
        assert_eq!(
            result.termination,
            Termination::Signaled(Signal::SIGTERM as i32)
        );
        pids.push(pid);
    }
    let live = live_groups();
    assert!(
        pids.iter().all(|p| !live.contains(p)),
        "{pids:?} still in {live:?}"
    );

    // terminate_all_groups: SIGTERM, grace, SIGKILL for those that ignore it.
    let (_, polite) = start(dir.path(), "b0", &format!("{READY}; exec sleep 1000")).await;
    let (_, stubborn) = start(
        dir.path(),
        "b1",
        &format!("trap '' TERM; {READY}; while :; do sleep 1; done"),
    )
    .await;
    assert!(!terminate_all_groups(Duration::from_millis(300)).await);
    let polite = polite.await.unwrap().unwrap();
    assert_eq!(
        polite.termination,
        Termination::Signaled(Signal::SIGTERM as i32)
    );
    let stubborn = stubborn.await.unwrap().unwrap();
    assert_eq!(
        stubborn.termination,
        Termination::Signaled(Signal::SIGKILL as i32)
    );
    assert!(
        terminate_all_groups(Duration::from_millis(300)).await,
        "nothing left"
    );
}

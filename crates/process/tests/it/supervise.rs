//! `run_supervised`: what a child's run reports (exit, output, stderr tail), what it
//! is given (environment, stdin, program lookup), and that every way a run ends —
//! exit, timeout, cancellation, drop — leaves none of its processes behind, including
//! background jobs and `setsid` escapees.

use std::time::Duration;

use rlm_process::{
    run_supervised, CancellationToken, SpawnOptions, SuperviseOptions, Termination,
    SUPERVISION_COOKIE_ENV,
};
use rlm_test_support::procs::running;

use crate::support::{assert_gone, assert_group_empty, read_pids, sh};

#[tokio::test]
async fn exit_code_stdout_and_stderr_tail_are_reported() {
    let result = run_supervised(
        sh("echo out; echo err >&2; exit 3"),
        SuperviseOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(result.termination, Termination::Exited(3));
    assert_eq!(result.stdout, b"out\n");
    assert!(!result.stdout_truncated);
    assert_eq!(result.stdout_total_bytes, 4);
    assert_eq!(result.stderr_tail, "err\n");
    assert!(!result.forced_kill);
    assert_eq!(result.termination.to_string(), "exited with code 3");
}

#[tokio::test]
async fn the_environment_is_exactly_what_was_given() {
    std::env::set_var("RLM_TEST_SECRET_API_KEY", "sk-should-not-leak");
    let result = run_supervised(
        SpawnOptions::new("/usr/bin/env").env("ONLY_THIS", "1"),
        SuperviseOptions::default(),
    )
    .await
    .unwrap();
    let stdout = String::from_utf8(result.stdout).unwrap();
    let mut names: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["ONLY_THIS", SUPERVISION_COOKIE_ENV]);
    assert!(!stdout.contains("sk-should-not-leak"));
}

#[tokio::test]
async fn stdin_is_fed_then_closed_and_null_otherwise() {
    let options = SuperviseOptions {
        stdin: Some(b"hello from stdin".to_vec()),
        ..SuperviseOptions::default()
    };
    let fed = run_supervised(sh("cat"), options).await.unwrap();
    assert_eq!(fed.stdout, b"hello from stdin");
    let null = run_supervised(sh("cat; echo end"), SuperviseOptions::default())
        .await
        .unwrap();
    assert_eq!(null.stdout, b"end\n");
    // A child that never reads a large stdin still finishes (EPIPE is ignored).
    let ignored = SuperviseOptions {
        stdin: Some(vec![b'x'; 4 << 20]),
        ..SuperviseOptions::default()
    };
    let result = run_supervised(sh("exit 0"), ignored).await.unwrap();
    assert_eq!(result.termination, Termination::Exited(0));
}

#[tokio::test]
async fn stdout_keeps_the_head_and_counts_the_rest() {
    let options = SuperviseOptions {
        stdout_cap: 1000,
        stderr_tail: 10,
        ..SuperviseOptions::default()
    };
    let result = run_supervised(
        sh("head -c 5000000 /dev/zero; printf '0123456789abcdef' >&2"),
        options,
    )
    .await
    .unwrap();
    assert_eq!(result.stdout.len(), 1000);
    assert!(result.stdout_truncated);
    assert_eq!(result.stdout_total_bytes, 5_000_000);
    assert!(result.stderr_tail.ends_with("6789abcdef"));
    assert!(result.stderr_tail.contains("6 earlier bytes not kept"));
}

#[tokio::test]
async fn a_timeout_ends_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script = format!(
        "sleep 1000 & echo $! >> '{p}'; echo $$ >> '{p}'; wait",
        p = pids.display()
    );
    let options = SuperviseOptions {
        timeout: Some(Duration::from_millis(300)),
        grace: Duration::from_secs(5),
        ..SuperviseOptions::default()
    };
    let result = run_supervised(sh(&script), options).await.unwrap();
    assert_eq!(result.termination, Termination::TimedOut);
    assert!(!result.forced_kill, "sh and sleep die of SIGTERM");
    let pids = read_pids(&pids, 2).await;
    assert_gone(&pids).await;
    // The shell (the last pid written) led the group: nothing is left in it.
    assert_group_empty(pids[1]).await;
}

#[tokio::test]
async fn cancellation_ends_grandchildren_that_left_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    // A background job in the group, a `setsid` escapee whose parent lives, and a
    // double-forked daemon whose parent is gone (re-parented away from us).
    let script = format!(
        "sleep 1000 & echo $! >> '{p}'
         setsid sleep 1000 & echo $! >> '{p}'
         sh -c 'setsid sleep 1000 & echo $! >> \"{p}\"'
         echo $$ >> '{p}'
         wait",
        p = pids.display()
    );
    let token = CancellationToken::new();
    let options = SuperviseOptions {
        cancel: Some(token.clone()),
        ..SuperviseOptions::default()
    };
    let run = tokio::spawn(run_supervised(sh(&script), options));
    let pids = read_pids(&pids, 4).await;
    assert!(pids.iter().all(|&p| running(p)));
    token.cancel();
    let result = run.await.unwrap().unwrap();
    assert_eq!(result.termination, Termination::Cancelled);
    assert_gone(&pids).await;
}

#[tokio::test]
async fn sigterm_ignorers_get_sigkill_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script = format!(
        "trap '' TERM; sleep 1000 & echo $! >> '{p}'; echo $$ >> '{p}'; wait",
        p = pids.display()
    );
    let token = CancellationToken::new();
    let options = SuperviseOptions {
        cancel: Some(token.clone()),
        grace: Duration::from_millis(200),
        ..SuperviseOptions::default()
    };
    let run = tokio::spawn(run_supervised(sh(&script), options));
    let pids = read_pids(&pids, 2).await;
    token.cancel();
    let result = run.await.unwrap().unwrap();
    assert_eq!(result.termination, Termination::Cancelled);
    assert!(result.forced_kill);
    assert_gone(&pids).await;
}

#[tokio::test]
async fn after_exit_the_pipes_are_drained_then_leftovers_are_ended() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    // The background sleep keeps stdout open after the leader exits.
    let script = format!(
        "sleep 1000 & echo $! >> '{p}'; echo done",
        p = pids.display()
    );
    let options = SuperviseOptions {
        drain_timeout: Duration::from_millis(200),
        ..SuperviseOptions::default()
    };
    let result = run_supervised(sh(&script), options).await.unwrap();
    assert_eq!(result.termination, Termination::Exited(0));
    assert_eq!(result.stdout, b"done\n");
    assert_gone(&read_pids(&pids, 1).await).await;
}

#[tokio::test]
async fn an_unexpected_signal_is_reported_as_such() {
    let result = run_supervised(sh("kill -9 $$"), SuperviseOptions::default())
        .await
        .unwrap();
    assert_eq!(result.termination, Termination::Signaled(9));
    assert!(result.termination.to_string().contains("SIGKILL"));
}

#[tokio::test]
async fn dropping_the_future_kills_everything() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script = format!(
        "sleep 1000 & echo $! >> '{p}'; setsid sleep 1000 & echo $! >> '{p}'; echo $$ >> '{p}'; wait",
        p = pids.display()
    );
    let run = tokio::spawn(run_supervised(sh(&script), SuperviseOptions::default()));
    let pids = read_pids(&pids, 3).await;
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    assert_gone(&pids).await;
}

#[tokio::test]
async fn a_missing_program_is_a_spawn_error_naming_it() {
    let error = run_supervised(
        SpawnOptions::new("/nonexistent/rlm-no-such-agent"),
        SuperviseOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("rlm-no-such-agent"), "{error}");
}

#[tokio::test]
async fn nested_supervision_chains_cookies() {
    // A supervised child sees its own cookie; a child it supervises would inherit it
    // (the chain is built from the supervisor's own environment).
    let result = run_supervised(
        sh(&format!("printf %s \"${SUPERVISION_COOKIE_ENV}\"")),
        SuperviseOptions::default(),
    )
    .await
    .unwrap();
    let chain = String::from_utf8(result.stdout).unwrap();
    let own = chain.rsplit(':').next().unwrap();
    let (pid, counter) = own.split_once('.').unwrap();
    assert_eq!(pid, std::process::id().to_string());
    assert!(counter.parse::<u64>().is_ok());
}

#[tokio::test]
async fn escapees_that_closed_their_pipes_are_ended_after_a_normal_exit() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    // Nothing holds the pipes and the group is empty when the leader exits: only the
    // cookie tells that these two still belong to the child.
    let script = format!(
        "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! >> '{p}'
         sh -c 'setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! >> \"{p}\"'
         echo done",
        p = pids.display()
    );
    let result = run_supervised(sh(&script), SuperviseOptions::default())
        .await
        .unwrap();
    assert_eq!(result.termination, Termination::Exited(0));
    assert_eq!(result.stdout, b"done\n");
    assert_gone(&read_pids(&pids, 2).await).await;
}

#[tokio::test]
async fn the_program_is_looked_up_in_the_childs_path_from_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("bin")).unwrap();
    let tool = dir.path().join("bin").join("rlm-test-tool");
    std::fs::write(&tool, "#!/bin/sh\necho \"tool in $(pwd)\"\n").unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("bin:{}", std::env::var("PATH").unwrap_or_default());
    let result = run_supervised(
        SpawnOptions::new("rlm-test-tool")
            .env("PATH", path)
            .cwd(dir.path()),
        SuperviseOptions::default(),
    )
    .await
    .unwrap();
    let expected = format!("tool in {}\n", dir.path().canonicalize().unwrap().display());
    assert_eq!(String::from_utf8(result.stdout).unwrap(), expected);
}

#[tokio::test]
async fn a_script_without_a_shebang_runs_with_sh() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("plain");
    std::fs::write(&script, "echo plain \"$1\"\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let result = run_supervised(
        SpawnOptions::new(&script).arg("arg"),
        SuperviseOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(result.termination, Termination::Exited(0));
    assert_eq!(result.stdout, b"plain arg\n");
}

#[tokio::test]
async fn a_program_that_is_not_executable_is_a_spawn_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rlm-not-executable"), "echo no\n").unwrap();
    let error = run_supervised(
        SpawnOptions::new("rlm-not-executable").env("PATH", dir.path()),
        SuperviseOptions::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(error.source.kind(), std::io::ErrorKind::PermissionDenied);
    let missing = run_supervised(
        SpawnOptions::new("rlm-no-such-agent").env("PATH", dir.path()),
        SuperviseOptions::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(missing.source.kind(), std::io::ErrorKind::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_children_in_parallel_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let runs: Vec<_> = (0..32)
        .map(|i| {
            // Every fourth child leaves an escapee behind; the others exit cleanly.
            let script = if i % 4 == 0 {
                format!(
                    "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! >> '{p}'; echo {i}",
                    p = pids.display()
                )
            } else {
                format!("echo {i}")
            };
            tokio::spawn(run_supervised(sh(&script), SuperviseOptions::default()))
        })
        .collect();
    for (i, run) in runs.into_iter().enumerate() {
        let result = run.await.unwrap().unwrap();
        assert_eq!(result.stdout, format!("{i}\n").as_bytes());
    }
    assert_gone(&read_pids(&pids, 8).await).await;
}

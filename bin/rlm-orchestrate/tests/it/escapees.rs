//! Descendants that leave the run's process groups *and* clear their environment
//! (so carry no supervision cookie) do not outlive the run: the run's processes are
//! kept in a cgroup of their own, emptied when the run ends, is stopped, or is
//! `kill -9`ed (by its watchdog).
//!
//! Issue 22, item 3: two of four such daemons used to be reparented to PID 1 and live on.

use std::path::{Path, PathBuf};

use nix::sys::signal::Signal;

use crate::grace::{alive, pids_in, AgentRun};
use crate::support::Sandbox;

/// How many daemons [`escaping_agent`] starts.
const DAEMONS: usize = 4;

/// An agent that starts [`DAEMONS`] daemons with a cleared environment, out of its
/// process group (`setsid`) or by a double fork, writes their pids to `pids`, then
/// exits (or, with `hang`, waits forever).
fn escaping_agent(sb: &Sandbox, pids: &Path, hang: bool) -> PathBuf {
    let p = pids.display();
    let end = if hang {
        "sleep 300\n"
    } else {
        "echo started\n"
    };
    sb.file(
        "escape.sh",
        format!(
            "env -i /usr/bin/setsid /bin/sh -c 'echo $$ >> {p}; exec /bin/sleep 300' &\n\
             env -i /usr/bin/setsid /bin/sh -c '( /bin/sleep 300 & echo $! >> {p} ) &' &\n\
             ( ( env -i /bin/sleep 300 & echo $! >> {p} ) & )\n\
             env -i /bin/sh -c '( ( /usr/bin/setsid /bin/sleep 300 & echo $! >> {p} ) & )' &\n\
             while [ \"$(wc -l < {p} 2>/dev/null || echo 0)\" -lt {DAEMONS} ]; do sleep 0.01; done\n\
             {end}"
        ),
    )
}

fn assert_all_gone(pids: &[i32]) {
    let left: Vec<_> = pids.iter().copied().filter(|&pid| alive(pid)).collect();
    for pid in &left {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), Signal::SIGKILL);
    }
    assert!(left.is_empty(), "daemons outlived the run: {left:?}");
}

#[test]
fn daemons_with_a_cleared_environment_do_not_outlive_the_run() {
    let sb = Sandbox::new();
    let pids = sb.root().join("pids");
    let agent = escaping_agent(&sb, &pids, false);
    let mut run = AgentRun::start(&sb, &agent, &[]);
    assert_eq!(run.exit_code(), Some(0), "{:?}", run.rest_of_stderr());
    assert_all_gone(&pids_in(&pids, DAEMONS));
}

#[test]
fn daemons_with_a_cleared_environment_do_not_outlive_a_ctrl_c() {
    let sb = Sandbox::new();
    let pids = sb.root().join("pids");
    let agent = escaping_agent(&sb, &pids, true);
    let mut run = AgentRun::start(&sb, &agent, &[]);
    let found = pids_in(&pids, DAEMONS);
    run.signal(Signal::SIGINT);
    assert_eq!(run.exit_code(), Some(130), "{:?}", run.rest_of_stderr());
    assert_all_gone(&found);
}

#[test]
fn daemons_with_a_cleared_environment_do_not_outlive_a_kill_9_of_the_run() {
    let sb = Sandbox::new();
    let pids = sb.root().join("pids");
    let agent = escaping_agent(&sb, &pids, true);
    let mut run = AgentRun::start(&sb, &agent, &[]);
    let found = pids_in(&pids, DAEMONS);
    run.signal(Signal::SIGKILL);
    assert_eq!(run.exit_code(), None);
    // The watchdog ends them once it sees the run gone.
    let mut left = found.clone();
    for _ in 0..1500 {
        left.retain(|&pid| alive(pid));
        if left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_all_gone(&left);
}

/// The cgroup v2 mount point, from `/proc/self/mountinfo`.
fn cgroup2_mount() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|line| {
        let (fields, rest) = line.split_once(" - ")?;
        (rest.split_whitespace().next()? == "cgroup2")
            .then(|| fields.split_whitespace().nth(4).map(PathBuf::from))?
    })
}

/// Issue 49: where cgroup v2 is read-only, the run says once (not once per process of
/// its tree) that escaped daemons cannot be caught; it used to say nothing.
#[test]
#[allow(clippy::print_stderr, reason = "a skipped test says so")]
fn a_read_only_cgroup_hierarchy_is_warned_about_once() {
    let Some(mount) = cgroup2_mount() else {
        eprintln!("SKIPPED: no cgroup v2 here");
        return;
    };
    let private_mounts = std::process::Command::new("unshare")
        .args(["-m", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !private_mounts {
        eprintln!("SKIPPED: no private mount namespace here");
        return;
    }
    let sb = Sandbox::new();
    // The root run starts a nested run: two processes that each start a watchdog.
    let mock = rlm_test_support::mock_llm::MockLlm::spawn_blocking_thread(
        rlm_test_support::mock_llm::MockScript::replies([
            rlm_test_support::mock_llm::MockReply::text("```repl\nprint(sub_rlm('x'))\n```"),
            rlm_test_support::mock_llm::MockReply::text("FINAL(child)"),
            rlm_test_support::mock_llm::MockReply::text("FINAL(child)"),
        ]),
    )
    .unwrap();
    // A read-only view of the hierarchy in a mount namespace of the run's own.
    let script =
        "mount --bind \"$1\" \"$1\" && mount -o remount,bind,ro \"$1\" && shift && exec \"$@\"";
    let out = std::process::Command::new("unshare")
        .current_dir(sb.root())
        .env_remove("OPENAI_API_KEY")
        .env_remove("RLM_SANDBOX")
        .env_remove("RUST_LOG")
        .args(["-m", "sh", "-c", script, "sh"])
        .arg(&mount)
        .arg(crate::support::BIN)
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args([
            "run",
            "nest",
            "--model",
            "mock",
            "--max-depth",
            "2",
            "--base-url",
        ])
        .arg(mock.control().openai_base_url())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "child\n");
    let warned = stderr.matches("cannot be caught when it ends").count();
    assert_eq!(warned, 1, "{stderr}");
    assert!(stderr.contains("read-only"), "{stderr}");
}

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

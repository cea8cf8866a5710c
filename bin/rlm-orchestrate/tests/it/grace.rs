//! The first Ctrl-C (or SIGTERM) gives sub-agents the grace period it promises:
//! SIGTERM, up to the grace, then SIGKILL; a second Ctrl-C kills them at once.
//!
//! Issue 22, item 10: the agents' groups used to be killed 20–40 ms after SIGTERM,
//! because cancelling the run dropped the futures supervising them.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use nix::sys::signal::Signal;
use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockScript};

use crate::support::{Sandbox, BIN};

/// A run of `rlm-orchestrate` whose model spawns one agent running `agent` (a shell
/// script), with its stderr read line by line on a thread.
pub(crate) struct AgentRun {
    pub(crate) child: Child,
    stderr: mpsc::Receiver<String>,
    _mock: MockLlmThread,
}

impl AgentRun {
    pub(crate) fn start(sb: &Sandbox, agent: &Path, extra: &[&str]) -> Self {
        let script = MockScript::new()
            .then(MockReply::text(
                "```repl\nr = spawn_agent('work', [])\nprint(r)\n```",
            ))
            .or_else(MockReply::text("FINAL(done)"));
        let mock = MockLlm::spawn_blocking_thread(script).unwrap();
        let agent_cmd = format!("sh {}", agent.display());
        let mut child = Command::new(BIN)
            .current_dir(sb.root())
            .env_remove("OPENAI_API_KEY")
            .env_remove("RUST_LOG")
            .arg("--data-dir")
            .arg(sb.data_dir())
            .args([
                "-q",
                "run",
                "run the agent",
                "--base-url",
                &mock.control().openai_base_url(),
                "--model",
                "m",
                "--agent-cmd",
                &agent_cmd,
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (lines, stderr) = mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stderr,
            _mock: mock,
        }
    }

    pub(crate) fn signal(&self, signal: Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), signal).unwrap();
    }

    /// Waits (bounded) for a stderr line containing `text`; returns the lines read.
    pub(crate) fn stderr_until(&self, text: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            match self.stderr.recv_timeout(LIMIT) {
                Ok(line) => {
                    let found = line.contains(text);
                    seen.push(line);
                    if found {
                        return seen;
                    }
                }
                Err(_) => panic!("no stderr line containing {text:?}; got {seen:?}"),
            }
        }
    }

    /// Waits (bounded) for the run to exit; returns its exit code.
    pub(crate) fn exit_code(&mut self) -> Option<i32> {
        let mut status = None;
        eventually("rlm-orchestrate exits", || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        status.unwrap().code()
    }

    /// The rest of stderr, once the run has exited.
    pub(crate) fn rest_of_stderr(&self) -> Vec<String> {
        let mut rest = Vec::new();
        while let Ok(line) = self.stderr.recv_timeout(LIMIT) {
            rest.push(line);
        }
        rest
    }
}

impl Drop for AgentRun {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Upper bound of each wait (only reached when a test fails).
const LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits (bounded) until `check` holds.
pub(crate) fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + LIMIT;
    while std::time::Instant::now() < deadline {
        if check() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("timed out waiting until {what}");
}

/// Whether `pid` is a live process (a zombie counts as gone: PID 1 may not reap).
pub(crate) fn alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    stat.rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().next())
        .is_some_and(|state| state != "Z" && state != "X")
}

/// The pids listed one a line in `path` (once it has `count` of them).
pub(crate) fn pids_in(path: &Path, count: usize) -> Vec<i32> {
    let mut pids = Vec::new();
    eventually(&format!("{} lists {count} pids", path.display()), || {
        pids = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        pids.len() >= count
    });
    pids
}

/// An agent that traps SIGTERM, cleans up for 0.5 s, then writes `marker`.
fn cleaning_agent(sb: &Sandbox, marker: &Path, started: &Path) -> PathBuf {
    sb.file(
        "clean.sh",
        format!(
            "trap 'sleep 0.5; echo cleaned > {marker}; exit 0' TERM\n\
             echo $$ > {started}\n\
             sleep 300 &\n\
             wait\n",
            marker = marker.display(),
            started = started.display(),
        ),
    )
}

#[test]
fn the_first_ctrl_c_gives_an_agent_its_grace_period_to_clean_up() {
    let sb = Sandbox::new();
    let (marker, started) = (sb.root().join("cleaned"), sb.root().join("started"));
    let agent = cleaning_agent(&sb, &marker, &started);
    let mut run = AgentRun::start(&sb, &agent, &[]);
    let agent_pid = pids_in(&started, 1)[0];
    run.signal(Signal::SIGINT);
    assert_eq!(run.exit_code(), Some(130), "{:?}", run.rest_of_stderr());
    assert!(
        marker.exists(),
        "the agent was killed before its 0.5 s clean-up ended (no grace period)"
    );
    assert!(!alive(agent_pid));
}

#[test]
fn sigterm_to_the_run_gives_an_agent_its_grace_period_too() {
    let sb = Sandbox::new();
    let (marker, started) = (sb.root().join("cleaned"), sb.root().join("started"));
    let agent = cleaning_agent(&sb, &marker, &started);
    let mut run = AgentRun::start(&sb, &agent, &[]);
    pids_in(&started, 1);
    run.signal(Signal::SIGTERM);
    assert_eq!(run.exit_code(), Some(130), "{:?}", run.rest_of_stderr());
    assert!(marker.exists(), "no grace period after SIGTERM");
}

#[test]
fn an_agent_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let sb = Sandbox::new();
    let pids = sb.root().join("pids");
    let agent = sb.file(
        "stubborn.sh",
        format!(
            "trap '' TERM\nsleep 300 & echo $! >> {p}\necho $$ >> {p}\nwait\n",
            p = pids.display()
        ),
    );
    let mut run = AgentRun::start(&sb, &agent, &[]);
    let pids = pids_in(&pids, 2);
    run.signal(Signal::SIGINT);
    assert_eq!(run.exit_code(), Some(130), "{:?}", run.rest_of_stderr());
    let left: Vec<_> = pids.into_iter().filter(|&pid| alive(pid)).collect();
    assert!(left.is_empty(), "survived the run: {left:?}");
}

#[test]
fn a_second_ctrl_c_kills_the_agents_at_once() {
    let sb = Sandbox::new();
    let (marker, started) = (sb.root().join("cleaned"), sb.root().join("started"));
    // Its clean-up would take far longer than the grace period.
    let agent = sb.file(
        "slow.sh",
        format!(
            "trap 'sleep 300; echo cleaned > {m}; exit 0' TERM\necho $$ > {s}\nsleep 300 &\nwait\n",
            m = marker.display(),
            s = started.display(),
        ),
    );
    let mut run = AgentRun::start(&sb, &agent, &[]);
    let agent_pid = pids_in(&started, 1)[0];
    run.signal(Signal::SIGINT);
    run.stderr_until("stopping");
    run.signal(Signal::SIGINT);
    assert_eq!(run.exit_code(), Some(130));
    let rest = run.rest_of_stderr();
    assert!(
        rest.iter().any(|l| l.contains("killed")),
        "the second Ctrl-C did not kill at once: {rest:?}"
    );
    assert!(!marker.exists());
    assert!(!alive(agent_pid));
}

//! `kill -9` of a run's watchdog and then of the run (issue 49, item 11): nothing of
//! the run is left to end its daemons, its cgroup and its kernel's temporary directory,
//! so `runs prune`, or the next run started on the same data directory, does.
//!
//! Before the fix all of them stayed, and nothing later looked for them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use predicates::prelude::*;
use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockScript};

use crate::grace::eventually;
use crate::support::{Sandbox, BIN};
use crate::watchdog_orders::{gone, watchdog_of};

/// What the run under test left: its processes, its cgroup, its kernel's temp dir.
struct Leftovers {
    sleeps: Vec<u32>,
    cookie: String,
    cgroup: Option<PathBuf>,
    temp_dir: PathBuf,
}

impl Leftovers {
    /// Ends and removes whatever is still there (after a failed assertion).
    fn clean(&self) {
        for &pid in &self.sleeps {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        if let Some(dir) = &self.cgroup {
            // Removable once the killed members are gone (bounded).
            for _ in 0..250 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        let _ = std::fs::remove_dir_all(&self.temp_dir);
    }

    fn assert_gone(&self, data_dir: &Path) {
        let alive: Vec<u32> = self.sleeps.iter().copied().filter(|&p| !gone(p)).collect();
        let cgroup = self.cgroup.as_ref().filter(|dir| dir.exists());
        let temp = self.temp_dir.exists();
        let record = data_dir
            .join("live")
            .join(format!("{}.json", self.cookie))
            .exists();
        if !alive.is_empty() || cgroup.is_some() || temp || record {
            self.clean();
        }
        assert!(alive.is_empty(), "daemons left: {alive:?}");
        assert!(cgroup.is_none(), "cgroup left: {cgroup:?}");
        assert!(!temp, "{} left", self.temp_dir.display());
        assert!(!record, "the live record of {} is left", self.cookie);
    }
}

/// Live processes whose command line is `sleep <mark>`.
fn marked_sleeps(mark: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmdline == format!("sleep\0{mark}\0").as_bytes() && !gone(pid) {
            found.push(pid);
        }
    }
    found
}

/// The `TMPDIR` `pid` was started with.
fn tmpdir_of(pid: u32) -> Option<PathBuf> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    environ
        .split(|&b| b == 0)
        .find_map(|var| var.strip_prefix(b"TMPDIR="))
        .map(|dir| PathBuf::from(String::from_utf8_lossy(dir).into_owned()))
}

/// Starts a run whose model code starts three sleeps that outlive a `kill -9` of the
/// run: one `setsid`, one `setsid` with a cleared environment, one the cell waits on.
fn start_run(sb: &Sandbox, mark: &str) -> (Child, MockLlmThread) {
    let code = format!(
        "```repl\nimport subprocess\nsubprocess.Popen(['setsid', 'sleep', '{mark}'])\nsubprocess.Popen(['env', '-i', 'setsid', 'sleep', '{mark}'])\nsubprocess.run(['sleep', '{mark}'])\n```"
    );
    let mock =
        MockLlm::spawn_blocking_thread(MockScript::replies([MockReply::text(code)])).unwrap();
    let run = Command::new(BIN)
        .current_dir(sb.root())
        .env_remove("OPENAI_API_KEY")
        .env_remove("RLM_SANDBOX")
        .env_remove("RUST_LOG")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args([
            "-q",
            "run",
            "start daemons",
            "--model",
            "mock",
            "--base-url",
        ])
        .arg(mock.control().openai_base_url())
        .args(["--exec-timeout", "300", "--sandbox", "auto"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (run, mock)
}

/// Starts the run, waits for its three sleeps, then `kill -9`s its watchdog and then
/// the run itself; returns what they left.
fn kill_watchdog_then_run(sb: &Sandbox, mark: &str) -> Leftovers {
    let (mut run, _mock) = start_run(sb, mark);
    let mut watchdog = None;
    let mut sleeps = Vec::new();
    eventually("the run starts its watchdog and three sleeps", || {
        watchdog = watchdog.clone().or_else(|| watchdog_of(run.id()));
        sleeps = marked_sleeps(mark);
        (watchdog.is_some() && sleeps.len() >= 3) || !matches!(run.try_wait(), Ok(None))
    });
    let kill = |pid: u32| {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
    };
    let (watchdog, cookie) =
        watchdog.unwrap_or_else(|| panic!("the run's watchdog was never seen"));
    let temp_dir = sleeps.iter().find_map(|&pid| {
        tmpdir_of(pid).filter(|dir| {
            dir.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("rlm-kernel-"))
        })
    });
    let cgroup = std::fs::read(format!("/proc/{watchdog}/cmdline"))
        .ok()
        .and_then(|cmdline| {
            let argv: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            argv.get(3)
                .filter(|arg| !arg.is_empty())
                .map(|arg| PathBuf::from(String::from_utf8_lossy(arg).into_owned()))
        });
    kill(watchdog);
    eventually("the watchdog dies", || gone(watchdog));
    kill(run.id());
    let _ = run.wait();
    let left = Leftovers {
        sleeps: sleeps.clone(),
        cookie,
        cgroup,
        temp_dir: temp_dir.clone().unwrap_or_default(),
    };
    assert_eq!(
        sleeps.len(),
        3,
        "the run did not start as scripted: {sleeps:?}"
    );
    let Some(temp_dir) = temp_dir else {
        left.clean();
        panic!("no sleep had the kernel's temporary directory as its TMPDIR");
    };
    // What the fix is about: all of it is still there.
    assert!(sleeps.iter().all(|&pid| !gone(pid)), "{sleeps:?}");
    assert!(temp_dir.exists(), "{}", temp_dir.display());
    left
}

/// The sandbox's temporary directory needs a confined kernel.
fn kernels_confined() -> bool {
    rlm_sandbox::probe().filesystem()
}

#[test]
fn runs_prune_ends_what_a_run_killed_with_its_watchdog_left() {
    if !kernels_confined() {
        return;
    }
    let sb = Sandbox::new();
    let left = kill_watchdog_then_run(&sb, "5151");
    let out = sb
        .bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["runs", "prune"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    left.assert_gone(&sb.data_dir());
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains(&format!("of the dead run {}", left.cookie))
            && stdout.contains("processes, the cgroup and 1 temporary directory"),
        "{stdout}"
    );
}

#[test]
fn the_next_run_ends_what_a_run_killed_with_its_watchdog_left() {
    if !kernels_confined() {
        return;
    }
    let sb = Sandbox::new();
    let left = kill_watchdog_then_run(&sb, "5252");
    let mock = MockLlm::spawn_blocking_thread(MockScript::replies([MockReply::text("FINAL(ok)")]))
        .unwrap();
    let assert = sb
        .bare()
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "anything", "--model", "mock", "--base-url"])
        .arg(mock.control().openai_base_url())
        .assert();
    left.assert_gone(&sb.data_dir());
    assert
        .success()
        .stdout("ok\n")
        .stderr(predicate::str::contains(format!(
            "of the dead run {}",
            left.cookie
        )));
}

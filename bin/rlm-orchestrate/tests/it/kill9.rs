//! `kill -9` of a run leaves nothing behind: the kernel's children, a nested run, its
//! kernel's children and an external agent's, `setsid` escapees included, are all
//! ended by the run's watchdog within a few seconds.

use std::process::{Command, Stdio};
use std::time::Duration;

use rlm_test_support::mock_llm::{MockLlm, MockReply, MockScript};

use crate::support::{Sandbox, BIN};

/// Live (not zombie) processes whose command line is `sleep <MARK>`.
fn marked_sleeps(mark: &str) -> Vec<i32> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmdline != format!("sleep\0{mark}\0").as_bytes() {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_none_or(|state| state == "Z");
        if !zombie {
            found.push(pid);
        }
    }
    found
}

fn kill(pid: i32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

#[test]
fn kill_9_of_a_run_at_depth_2_leaves_no_process_behind() {
    const MARK: &str = "3131";
    let sb = Sandbox::new();
    let agent = sb.file(
        "sleepy-agent.sh",
        format!("#!/bin/sh\nsleep {MARK} &\nsetsid sleep {MARK} &\nsleep {MARK}\n"),
    );
    let start_sleeps = format!(
        "import subprocess\nsubprocess.Popen(['sleep', '{MARK}'])\nsubprocess.Popen(['setsid', 'sleep', '{MARK}'])\n"
    );
    // Root and nested run share the mock: the root's code starts two sleeps and a
    // nested run; the nested run's code starts two more and an agent that starts three.
    let mock = MockLlm::spawn_blocking_thread(MockScript::replies([
        MockReply::text(format!(
            "```repl\n{start_sleeps}print(sub_rlm('start more'))\n```"
        )),
        MockReply::text(format!(
            "```repl\n{start_sleeps}print(spawn_agent('sleep', []))\n```"
        )),
    ]))
    .unwrap();
    let mut run = Command::new(BIN)
        .current_dir(sb.root())
        .env_remove("OPENAI_API_KEY")
        .env_remove("RLM_SANDBOX")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args([
            "-q",
            "run",
            "start processes",
            "--model",
            "mock",
            "--base-url",
        ])
        .arg(mock.control().openai_base_url())
        .args([
            "--max-depth",
            "2",
            "--exec-timeout",
            "300",
            "--agent-timeout",
            "300",
        ])
        .arg("--agent-cmd")
        .arg(format!("sh {}", agent.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Bounded wait for all seven sleeps (2 + 2 + 3) to be running.
    let mut running = Vec::new();
    for _ in 0..600 {
        running = marked_sleeps(MARK);
        if running.len() >= 7 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    kill(run.id() as i32);
    let _ = run.wait();
    assert_eq!(
        running.len(),
        7,
        "the tree did not start as scripted: {running:?}"
    );
    // Bounded wait for the watchdog to end them.
    let mut left = marked_sleeps(MARK);
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        left = marked_sleeps(MARK);
    }
    for &pid in &left {
        kill(pid);
    }
    assert!(left.is_empty(), "left behind after kill -9: {left:?}");
}

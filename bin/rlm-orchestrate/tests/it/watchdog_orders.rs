//! The watchdog takes its orders only from its parent (issue 49, item 1).
//!
//! It used to run the commands of `$TMPDIR/rlm-watchdog-<cookie>.cleanup`, whoever wrote
//! that file, and the cookie is in its world-readable argv: another local user who wrote
//! it during a root user's run got a command run as root, and a process inside the run
//! could register one that outlived the run. These tests write that file the way each
//! attacker would and see that nothing in it runs.

use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockScript};

use crate::grace::eventually;
use crate::support::{Sandbox, BIN};

/// The uid and gid of `nobody`, the other local user.
const NOBODY: u32 = 65534;

/// A sandbox whose root others may enter, with a `tmp/` anyone may write (like `/tmp`):
/// the run's `TMPDIR`.
fn shared_sandbox() -> (Sandbox, PathBuf) {
    let sb = Sandbox::new();
    std::fs::set_permissions(sb.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let tmp = sb.root().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
    (sb, tmp)
}

/// Starts `run` with `TMPDIR=tmp`, its model answering `first` and then `FINAL(done)`.
fn start_run(sb: &Sandbox, tmp: &Path, first: String) -> (Child, MockLlmThread) {
    let mock = MockLlm::spawn_blocking_thread(MockScript::replies([
        MockReply::text(first),
        MockReply::text("FINAL(done)"),
    ]))
    .unwrap();
    let run = Command::new(BIN)
        .current_dir(sb.root())
        .env("TMPDIR", tmp)
        .env_remove("OPENAI_API_KEY")
        .env_remove("RLM_SANDBOX")
        .env_remove("RUST_LOG")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["-q", "run", "wait", "--model", "mock", "--base-url"])
        .arg(mock.control().openai_base_url())
        .args(["--sandbox", "off", "--exec-timeout", "120"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (run, mock)
}

/// The pid and cookie of the watchdog of the run whose pid is `run` (its cookie starts
/// with that pid), read from its argv as anyone can.
pub(crate) fn watchdog_of(run: u32) -> Option<(u32, String)> {
    let prefix = format!("{run}.t");
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let argv: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        if let [_, b"watchdog", cookie, ..] = argv.as_slice() {
            let cookie = String::from_utf8_lossy(cookie).into_owned();
            if cookie.starts_with(&prefix) {
                return Some((pid, cookie));
            }
        }
    }
    None
}

/// Whether `pid` is gone (a zombie counts as gone: PID 1 here reaps no orphans).
pub(crate) fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_none_or(|state| state == "Z" || state == "X")
    })
}

/// One clean-up line in the old file's format: the arguments separated by NUL.
fn cleanup_line(argv: &[&str]) -> String {
    format!("{}\n", argv.join("\0"))
}

/// Writes `contents` to `path` as the user `nobody`.
fn write_as_nobody(path: &Path, contents: &str) {
    let mut writer = Command::new("/bin/sh")
        .arg("-c")
        .arg("cat > \"$1\"")
        .arg("sh")
        .arg(path)
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    writer
        .stdin
        .take()
        .unwrap()
        .write_all(contents.as_bytes())
        .unwrap();
    assert!(writer.wait().unwrap().success());
    assert_eq!(std::fs::metadata(path).unwrap().uid(), NOBODY);
}

#[test]
fn a_cleanup_file_another_user_writes_runs_nothing() {
    let (sb, tmp) = shared_sandbox();
    // Only root may create files in the sandbox's root: if this appears, the watchdog
    // (root) ran nobody's command.
    let marker = sb.root().join("ran-as-root");
    let go = sb.root().join("go");
    let wait_for_go = format!(
        "```repl\nimport os, time\nfor _ in range(6000):\n    if os.path.exists({go:?}):\n        break\n    time.sleep(0.01)\nprint('done')\n```"
    );
    let (run, _mock) = start_run(&sb, &tmp, wait_for_go);
    let mut found = None;
    eventually("the run's watchdog starts", || {
        found = watchdog_of(run.id());
        found.is_some()
    });
    let (watchdog, cookie) = found.unwrap();
    let planted = tmp.join(format!("rlm-watchdog-{cookie}.cleanup"));
    write_as_nobody(
        &planted,
        &cleanup_line(&["touch", &marker.display().to_string()]),
    );
    std::fs::write(&go, "").unwrap();
    let out = run.wait_with_output().unwrap();
    eventually("the watchdog exits", || gone(watchdog));
    assert!(out.status.success(), "{out:?}");
    assert!(
        !marker.exists(),
        "the watchdog ran a command another user wrote to {}",
        planted.display()
    );
}

#[test]
fn a_process_inside_the_run_cannot_register_a_command() {
    let (sb, tmp) = shared_sandbox();
    let marker = sb.root().join("outlived-the-run");
    // Model code knows the cookies (they are in its environment) and TMPDIR: it writes
    // the clean-up file of every watchdog above it.
    let line = cleanup_line(&["touch", &marker.display().to_string()]);
    let plant = format!(
        "```repl\nimport os\nfor c in os.environ['RLM_SUPERVISION_COOKIE'].split(':'):\n    with open(os.path.join({tmp:?}, 'rlm-watchdog-' + c + '.cleanup'), 'a') as f:\n        f.write({line:?})\nprint('planted')\nprint('done')\n```",
        tmp = tmp.display().to_string(),
    );
    let (mut run, mock) = start_run(&sb, &tmp, plant);
    let mut found = None;
    eventually("the run's watchdog starts", || {
        found = watchdog_of(run.id());
        found.is_some() || !matches!(run.try_wait(), Ok(None))
    });
    let out = run.wait_with_output().unwrap();
    let (watchdog, _) =
        found.unwrap_or_else(|| panic!("the run ended before its watchdog was seen"));
    eventually("the watchdog exits", || gone(watchdog));
    let seen = mock.control().requests();
    assert!(out.status.success(), "{out:?}");
    assert!(
        seen.get(1)
            .and_then(|r| r.last_user_message())
            .is_some_and(|m| m.contains("planted")),
        "the model's code did not run as scripted"
    );
    assert!(
        !marker.exists(),
        "a command model code registered ran after the run"
    );
}

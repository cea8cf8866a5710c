//! Faults a user's machine produces: the disk filling up while a value or a context is
//! stored. Each ends in a clear error and leaves what was stored before intact, with no
//! partial file behind.
//!
//! The data directory is put on a 1 MiB tmpfs (mounting needs root, which CI has);
//! elsewhere the same fault is injected with `RLIMIT_FSIZE` (a write past it fails with
//! `EFBIG`, as a full disk fails with `ENOSPC`).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Sandbox, BIN};

/// A small tmpfs, unmounted when dropped.
struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    fn mount(dir: &Path) -> Option<Self> {
        std::fs::create_dir_all(dir).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs"])
            .arg(dir)
            .output()
            .is_ok_and(|out| out.status.success());
        mounted.then(|| Self {
            dir: dir.to_owned(),
        })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
    }
}

/// `rlm-orchestrate --data-dir DATA ARGS`, with writes limited to 1 MiB when there is
/// no small disk.
fn command(data: &Path, small_disk: bool, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("--data-dir")
        .arg(data)
        .args(args)
        .env_remove("RLM_DATA_DIR");
    if !small_disk {
        // SAFETY: only async-signal-safe calls between fork and exec.
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::signal::signal(
                    nix::sys::signal::Signal::SIGXFSZ,
                    nix::sys::signal::SigHandler::SigIgn,
                )
                .map_err(std::io::Error::from)?;
                nix::sys::resource::setrlimit(
                    nix::sys::resource::Resource::RLIMIT_FSIZE,
                    1 << 20,
                    1 << 20,
                )
                .map_err(std::io::Error::from)
            });
        }
    }
    cmd.output().unwrap()
}

fn leftovers(data: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(data.join("variables"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_full_disk_while_storing_is_a_clear_error_and_loses_nothing() {
    let sb = Sandbox::new();
    let data = sb.root().join("disk").join("data");
    let disk = SmallDisk::mount(&sb.root().join("disk"));
    let small_disk = disk.is_some();
    let out = command(&data, small_disk, &["vars", "set", "kept", "the old value"]);
    assert!(out.status.success(), "{out:?}");
    let before = leftovers(&data);
    let big = sb.file("big.txt", "x".repeat(2 << 20));

    let out = command(
        &data,
        small_disk,
        &["vars", "set", "kept", "--file", big.to_str().unwrap()],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a value larger than the disk was stored"
    );
    assert!(
        stderr.contains("kept")
            && (stderr.contains("No space left") || stderr.contains("too large")),
        "the error names the variable and the cause: {stderr}"
    );
    let out = command(&data, small_disk, &["vars", "get", "kept"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "the old value");
    assert_eq!(leftovers(&data), before, "a partial file was left behind");

    // A context copied into the store (a referenced one costs the disk nothing) that
    // is too large for the disk: the run stops before asking any model.
    let out = command(
        &data,
        small_disk,
        &[
            "run",
            "q",
            "--copy-context",
            "--context",
            big.to_str().unwrap(),
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("No space left") || stderr.contains("too large"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("127.0.0.1:9"),
        "no model was asked: {stderr}"
    );
    let out = command(&data, small_disk, &["vars", "get", "kept"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "the old value");
    assert_eq!(
        leftovers(&data),
        before,
        "a partial context file was left behind"
    );
    drop(disk);
}

/// Pids of live `rlm-orchestrate` processes running a nested run (`--child-spec`)
/// whose spec is under `data`.
fn nested_runs(data: &Path) -> Vec<i32> {
    let data = data.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let spec_under_data = args
            .iter()
            .any(|a| String::from_utf8_lossy(a).starts_with(data.as_str()));
        if args.iter().any(|a| *a == b"--child-spec") && spec_under_data {
            found.push(pid);
        }
    }
    found
}

#[test]
fn a_nested_run_killed_like_the_oom_killer_would_is_an_error_the_parent_sees() {
    use rlm_test_support::mock_llm::{MockLlm, MockReply, MockRule, MockScript};
    let sb = Sandbox::new();
    let data = sb.root().join("faults-oom").join("data");
    let mock = MockLlm::spawn_blocking_thread(
        MockScript::replies([MockReply::text("FINAL(the parent survived)")])
            .rule(MockRule::contains(
                "Task: the parent",
                MockReply::text("```repl\nr = sub_rlm('doomed child')\nprint('RESULT', r)\n```"),
            ))
            .rule(MockRule::contains(
                "Task: doomed child",
                MockReply::text("```repl\nimport time\ntime.sleep(120)\n```"),
            )),
    )
    .unwrap();
    let run = std::process::Command::new(BIN)
        .arg("--data-dir")
        .arg(&data)
        .args(["-q", "run", "the parent", "--model", "mock", "--base-url"])
        .arg(mock.control().openai_base_url())
        .env_remove("OPENAI_API_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Bounded wait for the nested run, then SIGKILL it as the OOM killer would.
    let mut killed = false;
    for _ in 0..600 {
        if let Some(&pid) = nested_runs(&data).first() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            killed = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = run.wait_with_output().unwrap();
    assert!(killed, "the nested run never started");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "the parent survived\n"
    );
    let requests = mock.control().requests();
    let seen = requests
        .iter()
        .filter_map(|r| r.last_user_message())
        .find(|m| m.contains("RESULT") || m.contains("sub_rlm"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        seen.contains("signal 9") || seen.contains("SIGKILL"),
        "the model is told the child was killed: {seen}"
    );
}

/// A variable rewritten (three times, then replaced by a small value) while a
/// `vars get` of it is half read: the reader gets the value it started with, whole, and
/// the next reader the newest one.
#[test]
fn a_variable_rewritten_under_a_running_reader_is_read_whole() {
    use std::io::Read;

    const SIZE: usize = 4 << 20;
    let sb = Sandbox::new();
    let first = sb.file("a.txt", "a".repeat(SIZE));
    sb.set(&["big", "--file", first.to_str().unwrap()]);

    let mut reader = Command::new(BIN)
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["vars", "get", "big"])
        .env_remove("RLM_DATA_DIR")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = reader.stdout.take().unwrap();
    let mut head = vec![0_u8; 64 << 10];
    stdout.read_exact(&mut head).unwrap();

    for (n, letter) in ["b", "c", "d"].iter().enumerate() {
        let next = sb.file(&format!("{n}.txt"), letter.repeat(SIZE));
        sb.set(&["big", "--file", next.to_str().unwrap()]);
    }
    sb.set(&["big", "small at last"]);

    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    let status = reader.wait().unwrap();
    assert!(status.success(), "the reader failed: {status:?}");
    head.extend_from_slice(&rest);
    assert_eq!(head.len(), SIZE, "the reader's value was cut or grown");
    assert!(
        head.iter().all(|&b| b == b'a'),
        "the reader mixed in another value"
    );
    assert_eq!(sb.get("big"), b"small at last");
}

//! Model code that fills the disk (issue 22, item 4): the kernel's private temporary
//! directory is bounded in total, not only per file, and it is removed by the run's
//! watchdog after `kill -9` of the run.

use std::process::{Command, Stdio};
use std::time::Duration;

use rlm_test_support::mock_llm::{MockLlm, MockReply, MockScript};

use crate::support::{Sandbox, BIN};

/// Whether this machine can mount a private tmpfs (a mount namespace, as root or in a
/// user namespace); where it cannot, the bound is not enforced and the test says so.
#[allow(clippy::print_stderr, reason = "a skipped test says so")]
fn private_mounts_available() -> bool {
    let ok = Command::new("unshare")
        .args(["-m", "true"])
        .status()
        .is_ok_and(|s| s.success())
        || Command::new("unshare")
            .args(["-Urm", "true"])
            .status()
            .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED: no private mount namespace here");
    }
    ok && rlm_sandbox::probe().filesystem()
}

#[test]
fn files_written_past_the_total_bound_fail_and_the_directory_stays_bounded() {
    if !private_mounts_available() {
        return;
    }
    let sb = Sandbox::new();
    // Five 256 MiB files: each under the 1 GiB per-file limit, together past the
    // directory's 1 GiB bound.
    let code = "```repl\nimport os\nst = os.statvfs('.')\nprint('bound', st.f_blocks * st.f_frsize)\n\
written = 0\ntry:\n    for i in range(5):\n        with open(f'big{i}', 'wb') as f:\n            for _ in range(256):\n                f.write(b'x' * (1 << 20))\n        written += 1\n\
except OSError as e:\n    print('stopped:', e)\nprint('written', written)\nfor i in range(5):\n    try:\n        os.remove(f'big{i}')\n    except OSError:\n        pass\n```";
    let mock = MockLlm::spawn_blocking_thread(MockScript::replies([
        MockReply::text(code),
        MockReply::text("FINAL(done)"),
    ]))
    .unwrap();
    let mut cmd = sb.bare();
    cmd.env_remove("OPENAI_API_KEY")
        .env_remove("RLM_SANDBOX")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "fill the disk", "--model", "mock", "--base-url"])
        .arg(mock.control().openai_base_url())
        .args(["--exec-timeout", "120", "--sandbox", "auto"]);
    cmd.assert().success().stdout("done\n");
    let seen = mock.control().requests()[1]
        .last_user_message()
        .unwrap()
        .to_owned();
    let bound: u64 = seen
        .lines()
        .find_map(|l| l.strip_prefix("bound "))
        .and_then(|b| b.trim().parse().ok())
        .unwrap_or_else(|| panic!("no bound printed:\n{seen}"));
    assert!(
        bound <= (1 << 30) + (1 << 20),
        "the directory holds {bound} bytes:\n{seen}"
    );
    assert!(
        seen.contains("stopped:") && seen.contains("No space left"),
        "{seen}"
    );
    assert!(!seen.contains("written 5"), "{seen}");
}

/// The `TMPDIR` of live processes whose command line is `sleep <mark>`.
fn tmpdirs_of_marked_sleeps(mark: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default()
            != format!("sleep\0{mark}\0").as_bytes()
        {
            continue;
        }
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        for var in environ.split(|&b| b == 0) {
            if let Some(dir) = var.strip_prefix(b"TMPDIR=") {
                found.push(String::from_utf8_lossy(dir).into_owned());
            }
        }
    }
    found
}

#[test]
fn kill_9_of_a_run_leaves_no_kernel_temporary_directory() {
    if !rlm_sandbox::probe().filesystem() {
        return;
    }
    const MARK: &str = "4242";
    let sb = Sandbox::new();
    let code = format!(
        "```repl\nimport subprocess\nopen('junk', 'w').write('x' * 1000)\nsubprocess.run(['sleep', '{MARK}'])\n```"
    );
    let mock =
        MockLlm::spawn_blocking_thread(MockScript::replies([MockReply::text(code)])).unwrap();
    let mut run = Command::new(BIN)
        .current_dir(sb.root())
        .env_remove("OPENAI_API_KEY")
        .env_remove("RLM_SANDBOX")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["-q", "run", "sleep", "--model", "mock", "--base-url"])
        .arg(mock.control().openai_base_url())
        .args(["--exec-timeout", "300", "--sandbox", "auto"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut dirs = Vec::new();
    for _ in 0..600 {
        dirs = tmpdirs_of_marked_sleeps(MARK);
        if !dirs.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(run.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let _ = run.wait();
    let dir = dirs.first().cloned().expect("the cell's sleep never ran");
    assert!(dir.contains("rlm-kernel-"), "{dir}");
    let mut left = true;
    for _ in 0..200 {
        left = std::path::Path::new(&dir).exists();
        if !left {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if left {
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(!left, "{dir} is left after kill -9 of the run");
}

/// Issue 49: when the data directory's disk fills up during a run, the run says once
/// that its trace is incomplete (it used to warn once per lost event), and the trace
/// reads as `unknown` with the reason, not as a complete answered run.
#[test]
#[allow(clippy::print_stderr, reason = "a skipped test says so")]
fn a_full_disk_is_said_once_and_the_run_reads_as_unknown_with_the_reason() {
    let private_mounts = Command::new("unshare")
        .args(["-m", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !private_mounts {
        eprintln!("SKIPPED: no private mount namespace here");
        return;
    }
    let sb = Sandbox::new();
    let data = sb.data_dir();
    std::fs::create_dir_all(&data).unwrap();
    let filler = data.join("filler");
    // The first cell fills the data directory's disk and prints more than the free end
    // of the trace file's last page holds: the events of its step are lost.
    // The second frees it again, so the end of the run is written.
    let fill = format!(
        "```repl\ntry:\n    with open({filler:?}, 'wb') as f:\n        while True:\n            f.write(b'x' * 65536)\nexcept OSError as e:\n    print('full', e.errno)\nprint('y' * 30000)\n```"
    );
    let free = format!("```repl\nimport os\nos.remove({filler:?})\nprint('done')\n```");
    let mock = MockLlm::spawn_blocking_thread(MockScript::replies([
        MockReply::text(fill),
        MockReply::text(free),
        MockReply::text("FINAL(done)"),
    ]))
    .unwrap();
    // A 4 MiB disk for the data directory, in a mount namespace of the test's own; the
    // trace is read back inside it.
    let script = "mount -t tmpfs -o size=4m tmpfs \"$1\" && d=\"$1\" && bin=\"$2\" && shift 2 \
                  && \"$bin\" --data-dir \"$d\" \"$@\"; echo '=== list'; \"$bin\" --data-dir \"$d\" runs list --json";
    let out = Command::new("unshare")
        .current_dir(sb.root())
        .env_remove("OPENAI_API_KEY")
        .env_remove("RLM_SANDBOX")
        .env_remove("RUST_LOG")
        .args(["-m", "sh", "-c", script, "sh"])
        .arg(&data)
        .arg(BIN)
        .args([
            "run",
            "fill the disk",
            "--model",
            "mock",
            "--sandbox",
            "off",
            "--base-url",
        ])
        .arg(mock.control().openai_base_url())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let (answer, listing) = stdout
        .split_once("=== list\n")
        .unwrap_or_else(|| panic!("{out:?}"));
    assert_eq!(answer, "done\n", "{stderr}");
    assert_eq!(
        stderr.matches("is incomplete").count(),
        1,
        "the full disk is said once:\n{stderr}"
    );
    let runs: serde_json::Value =
        serde_json::from_str(listing).unwrap_or_else(|e| panic!("{e}: {listing}"));
    let run = &runs[0];
    assert_eq!(run["status"], "unknown", "{run}");
    let reason = run["error"].as_str().unwrap_or_default();
    assert!(
        reason.contains("incomplete") && reason.contains("No space left"),
        "{run}"
    );
}

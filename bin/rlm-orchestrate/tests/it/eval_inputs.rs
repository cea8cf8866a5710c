//! What `eval` reads under the rules of `--context` and `--context-dir` (issue 49,
//! item 8): a `--haystack` directory never follows a symbolic link (a link to a 0600
//! file outside the directory put that file into model requests); a `--haystack` that
//! is a device or a FIFO is refused at once, with exit 2 (`/dev/zero` was read without
//! end); an external arm's `{output_file}` that is a link to `/dev/zero`, a FIFO or
//! larger than the answer bound fails its item with a clear message after a bounded
//! read.
//!
//! The commands run with their address space capped, so a build that reads without
//! bound fails its test instead of taking the machine's memory, and a read that blocks
//! is given up after a bound (not a timing assertion: a working build ends at once).

use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::eval::{eval_command, oracle, results};
use crate::support::{fifo, Sandbox};

/// How long a broken build may block before the test gives up on it.
const BOUND: Duration = Duration::from_secs(60);

/// Address space the commands may take: far more than `eval` needs, far less than an
/// endless read would.
const MEMORY_CAP_BYTES: u64 = 4 << 30;

/// Words of the secret file the haystack directory links to.
const SECRET: &str = "Zanzibar quartz ledger seventeen";

/// Caps `command`'s address space at [`MEMORY_CAP_BYTES`] (the soft limit only, so
/// what it starts may raise it again).
fn capped(command: &mut Command) -> &mut Command {
    // SAFETY: only async-signal-safe calls between fork and exec.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(|| {
            use nix::sys::resource::{getrlimit, setrlimit, Resource};
            let (_, hard) = getrlimit(Resource::RLIMIT_AS).map_err(std::io::Error::from)?;
            setrlimit(Resource::RLIMIT_AS, MEMORY_CAP_BYTES.min(hard), hard)
                .map_err(std::io::Error::from)
        });
    }
    command
}

/// Runs `command` to its end, for at most [`BOUND`]; kills it and fails otherwise.
fn output_within_bound(command: &mut Command, what: &str) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > BOUND {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: eval did not end (it blocked on its input)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A directory of prose for a haystack.
fn prose_dir(sb: &Sandbox, name: &str) -> std::path::PathBuf {
    let dir = sb.root().join(name);
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("a.txt"),
        "The keeper walked the orchard at dawn. The maps were old and the river was slow.\n",
    )
    .unwrap();
    dir
}

#[test]
fn a_haystack_directory_never_follows_a_link_to_a_file_outside_it() {
    let sb = Sandbox::new();
    let mock = oracle(Duration::ZERO);
    let dir = prose_dir(&sb, "corpus");
    let secret = sb.root().join("secret.txt");
    std::fs::write(&secret, format!("{SECRET}. ").repeat(20)).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&secret, dir.join("b.txt")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", dir.join("c.txt")).unwrap();
    let out = sb.root().join("eval");
    let output = eval_command(
        &sb,
        &mock,
        &out,
        &[
            "--suite",
            "word-count",
            "--lengths",
            "2k",
            "--items",
            "1",
            "--arms",
            "baseline",
            "--haystack",
            dir.to_str().unwrap(),
        ],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("b.txt (symbolic link, not followed)")
            && stderr.contains("c.txt (symbolic link, not followed)"),
        "the skipped links are named: {stderr}"
    );
    assert!(
        stderr.contains("1 files"),
        "only a.txt is the haystack: {stderr}"
    );
    let requests = mock.control().requests();
    assert!(!requests.is_empty(), "the baseline asked the model");
    for request in &requests {
        assert!(
            !request.body.to_string().contains("Zanzibar"),
            "the secret reached a model request"
        );
    }
    for entry in std::fs::read_dir(out.join("contexts")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(!text.contains("Zanzibar"), "the secret is in a context");
    }
    assert_eq!(results(&out).len(), 1);
}

#[test]
fn a_haystack_that_is_a_device_or_a_fifo_is_refused_at_once() {
    let sb = Sandbox::new();
    let mock = oracle(Duration::ZERO);
    let dir = prose_dir(&sb, "corpus");
    let pipe = fifo(sb.root(), "pipe.txt");
    fifo(&dir, "stream.txt");
    for (haystack, says) in [
        (
            "/dev/zero",
            "/dev/zero is a character device, not a regular file",
        ),
        (
            pipe.to_str().unwrap(),
            "pipe.txt is a FIFO, not a regular file",
        ),
        (
            dir.to_str().unwrap(),
            "stream.txt is a FIFO, not a regular file",
        ),
    ] {
        let out = sb.root().join("eval");
        let mut command = eval_command(&sb, &mock, &out, &["--haystack", haystack]);
        let output = output_within_bound(capped(&mut command), haystack);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{haystack}: {stderr}");
        assert!(stderr.contains(says), "{haystack}: {stderr}");
        assert!(stderr.contains("--haystack"), "{haystack}: {stderr}");
    }
    assert_eq!(mock.control().request_count(), 0);
}

#[test]
fn a_haystack_over_max_context_bytes_is_refused() {
    let sb = Sandbox::new();
    let mock = oracle(Duration::ZERO);
    let dir = prose_dir(&sb, "corpus");
    let out = sb.root().join("eval");
    let output = eval_command(
        &sb,
        &mock,
        &out,
        &[
            "--haystack",
            dir.to_str().unwrap(),
            "--max-context-bytes",
            "40",
        ],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("more than 40 bytes") && stderr.contains("--max-context-bytes"),
        "{stderr}"
    );
}

/// `--arm NAME='sh -c SCRIPT sh {output_file}'`: an arm whose script makes its
/// output file something other than a file of its answer.
fn arm_making(name: &str, script: &str) -> String {
    format!("{name}=sh -c '{script}' sh {{output_file}}")
}

#[test]
fn an_arm_output_file_that_is_a_device_a_fifo_or_too_large_fails_its_item() {
    let sb = Sandbox::new();
    let mock = oracle(Duration::ZERO);
    let out = sb.root().join("eval");
    let zero = arm_making("zero", "ln -s /dev/zero \"$1\"");
    let pipe = arm_making("pipe", "mkfifo \"$1\"");
    let huge = arm_making("huge", "yes x | head -c 3000000 > \"$1\"");
    let plain = arm_making("plain", "echo 42 > \"$1\"");
    let mut command = eval_command(
        &sb,
        &mock,
        &out,
        &[
            "--suite",
            "sniah",
            "--lengths",
            "2k",
            "--items",
            "1",
            "--arms",
            "zero,pipe,huge,plain",
            "--arm",
            &zero,
            "--arm",
            &pipe,
            "--arm",
            &huge,
            "--arm",
            &plain,
        ],
    );
    let output = output_within_bound(capped(&mut command), "arm output files");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "failed items are scored: {stderr}");
    let all = results(&out);
    let of = |arm: &str| {
        all.iter()
            .find(|r| r["arm"] == arm)
            .unwrap_or_else(|| panic!("no result of {arm}: {all:?}"))
            .clone()
    };
    for (arm, says) in [
        ("zero", "is a symbolic link"),
        ("pipe", "is a FIFO"),
        ("huge", "is over 1048576 bytes"),
    ] {
        let result = of(arm);
        let failed = result["failed"].as_str().unwrap_or_default();
        assert!(
            failed.contains(&format!("arm {arm} wrote {{output_file}}"))
                && failed.contains(says)
                && failed.contains("answer.out"),
            "{arm}: {result}"
        );
        assert_eq!(result["score"], 0.0, "{arm}");
        assert!(result["error"].is_null(), "{arm}: {result}");
        assert!(result["got"].as_str().unwrap_or_default().len() < 1000);
    }
    assert!(of("plain")["failed"].is_null());
    assert_eq!(of("plain")["got"], "42");
}

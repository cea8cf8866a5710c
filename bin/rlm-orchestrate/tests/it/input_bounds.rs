//! Input the user controls is bounded before it is held: a task on stdin (`run`, and
//! each query line of a piped `repl`) and every duration setting, whichever front door
//! (flag, `RLM_*` variable, `rlm.toml`) it came through. Past a bound: exit 2, a
//! message naming the bound, no request to the model, the store as it was.

use std::io::Write as _;
use std::process::{Command, Stdio};

use predicates::prelude::*;
use serde_json::Value;

use crate::support::mock_replies as mock;
use crate::support::{Sandbox, BIN};

/// What an endless writer (`yes`) managed to write before the reader went away.
const ENDLESS_CAP_BYTES: usize = 16 << 20;

/// Runs `args` with stdin fed by a writer that would write `ENDLESS_CAP_BYTES` of
/// `chunk` (for all the reader cares, forever); returns the output and how much the
/// writer got in before the pipe closed.
fn with_endless_stdin(
    sb: &Sandbox,
    args: &[String],
    chunk: &[u8],
) -> (std::process::Output, usize) {
    let mut child = Command::new(BIN)
        .current_dir(sb.root())
        .env_remove("RLM_DATA_DIR")
        .env_remove("RUST_LOG")
        .env_remove("OPENAI_API_KEY")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let chunk = chunk.to_vec();
    let writer = std::thread::spawn(move || {
        let mut written = 0;
        while written < ENDLESS_CAP_BYTES {
            match stdin.write(&chunk) {
                Ok(n) => written += n,
                Err(_) => break, // the reader closed stdin (it exited): as `yes` sees it
            }
        }
        written
    });
    let output = child.wait_with_output().unwrap();
    (output, writer.join().unwrap())
}

/// The store's variables, as `vars list --json` prints them.
fn stored(sb: &Sandbox) -> Vec<Value> {
    let out = sb.vars(&["list", "--json"]).assert().success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

/// Issue 22, item 2: `yes | rlm-orchestrate run --context f` grew to gigabytes.
#[test]
fn an_endless_task_on_stdin_is_refused_at_its_bound() {
    let sb = Sandbox::new();
    sb.set(&["keep", "precious"]);
    let before = stored(&sb);
    let context = sb.file("f.txt", "some context");
    let mock = mock(&["FINAL(never)"]);
    let args: Vec<String> = [
        "--data-dir",
        &sb.data_dir().display().to_string(),
        "run",
        "--context",
        &context.display().to_string(),
        "--base-url",
        &mock.control().openai_base_url(),
        "--model",
        "mock",
    ]
    .map(str::to_owned)
    .to_vec();
    let (output, written) = with_endless_stdin(&sb, &args, &b"y\n".repeat(4096));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("1 MiB"), "{stderr}");
    assert!(stderr.contains("--context -"), "{stderr}");
    assert!(
        written < ENDLESS_CAP_BYTES,
        "stdin was read to the end ({written} bytes) instead of up to the bound"
    );
    assert_eq!(mock.control().request_count(), 0);
    assert_eq!(stored(&sb), before, "a refused task changed the store");
}

/// Issue 22, item 2: the query lines of a piped `repl` have the same bound.
#[test]
fn an_endless_repl_line_is_refused_at_the_task_bound() {
    let sb = Sandbox::new();
    sb.set(&["keep", "precious"]);
    let before = stored(&sb);
    let mock = mock(&["FINAL(never)"]);
    let args: Vec<String> = [
        "--data-dir",
        &sb.data_dir().display().to_string(),
        "-q",
        "repl",
        "--base-url",
        &mock.control().openai_base_url(),
        "--model",
        "mock",
    ]
    .map(str::to_owned)
    .to_vec();
    // One line without end: `yes` without its newlines.
    let (output, written) = with_endless_stdin(&sb, &args, &[b'y'; 8192]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("1 MiB"), "{stderr}");
    assert!(
        written < ENDLESS_CAP_BYTES,
        "read {written} bytes of one line"
    );
    assert_eq!(mock.control().request_count(), 0);
    assert_eq!(stored(&sb), before, "a refused query changed the store");
}

/// Issue 22, item 2: a task given as an argument has the same bound (the MCP
/// `rlm_run` task goes through the same check, `checked_task`).
#[test]
fn a_task_argument_over_the_bound_is_refused() {
    let sb = Sandbox::new();
    let task = sb.file("task.txt", "x".repeat((1 << 20) + 1));
    let mock = mock(&["FINAL(never)"]);
    // Through stdin from a file (an argument that long is beyond the OS's own limit).
    sb.bare()
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "--base-url", &mock.control().openai_base_url()])
        .args(["--model", "mock"])
        .pipe_stdin(&task)
        .unwrap()
        .assert()
        .code(2)
        .stderr(predicate::str::contains("1 MiB"));
    assert_eq!(mock.control().request_count(), 0);
}

/// The largest number a duration flag parses; it used to overflow `Instant + Duration`.
const HUGE: &str = "18446744073709551615";

/// Issue 22, item 7: `--exec-timeout 18446744073709551615` panicked (exit 101) when the
/// first code block ran. Every duration flag, its `RLM_*` variable and its `rlm.toml`
/// key is bounded: exit 2, a message naming the flag and its bound, nothing asked.
#[test]
fn every_duration_setting_has_an_upper_bound() {
    let sb = Sandbox::new();
    sb.set(&["keep", "precious"]);
    let before = stored(&sb);
    let mock = mock(&["```repl\nprint(1)\n```", "FINAL(done)"]);
    let run = || {
        let mut cmd = sb.bare();
        cmd.env_remove("OPENAI_API_KEY")
            .arg("--data-dir")
            .arg(sb.data_dir())
            .args(["run", "q", "--base-url", &mock.control().openai_base_url()])
            .args(["--model", "mock"]);
        cmd
    };
    let flags = [
        ("exec-timeout", "RLM_EXEC_TIMEOUT", "2592000"),
        ("agent-timeout", "RLM_AGENT_TIMEOUT", "2592000"),
        ("request-timeout", "RLM_REQUEST_TIMEOUT", "2592000"),
        ("max-time", "RLM_MAX_TIME", "2592000"),
        ("retry-base-delay-ms", "RLM_RETRY_BASE_DELAY_MS", "30000"),
    ];
    for (flag, variable, bound) in flags {
        let named = |stderr: &str| stderr.contains(&format!("--{flag}")) && stderr.contains(bound);
        for value in [HUGE, "2592001000"] {
            run()
                .arg(format!("--{flag}"))
                .arg(value)
                .assert()
                .code(2)
                .stderr(predicate::function(named))
                .stdout("");
        }
        run()
            .env(variable, HUGE)
            .assert()
            .code(2)
            .stderr(predicate::function(named));
        // TOML integers stop at i64::MAX.
        let key = flag.replace('-', "_");
        sb.file("rlm.toml", format!("{key} = {}\n", i64::MAX));
        run().assert().code(2).stderr(predicate::function(named));
        std::fs::remove_file(sb.root().join("rlm.toml")).unwrap();
    }
    assert_eq!(
        mock.control().request_count(),
        0,
        "a refused setting reached the model"
    );
    assert_eq!(stored(&sb), before, "a refused setting changed the store");
    // At the bound itself the run goes on, and its code block runs.
    run()
        .args(["--exec-timeout", "2592000", "--max-time", "2592000"])
        .args(["--request-timeout", "2592000", "--agent-timeout", "2592000"])
        .args(["--retry-base-delay-ms", "30000"])
        .assert()
        .success()
        .stdout("done\n");
}

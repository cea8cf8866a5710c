//! Helpers shared by the tests: a temporary data directory and commands pointed at it.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;
use tempfile::TempDir;

/// A scripted mock model answering `replies` in order (then HTTP 500).
pub fn mock_replies(replies: &[&str]) -> rlm_test_support::mock_llm::MockLlmThread {
    use rlm_test_support::mock_llm::{MockLlm, MockReply, MockScript};
    MockLlm::spawn_blocking_thread(MockScript::replies(
        replies.iter().map(|r| MockReply::text(*r)),
    ))
    .unwrap()
}

/// Makes a FIFO `name` in `dir` with `mkfifo`.
pub fn fifo(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let status = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo failed");
    path
}

/// Path of the binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_rlm-orchestrate");

/// A scratch directory holding one data directory (`data/`) and input files.
pub struct Sandbox {
    dir: TempDir,
}

impl Sandbox {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// The scratch directory (also the working directory of commands).
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The data directory commands use.
    pub fn data_dir(&self) -> PathBuf {
        self.root().join("data")
    }

    /// The binary with a clean environment, run in the sandbox, without `--data-dir`.
    pub fn bare(&self) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.current_dir(self.root())
            .env_remove("RLM_DATA_DIR")
            .env_remove("RUST_LOG")
            .env("COLUMNS", "100");
        cmd
    }

    /// `rlm-orchestrate --data-dir <sandbox>/data vars <args…>`.
    pub fn vars(&self, args: &[&str]) -> Command {
        let mut cmd = self.bare();
        cmd.arg("--data-dir")
            .arg(self.data_dir())
            .arg("vars")
            .args(args);
        cmd
    }

    /// Writes a file in the sandbox and returns its path.
    pub fn file(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.root().join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }

    /// `vars set` that must succeed; returns its stdout.
    pub fn set(&self, args: &[&str]) -> String {
        let out = self.vars(&[&["set"], args].concat()).assert().success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    }

    /// `vars get KEY` that must succeed; returns stdout bytes.
    pub fn get(&self, key: &str) -> Vec<u8> {
        self.vars(&["get", key])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone()
    }

    /// `vars show KEY --json`, parsed.
    pub fn show_json(&self, key: &str) -> Value {
        let out = self.vars(&["show", key, "--json"]).assert().success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    }

    /// The sha256 the store reports for `key`.
    pub fn sha(&self, key: &str) -> String {
        self.show_json(key)["ref"]["sha256"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

/// A whole OpenAI chat completion with this text and `finish_reason` (`"length"`: a
/// reply cut at the output-token limit), for a mock script.
pub fn reply_with_finish(text: &str, finish_reason: &str) -> rlm_test_support::mock_llm::MockReply {
    let body = serde_json::json!({
        "id": "chatcmpl-cut", "object": "chat.completion", "created": 0, "model": "mock",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": finish_reason}],
    });
    rlm_test_support::mock_llm::MockReply::raw("application/json", body.to_string())
}

/// Writes a log of about `bytes` bytes with `needle` on its own line near `needle_at`.
pub fn write_big_context(path: &Path, bytes: usize, needle_at: usize, needle: &str) {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let line = "2026-11-22T09:00:00Z svc=api level=info msg=\"request served\" latency_ms=12\n";
    let mut written = 0;
    let mut placed = false;
    while written < bytes {
        if !placed && written >= needle_at {
            writeln!(file, "{needle}").unwrap();
            written += needle.len() + 1;
            placed = true;
        }
        file.write_all(line.as_bytes()).unwrap();
        written += line.len();
    }
}

/// Asserts that a run succeeded and printed `answer` (stderr shown when it did not).
pub fn assert_answer(out: &std::process::Output, answer: &str) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), answer);
}

/// Sends the child Ctrl-C (`SIGINT`) and waits for it to end, at most 60 s (a child
/// still running then fails the test: it did not stop after Ctrl-C).
pub fn interrupt_and_wait(child: &mut std::process::Child) -> std::process::ExitStatus {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run did not stop after Ctrl-C"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

//! Fixtures shared by the test modules, and the worker processes of the multi-process
//! tests.
//!
//! A worker is this very test binary, started again by [`Worker::spawn`] with the name
//! of one `#[test]` function, `--exact`, and environment variables naming its role,
//! data directory and argument. The worker function checks [`worker_input`] first: in
//! an ordinary test run the role variable is absent and it returns at once (it shows as
//! a passing test that did nothing); in a worker process it does its job and talks to
//! the parent through lines on stdout that start with [`MESSAGE_PREFIX`] (libtest's own
//! output is ignored) and through lines on stdin.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};

use rlm_context_store::{Durability, StoreOptions};

/// Names the `#[test]` function a worker process runs as (its full path in this binary).
const WORKER_ROLE_ENV: &str = "RLM_STORE_IT_WORKER";

/// The data directory a worker opens.
const WORKER_DIR_ENV: &str = "RLM_STORE_IT_DATA_DIR";

/// A free-form argument for the worker.
const WORKER_ARG_ENV: &str = "RLM_STORE_IT_ARG";

/// Marks every line a worker sends to its parent.
pub const MESSAGE_PREFIX: &str = "[store-worker] ";

/// Store options without fsync: the tests that use them are about logic, not
/// durability, and fsync would only slow them down.
pub fn bulk() -> StoreOptions {
    StoreOptions {
        durability: Durability::Bulk,
        ..StoreOptions::default()
    }
}

/// What a worker process was started with.
pub struct WorkerInput {
    /// The store's data directory.
    pub dir: PathBuf,
    /// The argument given to [`Worker::spawn`].
    pub arg: String,
}

/// `Some` only in a worker process started for the test function `test_path`.
pub fn worker_input(test_path: &str) -> Option<WorkerInput> {
    if std::env::var(WORKER_ROLE_ENV).ok()? != test_path {
        return None;
    }
    Some(WorkerInput {
        dir: PathBuf::from(std::env::var_os(WORKER_DIR_ENV)?),
        arg: std::env::var(WORKER_ARG_ENV).unwrap_or_default(),
    })
}

/// Sends one line from a worker to its parent.
pub fn tell_parent(message: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{MESSAGE_PREFIX}{message}").expect("write to the parent");
    out.flush().expect("flush to the parent");
}

/// Blocks a worker until its parent sends a line; returns it without the newline.
pub fn hear_parent() -> String {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .expect("read from the parent");
    line.trim_end().to_owned()
}

/// A worker process; killed and reaped on drop if still running, so a failing test
/// leaves no orphan behind.
pub struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// The worker's other stdout lines (libtest's), shown when something goes wrong.
    chatter: Vec<String>,
    reaped: bool,
}

impl Worker {
    /// Runs this test binary again, executing only `test_path` as a worker on `dir`.
    pub fn spawn(test_path: &str, dir: &Path, arg: &str) -> Self {
        let exe = std::env::current_exe().expect("path of the test binary");
        let mut child = Command::new(exe)
            .args([test_path, "--exact", "--nocapture", "--test-threads=1"])
            .env(WORKER_ROLE_ENV, test_path)
            .env(WORKER_DIR_ENV, dir)
            .env(WORKER_ARG_ENV, arg)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a worker process");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("worker stdout"));
        Self {
            child,
            stdin,
            stdout,
            chatter: Vec::new(),
            reaped: false,
        }
    }

    /// The next message from the worker, or `None` once its stdout is closed.
    pub fn next_message(&mut self) -> Option<String> {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self
                .stdout
                .read_line(&mut line)
                .expect("read the worker's stdout");
            if n == 0 {
                return None;
            }
            // libtest may have printed `test … ... ` on the same line just before.
            let line = line.trim_end();
            match line.find(MESSAGE_PREFIX) {
                Some(at) => return Some(line[at + MESSAGE_PREFIX.len()..].to_owned()),
                None => self.chatter.push(line.to_owned()),
            }
        }
    }

    /// Reads the next message and checks it is `expected`.
    pub fn expect_message(&mut self, expected: &str) {
        let got = self.next_message();
        assert_eq!(
            got.as_deref(),
            Some(expected),
            "worker {} did not say {expected:?}; its other output:\n{}",
            self.child.id(),
            self.chatter.join("\n")
        );
    }

    /// Sends one line to the worker's stdin.
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("worker stdin still open");
        writeln!(stdin, "{line}").expect("write to the worker");
        stdin.flush().expect("flush to the worker");
    }

    /// `kill -9`s the worker and reaps it.
    pub fn kill(&mut self) -> ExitStatus {
        self.child.kill().expect("SIGKILL the worker");
        self.reap()
    }

    /// Closes stdin, collects the remaining messages, waits for the exit and checks it
    /// was a success (the worker's test function passed).
    pub fn finish(mut self) -> Vec<String> {
        self.stdin = None;
        let mut messages = Vec::new();
        while let Some(message) = self.next_message() {
            messages.push(message);
        }
        let status = self.reap();
        assert!(
            status.success(),
            "worker failed: {status}; its other output:\n{}",
            self.chatter.join("\n")
        );
        messages
    }

    fn reap(&mut self) -> ExitStatus {
        let status = self.child.wait().expect("wait for the worker");
        self.reaped = true;
        status
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A fresh temporary directory and the (not yet created) data directory inside it.
pub fn data_dir() -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::tempdir().expect("temporary directory");
    let data = temp.path().join("data");
    (temp, data)
}

/// The names of the files in `dir`, sorted.
pub fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list directory")
        .map(|e| {
            e.expect("directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// Reads a variable file with nothing but a plain JSON parser, as a sub-agent in
/// another language would.
pub fn read_plain_json(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).expect("read variable file");
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The Unix permission bits of a path.
pub fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

/// The compact JSON of a value: what a variable's `sizeBytes` and `sha256` describe
/// (docs/store.md).
pub fn encode_value(value: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap()
}

/// Lowercase hex SHA-256 of `bytes`, as a variable's `sha256` records it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

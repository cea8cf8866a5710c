//! `--max-context-bytes` on inputs that have no size to check first (devices, pipes,
//! FIFOs, stdin), and a context load stopped by SIGTERM: each is refused or stopped
//! before anything is asked, and leaves nothing in the store but what was there.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as StdCommand, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockScript};

use crate::support::{fifo, Sandbox, BIN};

/// Bound on how long a broken build may run before the test gives up on it (not a
/// timing assertion: a working build finishes at once).
const BOUND: Duration = Duration::from_secs(60);

/// The limit the tests use: small, so an endless input is cut quickly.
const LIMIT: &str = "100000";

fn mock() -> Model {
    Model(MockLlm::spawn_blocking_thread(MockScript::always("FINAL(stored)")).unwrap())
}

/// The mock server and its URL.
struct Model(MockLlmThread);

impl Model {
    fn url(&self) -> String {
        self.0.control().openai_base_url()
    }
    fn requests(&self) -> usize {
        self.0.control().requests().len()
    }
}

/// `run TASK --context <context> --max-context-bytes LIMIT` against `mock`.
fn run_cmd(sb: &Sandbox, mock: &Model, context_args: &[&str]) -> assert_cmd::Command {
    let mut cmd = sb.bare();
    cmd.env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "what is in it?", "--base-url", &mock.url()])
        .args(["--max-context-bytes", LIMIT])
        .args(context_args)
        .timeout(BOUND);
    cmd
}

/// Stores `keep` so the tests can check a refused load leaves it alone.
fn store_keep(sb: &Sandbox) {
    sb.set(&["keep", "precious"]);
}

/// The entries of `variables/`, and that `keep` is intact.
fn assert_only_keep_left(sb: &Sandbox) {
    let names = variable_files(&sb.data_dir());
    assert_eq!(names, ["keep.json"], "the load left files behind");
    assert_eq!(
        String::from_utf8(sb.get("keep")).unwrap().trim_end(),
        "precious"
    );
}

fn variable_files(data_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(data_dir.join("variables"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn assert_names_the_flag(stderr: &[u8]) {
    let stderr = String::from_utf8_lossy(stderr);
    assert!(
        stderr.contains("--max-context-bytes") && stderr.contains("nothing of it was stored"),
        "{stderr}"
    );
}

#[test]
fn an_endless_device_is_cut_at_the_limit() {
    let sb = Sandbox::new();
    store_keep(&sb);
    let mock = mock();
    let out = run_cmd(&sb, &mock, &["--context", "/dev/zero"])
        .assert()
        .code(2);
    assert_names_the_flag(&out.get_output().stderr);
    assert_eq!(mock.requests(), 0, "the model was asked");
    assert_only_keep_left(&sb);
}

#[test]
fn stdin_over_the_limit_is_refused_by_dash_and_by_dev_stdin() {
    let big = "x".repeat(300_000);
    for context in ["-", "/dev/stdin"] {
        let sb = Sandbox::new();
        store_keep(&sb);
        let mock = mock();
        let out = run_cmd(&sb, &mock, &["--context", context])
            .write_stdin(big.clone())
            .assert()
            .code(2);
        assert_names_the_flag(&out.get_output().stderr);
        assert_eq!(mock.requests(), 0, "{context}: the model was asked");
        assert_only_keep_left(&sb);
    }
}

#[test]
fn stdin_within_the_limit_is_the_context() {
    let sb = Sandbox::new();
    let mock = mock();
    run_cmd(&sb, &mock, &["--context", "-"])
        .write_stdin("a small context from stdin")
        .assert()
        .success()
        .stdout("stored\n");
    let request = &mock.0.control().requests()[0];
    assert!(
        request
            .last_user_message()
            .unwrap()
            .contains("a small context from stdin"),
        "the preview of the stdin context is missing"
    );
}

#[test]
fn dash_needs_the_task_as_an_argument() {
    let sb = Sandbox::new();
    sb.bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args([
            "run",
            "--context",
            "-",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ])
        .write_stdin("task or context?")
        .assert()
        .code(2)
        .stderr(predicates::str::contains("pass the task as an argument"));
    sb.bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args([
            "repl",
            "--context",
            "-",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ])
        .write_stdin("a query")
        .assert()
        .code(2)
        .stderr(predicates::str::contains("stdin carries the queries"));
}

/// Writes `bytes` into the FIFO at `path` from a thread (the reader may stop early:
/// write errors are expected then).
fn feed(path: PathBuf, bytes: usize) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let Ok(mut fifo) = std::fs::OpenOptions::new().write(true).open(&path) else {
            return;
        };
        let chunk = vec![b'f'; 64 * 1024];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(chunk.len());
            if fifo.write_all(&chunk[..n]).is_err() {
                return;
            }
            left -= n;
        }
    })
}

#[test]
fn a_fifo_over_the_limit_is_refused() {
    let sb = Sandbox::new();
    store_keep(&sb);
    let mock = mock();
    let path = fifo(sb.root(), "pipe.txt");
    let writer = feed(path.clone(), 1 << 20);
    let out = run_cmd(&sb, &mock, &["--context", path.to_str().unwrap()])
        .assert()
        .code(2);
    assert_names_the_flag(&out.get_output().stderr);
    writer.join().unwrap();
    assert_eq!(mock.requests(), 0);
    assert_only_keep_left(&sb);
}

#[test]
fn a_context_dir_refuses_fifos_and_devices() {
    let sb = Sandbox::new();
    store_keep(&sb);
    let mock = mock();
    let dir = sb.root().join("docs");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), "alpha").unwrap();
    fifo(&dir, "b.pipe");
    let out = run_cmd(&sb, &mock, &["--context-dir", dir.to_str().unwrap()])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("b.pipe") && stderr.contains("FIFO") && stderr.contains("regular"),
        "{stderr}"
    );
    assert_eq!(mock.requests(), 0);
    assert_only_keep_left(&sb);
}

#[test]
fn a_context_dir_skips_symlinks_and_tells_the_model() {
    let sb = Sandbox::new();
    let mock = mock();
    let dir = sb.root().join("docs");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), "alpha").unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.join("passwd")).unwrap();
    std::os::unix::fs::symlink(".", dir.join("loop")).unwrap();
    std::os::unix::fs::symlink("a.txt", dir.join("alias.txt")).unwrap();
    let d = dir.to_str().unwrap();
    for (follow, files) in [(false, 1), (true, 2)] {
        let mut args = vec!["--context-dir", d, "--dir-as", "dict"];
        if follow {
            args.push("--follow-symlinks");
        }
        run_cmd(&sb, &mock, &args).assert().code(0);
        let requests = mock.0.control().requests();
        let first = requests.last().unwrap().message_texts().join("\n");
        assert!(first.contains(&format!("({files} files)")), "{first}");
        for name in [
            "zero (symbolic link",
            "passwd (symbolic link",
            "loop (symbolic link",
        ] {
            assert!(
                first.contains(name),
                "{name} not listed as skipped: {first}"
            );
        }
        assert!(!first.contains("root:"), "{first}");
    }
}

/// Waits until `done` holds, for at most [`BOUND`].
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < BOUND, "gave up waiting for {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for `child` to exit, for at most [`BOUND`]; kills it and fails otherwise.
fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > BOUND {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the run did not stop after SIGTERM while loading its context");
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// `run` and `repl` alike: SIGTERM while the context streams in from a pipe that
/// stays open and silent ends the process at once, with nothing of the load kept.
#[test]
fn sigterm_stops_a_load_from_a_quiet_pipe_and_removes_its_partial_file() {
    let commands: [&[&str]; 2] = [&["run", "what is in it?"], &["repl"]];
    for command in commands {
        let sb = Sandbox::new();
        store_keep(&sb);
        let mock = mock();
        let mut child = StdCommand::new(BIN)
            .current_dir(sb.root())
            .env_remove("RLM_DATA_DIR")
            .env_remove("OPENAI_API_KEY")
            .arg("--data-dir")
            .arg(sb.data_dir())
            .args(command)
            .args(["--base-url", &mock.url()])
            .args(["--context", "/dev/stdin"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&vec![b'p'; 64 * 1024]).unwrap();
        stdin.flush().unwrap();
        // The load has begun once its temporary file exists; the pipe then stays open
        // and silent, so only the signal can end the load.
        wait_for("the context load to start", || {
            variable_files(&sb.data_dir()).len() > 1
        });
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = wait_exit(&mut child);
        drop(stdin);
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(status.code(), Some(130), "{command:?}: {stderr}");
        assert!(stderr.contains("was stopped"), "{command:?}: {stderr}");
        assert_eq!(mock.requests(), 0);
        assert_only_keep_left(&sb);
    }
}

/// In the REPL, Ctrl-C while a query's `:context` streams in from a silent FIFO
/// cancels that query's load (nothing kept) and the REPL goes on.
#[test]
fn ctrl_c_stops_a_repl_context_load_and_the_repl_goes_on() {
    let sb = Sandbox::new();
    store_keep(&sb);
    let mock = mock();
    let path = fifo(sb.root(), "slow.txt");
    // The writer sends a little, then stays open and silent until told to go.
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let writer = {
        let path = path.clone();
        thread::spawn(move || {
            let mut fifo = std::fs::OpenOptions::new().write(true).open(path).unwrap();
            fifo.write_all(&vec![b's'; 64 * 1024]).unwrap();
            let _ = wait.recv();
        })
    };
    let mut child = StdCommand::new(BIN)
        .current_dir(sb.root())
        .env_remove("RLM_DATA_DIR")
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["repl", "--base-url", &mock.url()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, ":context {}\nwhat is in it?", path.display()).unwrap();
    stdin.flush().unwrap();
    wait_for("the :context load to start", || {
        variable_files(&sb.data_dir()).len() > 1
    });
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    // The REPL is still there: it answers the next query (over no new context).
    writeln!(stdin, "and now?").unwrap();
    drop(stdin);
    let status = wait_exit(&mut child);
    go.send(()).unwrap();
    writer.join().unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("was stopped"), "{stderr}");
    assert!(
        stdout.contains("stored"),
        "the next query was not answered: {stdout}"
    );
    assert_eq!(status.code(), Some(1), "{stderr}"); // one query failed
    assert_eq!(mock.requests(), 1);
    assert_only_keep_left(&sb);
}

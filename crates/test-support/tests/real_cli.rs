//! The mock model server driving the real agent CLIs: the Codex CLI (`codex exec`,
//! OpenAI Responses over a custom provider) and Claude Code (`claude -p`, Anthropic
//! Messages), each answering with scripted text and running one scripted shell command
//! through its own tool before answering.
//!
//! Each CLI is found through `RLM_CODEX_BIN` / `RLM_CLAUDE_BIN`, else on `PATH`, else
//! under `/opt/rlm-agents/node_modules/.bin/`. When it is absent the test says why and
//! passes, except under `CI=true`, where it fails. Every run gets a private `HOME` and
//! working directory, and is killed (its whole process group) if it overruns.

#![expect(
    clippy::unwrap_used,
    clippy::print_stderr,
    reason = "the helpers fail the test on any surprise, as the tests do; a skip is said on stderr"
)]

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rlm_test_support::mock_llm::{
    Api, MockLlm, MockLlmThread, MockReply, MockRule, MockScript, MockToolCall, RequestMatch,
};
use serde_json::json;

/// The longest a CLI run may take before it is killed.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// Where the agent CLIs are installed on the project's test machines.
const AGENTS_BIN: &str = "/opt/rlm-agents/node_modules/.bin";

/// The CLI `name`, from `env_var`, `PATH` or [`AGENTS_BIN`]; `None` (after saying
/// why) when it is absent and this is not CI.
fn find_cli(env_var: &str, name: &str) -> Option<PathBuf> {
    let from_env = std::env::var_os(env_var).map(PathBuf::from);
    if let Some(path) = from_env.as_ref().filter(|path| !path.is_file()) {
        panic!("{env_var}={} is not a file", path.display());
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|path| path.is_file())
    });
    let installed = Some(Path::new(AGENTS_BIN).join(name)).filter(|path| path.is_file());
    if let Some(path) = from_env.or(on_path).or(installed) {
        return Some(path);
    }
    let reason = format!(
        "{name} not found (set {env_var}, put it on PATH, or install it under {AGENTS_BIN})"
    );
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{reason}; CI=true needs it");
    }
    eprintln!("skipped: {reason}");
    None
}

/// What a finished run printed.
struct Ran {
    success: bool,
    stdout: String,
    stderr: String,
}

/// A scratch `HOME` and working directory for one run.
struct Scratch {
    _root: tempfile::TempDir,
    home: PathBuf,
    work: PathBuf,
}

fn scratch() -> Scratch {
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("home");
    let work = root.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    Scratch {
        _root: root,
        home,
        work,
    }
}

/// Runs `command` in its own process group with output to files, waiting at most
/// [`RUN_LIMIT`]; on overrun kills the group and fails the test.
fn run(mut command: Command, scratch: &Scratch) -> Ran {
    let out_path = scratch.home.join("cli.stdout");
    let err_path = scratch.home.join("cli.stderr");
    command
        .current_dir(&scratch.work)
        .env("HOME", &scratch.home)
        .env_remove("CODEX_HOME")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env_remove("ANTHROPIC_MODEL")
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .process_group(0);
    let mut child = command.spawn().unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > RUN_LIMIT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    let Some(status) = status else {
        let group = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = child.wait();
        panic!(
            "{command:?} overran {RUN_LIMIT:?} and was killed\nstdout:\n{}\nstderr:\n{}",
            read(&out_path),
            read(&err_path)
        );
    };
    Ran {
        success: status.success(),
        stdout: read(&out_path),
        stderr: read(&err_path),
    }
}

/// `codex exec` pointed at `mock` through a custom provider (Responses over HTTP,
/// so no WebSocket attempt), in a workspace-write sandbox.
fn codex(bin: &Path, mock: &MockLlmThread, extra: &[&str], prompt: &str) -> Command {
    let provider = format!(
        "model_providers.rlm={{name=\"rlm\", base_url=\"{}\", env_key=\"OPENAI_API_KEY\", wire_api=\"responses\"}}",
        mock.openai_base_url()
    );
    let mut command = Command::new(bin);
    command
        .env("OPENAI_API_KEY", "sk-test")
        .args(["exec", "--skip-git-repo-check", "--ephemeral"])
        .args(["-c", "model_provider=rlm", "-c", &provider])
        .args(["-s", "workspace-write"])
        .args(extra)
        .arg(prompt);
    command
}

/// `claude -p` pointed at `mock`.
fn claude(bin: &Path, mock: &MockLlmThread, extra: &[&str], prompt: &str) -> Command {
    let mut command = Command::new(bin);
    command
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("ANTHROPIC_BASE_URL", mock.base_url())
        // The prompt first: `--allowedTools` takes every word after it as a value.
        .args(["-p", prompt])
        .args(extra);
    command
}

fn assert_ran(ran: &Ran, answer: &str) {
    assert!(
        ran.success && ran.stdout.contains(answer),
        "expected {answer:?} on stdout\nstdout:\n{}\nstderr:\n{}",
        ran.stdout,
        ran.stderr
    );
}

/// Side requests (no tools) get a title; the conversation gets the queue.
fn script(replies: impl IntoIterator<Item = MockReply>) -> MockScript {
    let mut script = MockScript::new().rule(MockRule::side_request("Scripted title"));
    script.replies.extend(replies);
    script
}

#[test]
fn codex_prints_a_scripted_answer() {
    let Some(bin) = find_cli("RLM_CODEX_BIN", "codex") else {
        return;
    };
    let mock = MockLlm::spawn_blocking_thread(script([MockReply::text("Scripted codex answer.")]))
        .unwrap();
    let scratch = scratch();
    let ran = run(codex(&bin, &mock, &[], "say hi"), &scratch);
    assert_ran(&ran, "Scripted codex answer.");
    let requests = mock.requests();
    let turn: Vec<_> = requests
        .iter()
        .filter(|r| r.api == Some(Api::Responses))
        .collect();
    assert_eq!(turn.len(), 1, "{requests:#?}");
    assert!(turn[0].stream());
    assert_eq!(turn[0].last_user_message().as_deref(), Some("say hi"));
    assert!(!turn[0].tool_names().is_empty());
}

/// With a model it has no metadata for, Codex offers plain function tools, among
/// them `exec_command` taking `{"cmd": "..."}`.
#[test]
fn codex_runs_exec_command_then_answers() {
    let Some(bin) = find_cli("RLM_CODEX_BIN", "codex") else {
        return;
    };
    let scratch = scratch();
    let target = scratch.work.join("from-codex.txt");
    let cmd = format!("echo hello > '{}'", target.display());
    let call = MockToolCall::new("exec_command", json!({"cmd": cmd})).with_id("call_write");
    let mock = MockLlm::spawn_blocking_thread(script([
        MockReply::tool_calls("", [call]),
        MockReply::text("Wrote the file."),
    ]))
    .unwrap();
    let ran = run(
        codex(&bin, &mock, &["-m", "rlm-mock-model"], "write the file"),
        &scratch,
    );
    assert_ran(&ran, "Wrote the file.");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hello\n");
    let requests = mock.requests();
    assert!(requests[0]
        .tool_names()
        .contains(&"exec_command".to_owned()));
    let last = requests.last().unwrap();
    let results = last.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].0, "call_write");
    assert!(results[0].1.contains("exited with code 0"), "{results:?}");
}

/// With its own default model, Codex offers one freeform tool `exec` (JavaScript
/// calling `tools.exec_command`), which the mock calls as a `custom_tool_call`.
#[test]
fn codex_runs_a_command_through_code_mode_exec_then_answers() {
    let Some(bin) = find_cli("RLM_CODEX_BIN", "codex") else {
        return;
    };
    let scratch = scratch();
    let target = scratch.work.join("from-exec.txt");
    let source = format!(
        "const r = await tools.exec_command({{cmd: {}}});\ntext(r.output);",
        json!(format!("echo hello > '{}'", target.display()))
    );
    let first_turn = RequestMatch::new()
        .api(Api::Responses)
        .tool("exec")
        .tool_results(false);
    let mock = MockLlm::spawn_blocking_thread(
        MockScript::new()
            .rule(MockRule::when(
                first_turn,
                MockReply::tool_calls("", [MockToolCall::new("exec", json!(source))]),
            ))
            .or_else("Ran it in code mode."),
    )
    .unwrap();
    let ran = run(codex(&bin, &mock, &[], "write the file"), &scratch);
    assert_ran(&ran, "Ran it in code mode.");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hello\n");
    let requests = mock.requests();
    assert!(
        requests[0].offers_custom_tool("exec"),
        "{:?}",
        requests[0].tool_names()
    );
    let results = requests.last().unwrap().tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].1.contains("Script completed"), "{results:?}");
}

#[test]
fn claude_prints_a_scripted_answer() {
    let Some(bin) = find_cli("RLM_CLAUDE_BIN", "claude") else {
        return;
    };
    let mock = MockLlm::spawn_blocking_thread(script([MockReply::text("Scripted claude answer.")]))
        .unwrap();
    let scratch = scratch();
    let ran = run(claude(&bin, &mock, &[], "say hi"), &scratch);
    assert_ran(&ran, "Scripted claude answer.");
    let requests = mock.requests();
    let turn: Vec<_> = requests
        .iter()
        .filter(|r| r.api == Some(Api::Anthropic) && !r.tool_names().is_empty())
        .collect();
    assert_eq!(turn.len(), 1, "{requests:#?}");
    assert!(turn[0].tool_names().contains(&"Bash".to_owned()));
    assert!(turn[0].last_user_message().unwrap().ends_with("say hi"));
}

/// Claude Code's `Bash` tool takes `{"command": "...", "description": "..."}`; a
/// redirect into the working directory needs `--permission-mode acceptEdits`.
#[test]
fn claude_runs_bash_then_answers() {
    let Some(bin) = find_cli("RLM_CLAUDE_BIN", "claude") else {
        return;
    };
    let scratch = scratch();
    let target = scratch.work.join("from-claude.txt");
    let command = format!("echo hello > '{}'", target.display());
    let call = MockToolCall::new(
        "Bash",
        json!({"command": command, "description": "Write a greeting to a file"}),
    );
    let mock = MockLlm::spawn_blocking_thread(script([
        MockReply::tool_calls("", [call]),
        MockReply::text("Wrote the file."),
    ]))
    .unwrap();
    let flags = [
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "Bash(echo:*)",
    ];
    let ran = run(claude(&bin, &mock, &flags, "write the file"), &scratch);
    assert_ran(&ran, "Wrote the file.");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hello\n");
    let details = mock.requests().last().unwrap().tool_result_details();
    assert_eq!(details.len(), 1, "{details:?}");
    assert!(!details[0].is_error, "{details:?}");
}

//! `rlm-orchestrate mcp` as a tool of Claude Code in print mode, with the commands of
//! `docs/agents.md` as written: `claude mcp add rlm -- rlm-orchestrate mcp …`, then `claude -p …
//! --allowedTools mcp__rlm__rlm_run`. One `mock-llm` plays both models: Claude's (on
//! Anthropic messages: it calls `rlm_run` on the log, then repeats what the tool
//! returned) and the run's (on chat completions: it counts the marked lines in code).
//! `claude -p` asks no one for permission, so without `--allowedTools` the call is
//! refused; the test shows both.
//!
//! Claude Code is found as in [`crate::real_agents`]; absent, the test says so and
//! passes, except under `CI=true`.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rlm_test_support::mock_llm::{
    MockLlm, MockLlmThread, MockReply, MockRule, MockScript, MockToolCall,
};
use serde_json::{json, Value};

use crate::real_agents::{all_text, tool_outputs, Cli};
use crate::real_cli_support::write_log;
use crate::support::{Sandbox, BIN};

/// The name Claude Code gives the tool `rlm_run` of the server added as `rlm`.
const TOOL: &str = "mcp__rlm__rlm_run";

/// The conversation in `body` has a call of the tool `name`.
fn called(body: &Value, name: &str) -> bool {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|message| {
            message["content"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|block| block["type"] == "tool_use" && block["name"] == name)
        })
}

/// The request offers the tool `name` itself (not deferred).
fn offered(body: &Value, name: &str) -> bool {
    body["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|t| t["name"] == name))
}

/// The mock: Claude's model calls `rlm_run` once, then answers with the tool's text;
/// the run's model counts the marked lines and answers with the count.
fn start_mock(log: &Path) -> MockLlmThread {
    let log = log.display().to_string();
    let script = MockScript::new()
        .rule(MockRule::function("claude's model", move |request| {
            // Claude Code defers MCP tools behind its ToolSearch tool: the model loads
            // the tool by name, then calls it, then answers with what it returned.
            let text = all_text(&request.body);
            if !text.contains(TOOL) || request.body["tools"].as_array().is_none() {
                return None;
            }
            let outputs = tool_outputs(&request.body);
            let reply = if called(&request.body, TOOL) {
                MockReply::text(format!(
                    "rlm_run returned: {}",
                    outputs.last().map_or("", String::as_str)
                ))
            } else if called(&request.body, "ToolSearch") || offered(&request.body, TOOL) {
                MockReply::tool_calls(
                    "",
                    [MockToolCall::new(
                        TOOL,
                        json!({"task": "How many lines are marked FAILURE-MARK?", "context_paths": [log]}),
                    )],
                )
            } else {
                MockReply::tool_calls(
                    "",
                    [MockToolCall::new(
                        "ToolSearch",
                        json!({"query": format!("select:{TOOL}"), "max_results": 5}),
                    )],
                )
            };
            Some(reply)
        }))
        .rule(MockRule::function("the rlm run", |request| {
            if !request.path.contains("/chat/completions") {
                return None;
            }
            let last = request.last_user_message().unwrap_or_default();
            Some(MockReply::text(if last.contains("COUNT=") {
                "FINAL_VAR(count)"
            } else {
                "```repl\ncount = str(sum(1 for line in context.splitlines() if 'level=error FAILURE-MARK' in line))\nprint('COUNT=', count)\n```"
            }))
        }));
    MockLlm::spawn_blocking_thread(script).unwrap()
}

/// The `claude` commands of `docs/agents.md`, split into words.
fn documented_commands() -> (Vec<String>, Vec<String>) {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/agents.md"))
            .unwrap();
    let lines = crate::agent_recipes::sh_lines(&readme);
    let find = |prefix: &str| {
        let line = lines
            .iter()
            .find(|line| line.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}…` command in docs/agents.md"));
        shell_words::split(line).unwrap()
    };
    (find("claude mcp add rlm -- "), find("claude -p "))
}

/// Longest a `claude` command may take before the test ends it and fails.
const BOUND: Duration = Duration::from_secs(90);

/// Runs `cmd` (its output into files under `dir`), ending its process group and failing
/// with what it printed and what the mock saw after [`BOUND`].
fn bounded(cmd: &mut Command, dir: &Path, mock: &MockLlmThread) -> Output {
    let out_path = dir.join("claude.out");
    let err_path = dir.join("claude.err");
    let mut child = cmd
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + BOUND;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            child.wait().unwrap();
            let paths: Vec<String> = mock
                .control()
                .requests()
                .iter()
                .map(|r| r.path.clone())
                .collect();
            panic!(
                "{cmd:?} did not end within {BOUND:?}; stdout: {}\nstderr: {}\nrequests: {paths:?}",
                std::fs::read_to_string(&out_path).unwrap_or_default(),
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: std::fs::read(&out_path).unwrap(),
        stderr: std::fs::read(&err_path).unwrap(),
    }
}

#[test]
fn claude_in_print_mode_calls_rlm_run_when_the_tool_is_allowed() {
    let Some(claude) = Cli::Claude.find() else {
        return;
    };
    let sb = Sandbox::new();
    let (log, _, marked) = write_log(&sb);
    let mock = start_mock(&log);
    let home = sb.root().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let path = format!(
        "{}:{}:{}",
        Path::new(BIN).parent().unwrap().display(),
        claude.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let control = mock.control();
    let command = |words: &[String]| {
        let mut cmd = Command::new(&words[0]);
        cmd.args(&words[1..])
            .current_dir(sb.root())
            .env("PATH", &path)
            .env("HOME", &home)
            .env("ANTHROPIC_API_KEY", "sk-ant-test")
            .env("ANTHROPIC_BASE_URL", control.base_url())
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("OPENAI_API_KEY", "sk-test")
            .env("RLM_BASE_URL", control.openai_base_url())
            .env("RLM_DATA_DIR", sb.data_dir())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        cmd
    };
    let (add, ask) = documented_commands();
    let added = bounded(&mut command(&add), sb.root(), &mock);
    assert!(
        added.status.success(),
        "{add:?}: {}",
        String::from_utf8_lossy(&added.stderr)
    );

    let out = bounded(&mut command(&ask), sb.root(), &mock);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{ask:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("rlm_run returned:") && stdout.contains(&marked.to_string()),
        "{ask:?} printed: {stdout}"
    );

    // Without --allowedTools, print mode refuses the call: no run starts.
    let runs = |mock: &MockLlmThread| {
        mock.control()
            .requests()
            .iter()
            .filter(|r| r.path.contains("/chat/completions"))
            .count()
    };
    let before = runs(&mock);
    assert!(before > 0);
    let at = ask.iter().position(|w| w == "--allowedTools").unwrap();
    let mut refused = ask.clone();
    refused.drain(at..at + 2);
    let out = bounded(&mut command(&refused), sb.root(), &mock);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(runs(&mock), before, "{refused:?} ran rlm: {stdout}");
    assert!(
        stdout.contains("rlm_run returned:"),
        "{refused:?}: {stdout}"
    );
}

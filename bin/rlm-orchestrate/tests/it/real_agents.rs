//! The agent presets end to end with the real agent CLIs: Claude Code (`--agent claude`)
//! and the Codex CLI (`--agent codex`) from npm, driven by `mock-llm` speaking their
//! wire formats (Anthropic messages, OpenAI Responses).
//!
//! The root run (on the mock's chat completions) splits a log into four chunks and fans
//! them out with `spawn_agents`. Each agent's "model" is the mock playing a model that
//! uses the CLI's own tools: it reads its chunk with the CLI's file or shell tool, counts
//! the marked lines in what the tool returned, and then either stores the count with the
//! `vars set` command its prompt gives (a second tool call) or prints it. So the counts
//! are right only if the CLI really read its input and, for stored answers, really ran
//! the command under its permission rules; nothing is answered from the prompt.
//!
//! The CLIs are found through `RLM_CLAUDE_BIN` / `RLM_CODEX_BIN`, `PATH`, or
//! `/opt/rlm-agents/node_modules/.bin` (where `.ci/run` installs them); a test whose
//! CLI is absent says so and passes, except under `CI=true`, where it fails.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rlm_test_support::mock_llm::{
    MockLlm, MockLlmThread, MockReply, MockRule, MockScript, MockToolCall, RecordedRequest,
};
use serde_json::{json, Value};

use crate::real_cli_support::{
    agent_results, find_cli, path_with_cli_dir, survivors, write_log, MARK, NPM_BIN_DIR,
};
use crate::support::{interrupt_and_wait, Sandbox, BIN};

/// Which agent CLI a test drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cli {
    Claude,
    Codex,
}

impl Cli {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Claude => "claude",
            Self::Codex => "codex",
        }
    }

    /// The CLI's executable, or `None` (with the reason printed) when it is absent.
    pub(crate) fn find(self) -> Option<PathBuf> {
        let variable = match self {
            Self::Claude => "RLM_CLAUDE_BIN",
            Self::Codex => "RLM_CODEX_BIN",
        };
        find_cli(
            self.name(),
            variable,
            &Path::new(NPM_BIN_DIR).join(self.name()),
        )
    }
}

/// Every string in a JSON value, in document order, joined by newlines: the text of a
/// request whatever its API's shape.
pub(crate) fn all_text(value: &Value) -> String {
    fn walk(value: &Value, out: &mut String) {
        match value {
            Value::String(text) => {
                out.push_str(text);
                out.push('\n');
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
            Value::Object(map) => map.values().for_each(|item| walk(item, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    walk(value, &mut out);
    out
}

/// What the tools returned so far in a conversation, oldest first: Anthropic
/// `tool_result` blocks and Responses `function_call_output` items.
pub(crate) fn tool_outputs(body: &Value) -> Vec<String> {
    let mut outputs = Vec::new();
    let messages = body.get("messages").and_then(Value::as_array);
    for message in messages.into_iter().flatten() {
        for block in message
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                outputs.push(all_text(block.get("content").unwrap_or(&Value::Null)));
            }
        }
    }
    let input = body.get("input").and_then(Value::as_array);
    for item in input.into_iter().flatten() {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
        if kind.ends_with("_call_output") {
            outputs.push(all_text(item.get("output").unwrap_or(&Value::Null)));
        }
    }
    outputs
}

/// What an agent's prompt tells it, read back from its first request.
#[derive(Debug)]
pub(crate) struct AgentPrompt {
    /// The plain-text file its chunk is in.
    input: String,
    /// The command line that stores its answer, up to the heredoc.
    store_command: String,
    /// Store its answer (else print it).
    store: bool,
}

impl AgentPrompt {
    pub(crate) fn read(text: &str) -> Option<Self> {
        let input = regex::Regex::new(r"read (/\S+) — plain UTF-8 text")
            .unwrap()
            .captures(text)?[1]
            .to_owned();
        let store_command = text
            .lines()
            .find(|line| {
                line.contains(" vars set sub-result-") && line.ends_with("<<'RLM_ANSWER'")
            })?
            .to_owned();
        Some(Self {
            input,
            store_command,
            store: text.contains("MODE=store"),
        })
    }
}

/// The mock playing each agent's model: read the input with the CLI's tool, count,
/// then store (a second tool call) or print.
fn agent_model(cli: Cli, request: &RecordedRequest) -> Option<MockReply> {
    let text = all_text(&request.body);
    let prompt = AgentPrompt::read(&text)?;
    let outputs = tool_outputs(&request.body);
    let count = |output: &str| output.lines().filter(|line| line.contains(MARK)).count();
    let reply = match (outputs.as_slice(), prompt.store) {
        ([], _) => MockReply::tool_calls("", [read_call(cli, &prompt.input)]),
        ([read], true) => {
            let command = format!("{}\n{}\nRLM_ANSWER", prompt.store_command, count(read));
            MockReply::tool_calls("", [shell_call(cli, &command)])
        }
        ([read], false) => MockReply::text(count(read).to_string()),
        ([_, stored], true) => MockReply::text(if stored.contains("scope") {
            "Stored."
        } else {
            "Could not store."
        }),
        _ => MockReply::text("lost"),
    };
    Some(reply)
}

/// A tool call reading a whole file with the CLI's own tool.
fn read_call(cli: Cli, path: &str) -> MockToolCall {
    match cli {
        Cli::Claude => MockToolCall::new("Read", json!({ "file_path": path })),
        Cli::Codex => shell_call(cli, &format!("cat {path}")),
    }
}

/// A tool call running `command` in the CLI's shell tool.
pub(crate) fn shell_call(cli: Cli, command: &str) -> MockToolCall {
    match cli {
        Cli::Claude => MockToolCall::new(
            "Bash",
            json!({ "command": command, "description": "store the answer" }),
        ),
        Cli::Codex => MockToolCall::new(
            "exec_command",
            json!({ "cmd": command, "yield_time_ms": 10000 }),
        ),
    }
}

/// The root model: split the context in four, fan out, add up.
pub(crate) fn root_model(request: &RecordedRequest) -> Option<MockReply> {
    if !request.path.contains("/chat/completions") {
        return None;
    }
    let last = request.last_user_message().unwrap_or_default();
    if last.contains("TOTAL=") {
        return Some(MockReply::text("FINAL_VAR(total)"));
    }
    Some(MockReply::text(ROOT_CODE))
}

/// The root's code: four chunks in the store, one agent each, the counts added up.
const ROOT_CODE: &str = r#"```repl
lines = context.splitlines()
n = len(lines)
for i in range(4):
    store.set(f'chunk-{i}', '\n'.join(lines[i * n // 4:(i + 1) * n // 4]) + '\n')
modes = ['store', 'stdout', 'store', 'stdout']
answers = spawn_agents([(f'Count the lines marked FAILURE-MARK in your chunk. MODE={modes[i]}', [f'chunk-{i}']) for i in range(4)])
print('ANSWERS=', answers)
total = sum(int(str(a).strip()) for a in answers)
print('TOTAL=', total)
```"#;

/// The mock: the root on chat completions, each agent on the CLI's API.
pub(crate) fn start_mock(cli: Cli) -> MockLlmThread {
    let script = MockScript::new()
        .rule(MockRule::function("the root run", root_model))
        .rule(MockRule::function("an agent", move |request| {
            agent_model(cli, request)
        }));
    MockLlm::spawn_blocking_thread(script).unwrap()
}

/// `rlm-orchestrate run` with `--agent <cli>`, the CLI's directory on `PATH` and its
/// API pointed at the mock.
pub(crate) fn agent_run(
    sb: &Sandbox,
    mock: &MockLlmThread,
    cli: Cli,
    exe: &Path,
    extra: &[&str],
) -> std::process::Command {
    let (log, _, _) = write_log(sb);
    let control = mock.control();
    let path = path_with_cli_dir(exe);
    let mut cmd = std::process::Command::new(BIN);
    cmd.current_dir(sb.root())
        .env_remove("RLM_DATA_DIR")
        .env_remove("RUST_LOG")
        .env_remove("OPENAI_API_KEY")
        .env("PATH", path)
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "How many lines are marked?", "--context"])
        .arg(&log)
        .args([
            "--base-url",
            &control.openai_base_url(),
            "--model",
            "root-model",
        ])
        .args([
            "--agent",
            cli.name(),
            "--agent-timeout",
            "120",
            "--max-parallel",
            "4",
        ])
        .args(["--retry-base-delay-ms", "5", "--json"])
        .args(extra);
    match cli {
        Cli::Claude => cmd
            .env("ANTHROPIC_API_KEY", "sk-ant-test")
            .env("ANTHROPIC_BASE_URL", control.base_url()),
        Cli::Codex => cmd
            .env("OPENAI_API_KEY", "sk-test")
            .env("OPENAI_BASE_URL", control.openai_base_url()),
    };
    cmd
}

/// Runs a four-agent fan-out through `cli`'s preset and checks the answer, the stored
/// and printed results, and that nothing is left running.
fn fan_out(cli: Cli, sandbox_on: bool) {
    let Some(exe) = cli.find() else { return };
    let sb = Sandbox::new();
    let mock = start_mock(cli);
    let (_, _, marked) = write_log(&sb);
    let sandbox = if sandbox_on { "on" } else { "off" };
    let out = agent_run(&sb, &mock, cli, &exe, &["--agent-sandbox", sandbox])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        result["answer"],
        marked.to_string(),
        "the agents answered: {}",
        agent_results(&sb)
    );
    assert_eq!(result["sub_agents"], 4);
    // Two agents stored their count with `vars set` (the tool returned the variable's
    // description), two printed it; every result is a sound variable of the parent.
    let requests = mock.control().requests();
    let stored = requests
        .iter()
        .filter(|r| {
            tool_outputs(&r.body)
                .iter()
                .any(|o| o.contains("sub-result-") && o.contains(", scope agent:"))
        })
        .count();
    assert!(
        stored >= 2,
        "the agents did not store their results themselves"
    );
    let vars: Vec<Value> = serde_json::from_slice(
        &sb.vars(&["list", "--json"])
            .assert()
            .success()
            .get_output()
            .stdout,
    )
    .unwrap();
    let results: Vec<&Value> = vars
        .iter()
        .filter(|v| v["key"].as_str().unwrap().starts_with("sub-result-"))
        .collect();
    assert_eq!(results.len(), 4, "{vars:#?}");
    for var in results {
        assert!(
            var["scope"].as_str().unwrap().starts_with("agent:"),
            "{var}"
        );
    }
    assert!(
        survivors(&sb.data_dir()).is_empty(),
        "processes left behind"
    );
}

#[test]
fn claude_fans_out_four_agents_that_store_or_print_their_answers() {
    fan_out(Cli::Claude, false);
}

#[test]
fn claude_fans_out_under_the_agent_sandbox() {
    fan_out(Cli::Claude, true);
}

#[test]
fn codex_fans_out_four_agents_that_store_or_print_their_answers() {
    fan_out(Cli::Codex, false);
}

#[test]
fn codex_fans_out_under_the_agent_sandbox() {
    fan_out(Cli::Codex, true);
}

/// The mock with agents whose model takes two minutes to answer (longer than any test
/// waits).
fn start_hanging_mock() -> MockLlmThread {
    let script = MockScript::new()
        .rule(MockRule::function("the root run", root_model))
        .rule(MockRule::function("a model that hangs", |request| {
            AgentPrompt::read(&all_text(&request.body))
                .map(|_| MockReply::text("late").with_delay(Duration::from_secs(120)))
        }));
    MockLlm::spawn_blocking_thread(script).unwrap()
}

/// An agent whose model never answers is ended at `--agent-timeout` with its whole
/// process tree, and the run goes on.
fn hanging_agent_times_out(cli: Cli) {
    let Some(exe) = cli.find() else { return };
    let sb = Sandbox::new();
    let mock = start_hanging_mock();
    let started = Instant::now();
    let out = agent_run(
        &sb,
        &mock,
        cli,
        &exe,
        &["--agent-timeout", "5", "--max-iterations", "2"],
    )
    .stdin(Stdio::null())
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        started.elapsed() < Duration::from_secs(100),
        "the timeout did not hold"
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let error = sb.vars(&["list", "--json"]).assert().success();
    let vars: Vec<Value> = serde_json::from_slice(&error.get_output().stdout).unwrap();
    let timed_out = vars
        .iter()
        .filter(|v| v["key"].as_str().unwrap().starts_with("sub-result-"))
        .count();
    assert_eq!(timed_out, 4, "{result:#}\n{stderr}");
    assert!(
        survivors(&sb.data_dir()).is_empty(),
        "processes left behind"
    );
}

#[test]
fn a_hanging_claude_agent_is_timed_out_with_no_survivors() {
    hanging_agent_times_out(Cli::Claude);
}

#[test]
fn a_hanging_codex_agent_is_timed_out_with_no_survivors() {
    hanging_agent_times_out(Cli::Codex);
}

/// Ctrl-C while the agents run: the run ends with 130 and no agent survives.
fn ctrl_c_ends_every_agent(cli: Cli) {
    let Some(exe) = cli.find() else { return };
    let sb = Sandbox::new();
    let mock = start_hanging_mock();
    let mut child = agent_run(&sb, &mock, cli, &exe, &[])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait (bounded) until all four agents have sent their first request.
    let deadline = Instant::now() + Duration::from_secs(90);
    while Instant::now() < deadline {
        let asking = mock
            .control()
            .requests()
            .iter()
            .filter(|r| AgentPrompt::read(&all_text(&r.body)).is_some())
            .count();
        if asking >= 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = interrupt_and_wait(&mut child);
    assert_eq!(status.code(), Some(130));
    assert!(
        survivors(&sb.data_dir()).is_empty(),
        "processes left behind"
    );
}

#[test]
fn ctrl_c_ends_every_claude_agent() {
    ctrl_c_ends_every_agent(Cli::Claude);
}

#[test]
fn ctrl_c_ends_every_codex_agent() {
    ctrl_c_ends_every_agent(Cli::Codex);
}

/// `--agent-network off`: without an allowed endpoint a confined agent is ended at its
/// first connection with a message naming the network; with its model's port allowed
/// (`--agent-allow-connect`) the fan-out works.
fn network_off(cli: Cli) {
    let Some(exe) = cli.find() else { return };
    let sb = Sandbox::new();
    let mock = start_mock(cli);
    let started = Instant::now();
    let out = agent_run(
        &sb,
        &mock,
        cli,
        &exe,
        &[
            "--agent-sandbox",
            "on",
            "--agent-network",
            "off",
            "--max-iterations",
            "2",
        ],
    )
    .stdin(Stdio::null())
    .output()
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(100),
        "a denied connection waited for the timeout"
    );
    let results = agent_results(&sb);
    assert!(
        results.contains("tried to open a network connection, which --agent-network off denies")
            && results.contains("--agent-allow-connect"),
        "{results}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        survivors(&sb.data_dir()).is_empty(),
        "processes left behind"
    );

    let sb = Sandbox::new();
    let (_, _, marked) = write_log(&sb);
    let endpoint = mock.control().base_url();
    let out = agent_run(
        &sb,
        &mock,
        cli,
        &exe,
        &[
            "--agent-sandbox",
            "on",
            "--agent-network",
            "off",
            "--agent-allow-connect",
            &endpoint,
        ],
    )
    .stdin(Stdio::null())
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        result["answer"],
        marked.to_string(),
        "the agents answered: {}",
        agent_results(&sb)
    );
}

#[test]
fn claude_with_the_network_off_reaches_only_an_allowed_endpoint() {
    network_off(Cli::Claude);
}

#[test]
fn codex_with_the_network_off_reaches_only_an_allowed_endpoint() {
    network_off(Cli::Codex);
}

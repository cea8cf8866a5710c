//! What the real agent CLIs do on their own, beyond answering: which of the user's own
//! configuration they read (the MCP servers it names) and where Codex's commands may
//! write. Claude Code and the Codex CLI from npm, driven by `mock-llm`, as in
//! [`crate::real_agents`] (whose helpers these tests use); skipped with the reason when
//! a CLI is absent, except under `CI=true`.
//!
//! Each run gets a `HOME` of its own (under the test's scratch directory), holding the
//! user config the test writes: an MCP server that, if a CLI starts it, creates a
//! marker file and exits.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockRule, MockScript};
use serde_json::Value;

use crate::real_agents::{agent_run, shell_call, start_mock, tool_outputs, Cli};
use crate::real_cli_support::{agent_results, survivors, write_log};
use crate::support::Sandbox;

/// Writes `home`'s config of `cli`, naming one MCP server (`sh -c 'touch MARKER'`),
/// and returns the marker's path.
fn user_config_with_an_mcp_server(cli: Cli, home: &Path) -> PathBuf {
    let marker = home.join("mcp-server-started");
    let touch = format!("touch {}", marker.display());
    match cli {
        Cli::Claude => {
            let config = serde_json::json!({
                "mcpServers": {"marker": {"type": "stdio", "command": "sh", "args": ["-c", touch]}}
            });
            std::fs::create_dir_all(home).unwrap();
            std::fs::write(home.join(".claude.json"), config.to_string()).unwrap();
        }
        Cli::Codex => {
            std::fs::create_dir_all(home.join(".codex")).unwrap();
            std::fs::write(
                home.join(".codex/config.toml"),
                format!("[mcp_servers.marker]\ncommand = \"sh\"\nargs = [\"-c\", \"{touch}\"]\n"),
            )
            .unwrap();
        }
    }
    marker
}

/// A four-agent fan-out through `cli`'s preset with `HOME` holding a user config that
/// names an MCP server: started only with `--agent-user-config`.
fn user_mcp_servers(cli: Cli) {
    let Some(exe) = cli.find() else { return };
    for user_config in [false, true] {
        let sb = Sandbox::new();
        let home = sb.root().join("home");
        let marker = user_config_with_an_mcp_server(cli, &home);
        let mock = start_mock(cli);
        let (_, _, marked) = write_log(&sb);
        let extra: &[&str] = if user_config {
            &["--agent-user-config"]
        } else {
            &[]
        };
        let out = agent_run(&sb, &mock, cli, &exe, extra)
            .env("HOME", &home)
            .env_remove("RLM_AGENT_USER_CONFIG")
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
        assert_eq!(
            marker.exists(),
            user_config,
            "{}: the user's MCP server {} (--agent-user-config: {user_config})",
            cli.name(),
            if marker.exists() {
                "was started"
            } else {
                "was not started"
            }
        );
        assert!(
            survivors(&sb.data_dir()).is_empty(),
            "processes left behind"
        );
    }
}

#[test]
fn claude_agents_start_no_user_mcp_server_unless_asked() {
    user_mcp_servers(Cli::Claude);
}

#[test]
fn codex_agents_start_no_user_mcp_server_unless_asked() {
    user_mcp_servers(Cli::Codex);
}

/// The task of the agent that tries to write everywhere.
const PROBE_TASK: &str = "Probe where you may write.";

/// The root: one agent, then its answer as the run's.
fn probe_root(request: &rlm_test_support::mock_llm::RecordedRequest) -> Option<MockReply> {
    if !request.path.contains("/chat/completions") {
        return None;
    }
    let last = request.last_user_message().unwrap_or_default();
    Some(MockReply::text(if last.contains("AGENT=") {
        "FINAL_VAR(answer)".to_owned()
    } else {
        format!("```repl\nanswer = spawn_agent('{PROBE_TASK}', [])\nprint('AGENT=', answer)\n```")
    }))
}

/// The mock: the root on chat completions; the Codex agent runs `command` with its
/// shell tool, then answers with what the tool returned.
fn start_probe_mock(command: String) -> MockLlmThread {
    let script = MockScript::new()
        .rule(MockRule::function("the root run", probe_root))
        .rule(MockRule::function("the probing agent", move |request| {
            if !request.path.contains("/responses") {
                return None;
            }
            let outputs = tool_outputs(&request.body);
            Some(match outputs.first() {
                None => MockReply::tool_calls("", [shell_call(Cli::Codex, &command)]),
                Some(output) => MockReply::text(format!("TOOL OUTPUT: {output}")),
            })
        }));
    MockLlm::spawn_blocking_thread(script).unwrap()
}

/// The Codex preset's commands write their working directory (the agent's temporary
/// directory) and nothing else of `/tmp` or `$TMPDIR`.
#[test]
fn codex_commands_write_only_the_agents_directories() {
    let Some(exe) = Cli::Codex.find() else { return };
    let sb = Sandbox::new();
    let tmpdir = sb.root().join("tmpdir");
    std::fs::create_dir_all(&tmpdir).unwrap();
    let in_slash_tmp = PathBuf::from(format!(
        "/tmp/rlm-codex-probe-{}-{}",
        std::process::id(),
        sb.root().file_name().unwrap().to_string_lossy()
    ));
    let in_tmpdir = tmpdir.join("codex-probe");
    let command = format!(
        "echo inside > inside.txt && echo WROTE=$(cat inside.txt); echo out > {}; echo out > {}; echo done",
        in_slash_tmp.display(),
        in_tmpdir.display()
    );
    let mock = start_probe_mock(command);
    let out = agent_run(&sb, &mock, Cli::Codex, &exe, &["--max-iterations", "3"])
        .env("HOME", sb.root().join("home"))
        .env("TMPDIR", &tmpdir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let wrote_outside = [&in_slash_tmp, &in_tmpdir].map(|path| path.exists());
    let _ = std::fs::remove_file(&in_slash_tmp);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let answer = result["answer"].as_str().unwrap_or_default();
    assert!(
        answer.contains("WROTE=inside"),
        "its working directory is writable: {answer}\n{}",
        agent_results(&sb)
    );
    assert_eq!(
        wrote_outside,
        [false, false],
        "a command wrote {} / {}: {answer}",
        in_slash_tmp.display(),
        in_tmpdir.display()
    );
    assert!(
        survivors(&sb.data_dir()).is_empty(),
        "processes left behind"
    );
}

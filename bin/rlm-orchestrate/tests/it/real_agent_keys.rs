//! Issue 53, item 3: the real Claude Code CLI (`--agent claude`) given a key its API
//! refuses (the mock answers every Anthropic request with a 401) fails at once, not
//! after minutes of silent retries, and the agent's result says the key was refused
//! and names the variable to check. The user's own `CLAUDE_CODE_MAX_RETRIES` wins.
//!
//! The CLI is found as in `real_agents` (skipped, with the reason, when absent outside
//! `CI=true`).

use std::path::Path;
use std::process::Stdio;

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockRule, MockScript};
use serde_json::Value;

use crate::real_cli_support::{find_cli, path_with_cli_dir, survivors, NPM_BIN_DIR};
use crate::support::{Sandbox, BIN};

/// Anthropic's answer to a key it does not know.
const REFUSED: &str =
    r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;

/// The root (chat completions) starts one agent; every Anthropic request is refused.
fn refusing_mock() -> MockLlmThread {
    let script = MockScript::new()
        .rule(MockRule::function("the agent's API", |request| {
            request
                .path
                .contains("/v1/messages")
                .then(|| MockReply::error(401, REFUSED))
        }))
        .rule(MockRule::function("the root run", |request| {
            let last = request.last_user_message().unwrap_or_default();
            Some(if last.contains("agent said") {
                MockReply::text("FINAL(done)")
            } else {
                MockReply::text(
                    "```repl\nr = spawn_agent('Say hello.')\nprint('agent said', r)\n```",
                )
            })
        }));
    MockLlm::spawn_blocking_thread(script).unwrap()
}

/// Runs one claude agent against the refusing mock (`retries`: the user's
/// `CLAUDE_CODE_MAX_RETRIES`, if any); returns its result and the Anthropic requests
/// it made.
fn refused_run(exe: &Path, retries: Option<&str>) -> (Value, usize) {
    let sb = Sandbox::new();
    let mock = refusing_mock();
    let control = mock.control();
    let context = sb.file("context.txt", "a context\n");
    let path = path_with_cli_dir(exe);
    let mut cmd = std::process::Command::new(BIN);
    cmd.current_dir(sb.root())
        .env_remove("RLM_DATA_DIR")
        .env_remove("RUST_LOG")
        .env_remove("OPENAI_API_KEY")
        .env_remove("CLAUDE_CODE_MAX_RETRIES")
        .env("PATH", path)
        .env("ANTHROPIC_API_KEY", "sk-ant-refused-by-the-mock-0123456789")
        .env("ANTHROPIC_BASE_URL", control.base_url())
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "Ask an agent.", "--context"])
        .arg(&context)
        .args(["--base-url", &control.openai_base_url(), "--model", "root"])
        // Without a small retry count Claude Code retries the 401 for minutes: the
        // agent would meet this timeout instead of failing.
        .args(["--agent", "claude", "--agent-timeout", "40"])
        .args(["--retry-base-delay-ms", "5", "--agent-sandbox", "on"]);
    if let Some(retries) = retries {
        cmd.env("CLAUDE_CODE_MAX_RETRIES", retries);
    }
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    let list: Vec<Value> =
        serde_json::from_slice(&sb.vars(&["list", "--json"]).output().unwrap().stdout).unwrap();
    let key = list
        .iter()
        .filter_map(|v| v["key"].as_str())
        .find(|key| key.starts_with("sub-result-"))
        .unwrap_or_else(|| panic!("no agent result: {stderr}"))
        .to_owned();
    let result: Value = serde_json::from_slice(&sb.get(&key)).unwrap();
    assert!(
        survivors(&sb.data_dir()).is_empty(),
        "processes left behind"
    );
    let asked = control
        .requests()
        .iter()
        .filter(|r| r.path.contains("/v1/messages"))
        .count();
    (result, asked)
}

/// Seen failing before the fix: the agent retried the 401 until `--agent-timeout`
/// ended it, and its result said only that it timed out.
#[test]
fn a_refused_key_fails_the_claude_agent_at_once_and_names_the_key() {
    let Some(exe) = find_cli(
        "claude",
        "RLM_CLAUDE_BIN",
        &Path::new(NPM_BIN_DIR).join("claude"),
    ) else {
        return;
    };
    let (result, asked) = refused_run(&exe, None);
    assert_eq!(result["status"], "error", "{result}");
    assert!(result.get("timed_out").is_none(), "{result}");
    let error = result["error"].as_str().unwrap();
    assert!(error.contains("refused its key"), "{result}");
    assert!(error.contains("ANTHROPIC_API_KEY (set)"), "{result}");
    assert_eq!(asked, 2, "one try and one retry: {result}");

    // The user's own retry count wins over the preset's.
    let (result, asked) = refused_run(&exe, Some("0"));
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .contains("refused its key"),
        "{result}"
    );
    assert_eq!(asked, 1, "{result}");
}

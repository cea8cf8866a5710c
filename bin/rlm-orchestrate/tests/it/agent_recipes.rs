//! The `--agent-cmd` recipes the docs give, run as written: every `rlm-orchestrate run`
//! line of `scripts/agents/README.md`, and the guide's confinement example, each in a
//! directory holding a copy of `scripts/agents/` (so its relative paths mean what they
//! say) with the root model played by `mock-llm`: it hands a log to one agent and
//! answers with what the agent said.

use std::path::{Path, PathBuf};

use rlm_test_support::mock_llm::{
    MockLlm, MockLlmThread, MockReply, MockRule, MockScript, RecordedRequest,
};
use serde_json::Value;

use crate::real_cli_support::{agent_results, write_log, MARK};
use crate::support::{Sandbox, BIN};

/// The task the root gives its agent.
const TASK: &str = "Count the failures. pattern: FAILURE-MARK";

/// The repository's root.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The root: the context (a file, or a directory's files) in the store as `log`, one
/// agent on it, the agent's answer as the run's.
fn root_model(request: &RecordedRequest) -> Option<MockReply> {
    let last = request.last_user_message().unwrap_or_default();
    Some(MockReply::text(if last.contains("AGENT=") {
        "FINAL_VAR(answer)".to_owned()
    } else {
        format!(
            "```repl\ntext = context if isinstance(context, str) else '\\n'.join(context)\nstore.set('log', text)\nanswer = spawn_agent('{TASK}', ['log'])\nprint('AGENT=', answer)\n```"
        )
    }))
}

fn start_mock() -> MockLlmThread {
    let script = MockScript::new().rule(MockRule::function("the root run", root_model));
    MockLlm::spawn_blocking_thread(script).unwrap()
}

/// The `rlm-orchestrate run …` commands of a Markdown text's `sh` blocks.
fn run_commands(markdown: &str) -> Vec<String> {
    sh_lines(markdown)
        .into_iter()
        .filter(|command| command.starts_with("rlm-orchestrate run "))
        .collect()
}

/// The commands of a Markdown text's `sh` blocks: a line ending in `\` joined with the
/// next, a trailing `# comment` dropped, empty lines skipped.
pub fn sh_lines(markdown: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_sh = line == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let line = match line.find("  #") {
            Some(at) => &line[..at],
            None => line,
        };
        let (line, continued) = match line.trim_end().strip_suffix('\\') {
            Some(head) => (head.trim_end(), true),
            None => (line.trim_end(), false),
        };
        pending.push_str(line.trim_start());
        pending.push(' ');
        if !continued {
            let command = pending.trim().to_owned();
            if !command.is_empty() {
                commands.push(command);
            }
            pending.clear();
        }
    }
    commands
}

/// Runs `command` (a documented `rlm-orchestrate run …` line, as written) in a fresh
/// directory holding `scripts/agents/`, `app.log` and `repo/app.log`, the model pointed
/// at the mock; returns the answer, after checking the agent read the log.
fn run_recipe(command: &str) -> String {
    let sb = Sandbox::new();
    let scripts = sb.root().join("scripts/agents");
    std::fs::create_dir_all(&scripts).unwrap();
    for script in ["grep-agent.sh", "echo-agent.sh"] {
        std::fs::copy(
            repo_root().join("scripts/agents").join(script),
            scripts.join(script),
        )
        .unwrap();
    }
    let (log, text, _) = write_log(&sb);
    std::fs::create_dir_all(sb.root().join("repo")).unwrap();
    std::fs::copy(&log, sb.root().join("repo/app.log")).unwrap();
    let mock = start_mock();
    let words = shell_words::split(command).unwrap();
    assert_eq!(words[0], "rlm-orchestrate", "{command}");
    let out = std::process::Command::new(BIN)
        .current_dir(sb.root())
        .env_remove("RLM_DATA_DIR")
        .env_remove("RUST_LOG")
        .env("OPENAI_API_KEY", "sk-test")
        .args(&words[1..])
        .args(["--base-url", &mock.control().openai_base_url()])
        .args(["--model", "root-model", "--json"])
        .arg("--data-dir")
        .arg(sb.data_dir())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{command}: {}: {stderr}", out.status);
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let answer = result["answer"].as_str().unwrap_or_default().to_owned();
    assert_eq!(result["sub_agents"], 1, "{command}: {result:#}");
    assert!(
        !answer.contains("\"error\""),
        "{command}: the agent failed: {answer}\n{}",
        agent_results(&sb)
    );
    let marked = text.lines().filter(|line| line.contains(MARK)).count();
    if command.contains("grep-agent.sh") {
        assert!(
            answer.starts_with(&format!("{marked} matching lines for pattern")),
            "{command}: {answer}"
        );
    } else {
        assert_eq!(answer.trim(), TASK, "{command}");
    }
    answer
}

/// Every `rlm-orchestrate run` recipe of `scripts/agents/README.md`, sandboxed or not.
#[test]
fn every_recipe_of_the_agents_readme_runs_as_written() {
    let readme = std::fs::read_to_string(repo_root().join("scripts/agents/README.md")).unwrap();
    let commands = run_commands(&readme);
    assert!(commands.len() >= 3, "{commands:?}");
    assert!(
        commands.iter().any(|c| c.contains("--agent-sandbox on")),
        "{commands:?}"
    );
    for command in commands {
        run_recipe(&command);
    }
}

/// The guide's confinement example: a relative script path under `--agent-sandbox on`
/// (the agent works in its temporary directory) still names the script.
#[test]
fn the_guides_confinement_example_runs_as_written() {
    let guide = std::fs::read_to_string(repo_root().join("docs/guide.md")).unwrap();
    let command = run_commands(&guide)
        .into_iter()
        .find(|c| c.contains("--agent-sandbox on") && c.contains("grep-agent.sh"))
        .expect("the guide's confinement example");
    assert!(
        command.contains("'sh scripts/agents/grep-agent.sh {prompt_file}'"),
        "{command}"
    );
    run_recipe(&command);
}

#[test]
fn recipes_are_read_from_sh_blocks_with_continuations_and_comments() {
    let text = "x\n```sh\nrlm-orchestrate run \"a b\" --x \\\n    --y   # note\nls\n```\n```text\nrlm-orchestrate run no\n```\n";
    assert_eq!(run_commands(text), ["rlm-orchestrate run \"a b\" --x --y"]);
}

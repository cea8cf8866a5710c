//! A task handed to a child process never goes on its command line: a nested run
//! (`sub_rlm`) reads its query from the spec file its parent wrote, and an external
//! agent (`--agent-cmd` with `{prompt_file}` or stdin) from a file or its stdin. So a
//! 200 KB task works (one argument may hold at most 128 KiB) and `ps` never shows it.

use std::sync::{Arc, Mutex};

use rlm_test_support::mock_llm::{MockLlm, MockReply, MockRule, MockScript};

use crate::subagents::run_json;
use crate::support::Sandbox;

/// Marks the start of the long task, so it can be looked for anywhere.
const MARKER: &str = "LONG-TASK-MARKER";

/// Bytes of the long task.
const TASK_BYTES: usize = 200_000;

/// The command lines of running processes whose arguments contain `needle`.
fn command_lines_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue; // gone, or not a process
        };
        let line = String::from_utf8_lossy(&raw).replace('\0', " ");
        if line.contains(needle) {
            found.push(line);
        }
    }
    found
}

#[test]
fn a_200_kb_sub_rlm_query_reaches_the_child_and_stays_off_its_command_line() {
    let sb = Sandbox::new();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let recorder = Arc::clone(&seen);
    let script = MockScript::new()
        // The child's turn: while it waits for this answer, its command line is in /proc.
        .rule(MockRule::function("the child's request", move |request| {
            if request.model() != Some("sub-model") {
                return None;
            }
            recorder
                .lock()
                .unwrap()
                .extend(command_lines_with("--child-spec"));
            let message = request.last_user_message().unwrap_or_default();
            let whole = message.contains(MARKER) && message.contains(&"y".repeat(TASK_BYTES));
            Some(MockReply::text(format!(
                "FINAL(child got the whole task: {whole})"
            )))
        }))
        .then(MockReply::text(format!(
            "```repl\nanswer = sub_rlm('{MARKER} ' + 'y' * {TASK_BYTES})\nprint(answer)\n```"
        )))
        .then(MockReply::text("FINAL_VAR(answer)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let context = sb.file("c.txt", "a small context");
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "delegate a long task",
        // A sub-model whose window takes the 200 KB task (else the child refuses it,
        // naming the sizes, before asking anything).
        &[
            "--context",
            context.to_str().unwrap(),
            "--sub-context-window",
            "1000000",
        ],
    );
    assert_eq!(
        result["answer"], "child got the whole task: true",
        "{result}"
    );
    assert_eq!(result["sub_agents"], 1);
    let seen = seen.lock().unwrap();
    assert!(!seen.is_empty(), "no child process was seen while it ran");
    for line in seen.iter() {
        assert!(
            !line.contains(MARKER),
            "the task is on a command line: {line:.200}"
        );
        assert!(line.len() < 4096, "a long command line: {line:.200}");
    }
}

/// An agent that reports how long its arguments are, whether the task is among them,
/// and how long the prompt it read (from its file or stdin) is.
const ARGV_AGENT: &str = r#"#!/bin/sh
args="$*"
case "$args" in *LONG-TASK-MARKER*) in_args=yes ;; *) in_args=no ;; esac
if [ $# -ge 1 ]; then prompt=$(cat "$1"); else prompt=$(cat); fi
case "$prompt" in *LONG-TASK-MARKER*) in_prompt=yes ;; *) in_prompt=no ;; esac
echo "args=${#args} task-in-args=$in_args task-in-prompt=$in_prompt"
"#;

#[test]
fn external_agents_get_a_200_kb_task_from_a_file_or_stdin_not_argv() {
    let sb = Sandbox::new();
    let agent = sb.file("argv-agent.sh", ARGV_AGENT);
    let agent = agent.to_str().unwrap();
    for template in [format!("sh {agent} {{prompt_file}}"), format!("sh {agent}")] {
        let script = MockScript::new()
            .then(MockReply::text(format!(
                "```repl\nout = spawn_agent('{MARKER} ' + 'y' * {TASK_BYTES})\nprint(out)\n```"
            )))
            .then(MockReply::text("FINAL_VAR(out)"));
        let mock = MockLlm::spawn_blocking_thread(script).unwrap();
        let result = run_json(
            &sb,
            &mock.control().openai_base_url(),
            "delegate a long task to an agent",
            &["--agent-cmd", &template],
        );
        let answer = result["answer"].as_str().unwrap();
        assert!(
            answer.contains("task-in-args=no task-in-prompt=yes"),
            "{template}: {answer}"
        );
        let args_len: usize = answer
            .trim_start_matches("args=")
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(args_len < 4096, "{template}: {answer}");
    }
}

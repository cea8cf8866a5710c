//! `sub_rlm_parallel([(query, context), …])` in Python and JavaScript: nested runs at
//! once (at most `--max-parallel`), answers in the order asked.

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockRule, MockScript};
use serde_json::Value;

use crate::support::Sandbox;

/// The root's two replies; each child answers by a rule matching its task.
fn mock(code: &str) -> MockLlmThread {
    MockLlm::spawn_blocking_thread(
        MockScript::replies([MockReply::text(code), MockReply::text("FINAL_VAR(answers)")])
            .rule(MockRule::contains(
                "Task: task-alpha",
                MockReply::text("FINAL(alpha-answer)"),
            ))
            .rule(MockRule::contains(
                "Task: task-beta",
                MockReply::text("FINAL(beta-answer)"),
            )),
    )
    .unwrap()
}

/// The kinds of the root run's sub-agent events, in order.
fn agent_events(sb: &Sandbox, run_id: &str) -> Vec<String> {
    let events =
        std::fs::read_to_string(sb.data_dir().join("runs").join(run_id).join("events.jsonl"))
            .unwrap();
    events
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter_map(|event| event["kind"].as_str().map(str::to_owned))
        .filter(|kind| kind.starts_with("sub_agent"))
        .collect()
}

fn run(sb: &Sandbox, mock: &MockLlmThread, env: &str, max_parallel: &str) -> Value {
    let out = sb
        .bare()
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "fan out", "--model", "mock", "--json", "--env", env])
        .args(["--max-parallel", max_parallel, "--base-url"])
        .arg(mock.control().openai_base_url())
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

#[test]
fn nested_runs_in_parallel_answer_in_order_in_python_and_javascript() {
    let python = "```repl\nanswers = sub_rlm_parallel([('task-alpha', 'context A'), ('task-beta', 'context B')])\nprint(answers)\n```";
    let js = "```repl\nvar answers = await sub_rlm_parallel([['task-alpha', 'context A'], ['task-beta', 'context B']])\nconsole.log(answers)\n```";
    for (env, code) in [("python", python), ("js", js)] {
        for (max_parallel, overlapping) in [("2", true), ("1", false)] {
            let sb = Sandbox::new();
            let mock = mock(code);
            let result = run(&sb, &mock, env, max_parallel);
            let answer = result["answer"].as_str().unwrap();
            assert!(
                answer.contains("alpha-answer") && answer.contains("beta-answer"),
                "{env}: {answer}"
            );
            assert!(
                answer.find("alpha-answer") < answer.find("beta-answer"),
                "{env}: in order: {answer}"
            );
            let kinds = agent_events(&sb, result["run_id"].as_str().unwrap());
            let expected: &[&str] = if overlapping {
                &[
                    "sub_agent_spawned",
                    "sub_agent_spawned",
                    "sub_agent_finished",
                    "sub_agent_finished",
                ]
            } else {
                &[
                    "sub_agent_spawned",
                    "sub_agent_finished",
                    "sub_agent_spawned",
                    "sub_agent_finished",
                ]
            };
            assert_eq!(kinds, expected, "{env} --max-parallel {max_parallel}");
        }
    }
}

//! `--max-requests` and `--max-agents` hold across the whole run tree: nested runs are
//! other processes, and they share the limit through the data directory.
//!
//! The model and the agents are shell scripts that count how many of them run at once
//! (a file each while running) and record what they saw.

use std::path::Path;

use crate::support::Sandbox;

/// The most that ran at once, from the `seen` file the scripts append to.
fn most_at_once(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("seen"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .max()
        .unwrap_or(0)
}

/// Shell that marks itself running in `dir`, records how many are, waits, unmarks.
fn counted(dir: &Path) -> String {
    let dir = dir.display();
    format!(
        "touch '{dir}/running.'$$; ls '{dir}' | grep -c '^running\\.' >> '{dir}/seen'; sleep 1; rm -f '{dir}/running.'$$"
    )
}

#[test]
fn max_requests_holds_across_nested_runs() {
    for (limit, expected) in [(Some("1"), 1), (None, 2)] {
        let sb = Sandbox::new();
        let dir = sb.root().join("count");
        std::fs::create_dir(&dir).unwrap();
        // The root writes code that starts two nested runs at once; each nested run's
        // first (counted) model call answers at once.
        let model = sb.file(
            "model.sh",
            format!(
                "#!/bin/sh\nprompt=$(cat)\ncase \"$prompt\" in\n  *\"['ok', 'ok']\"*) echo 'FINAL_VAR(answers)' ;;\n  *count-me*) {} ; echo 'FINAL(ok)' ;;\n  *) printf '```repl\\nanswers = sub_rlm_parallel([(\"count-me a\", \"x\"), (\"count-me b\", \"y\")])\\nprint(answers)\\n```\\n' ;;\nesac\n",
                counted(&dir)
            ),
        );
        let mut cmd = sb.bare();
        cmd.arg("--data-dir")
            .arg(sb.data_dir())
            .args(["run", "fan out", "--provider", "cli", "--model", "script"])
            .arg("--llm-cmd")
            .arg(format!("sh {}", model.display()))
            .args(["--max-parallel", "4"]);
        if let Some(limit) = limit {
            cmd.args(["--max-requests", limit]);
        }
        cmd.assert().success().stdout("[\"ok\",\"ok\"]\n");
        assert_eq!(most_at_once(&dir), expected, "--max-requests {limit:?}");
    }
}

#[test]
fn max_agents_holds_for_agents_started_together() {
    for (limit, expected) in [(Some("1"), 1), (None, 3)] {
        let sb = Sandbox::new();
        let dir = sb.root().join("count");
        std::fs::create_dir(&dir).unwrap();
        let agent = sb.file(
            "agent.sh",
            format!("#!/bin/sh\n{}\necho done\n", counted(&dir)),
        );
        let model = sb.file(
            "model.sh",
            "#!/bin/sh\nprompt=$(cat)\ncase \"$prompt\" in\n  *\"['done', 'done', 'done']\"*) echo 'FINAL(all done)' ;;\n  *) printf '```repl\\nprint(spawn_agents([\"a\", \"b\", \"c\"]))\\n```\\n' ;;\nesac\n",
        );
        let mut cmd = sb.bare();
        cmd.arg("--data-dir")
            .arg(sb.data_dir())
            .args(["run", "agents", "--provider", "cli", "--model", "script"])
            .arg("--llm-cmd")
            .arg(format!("sh {}", model.display()))
            .arg("--agent-cmd")
            .arg(format!("sh {}", agent.display()))
            .args(["--max-parallel", "4"]);
        if let Some(limit) = limit {
            cmd.args(["--max-agents", limit]);
        }
        cmd.assert().success().stdout("all done\n");
        assert_eq!(most_at_once(&dir), expected, "--max-agents {limit:?}");
    }
}

#[test]
fn concurrent_children_share_the_call_budget_instead_of_each_getting_it() {
    use rlm_test_support::mock_llm::{MockLlm, MockReply, MockRule, MockScript};
    let sb = Sandbox::new();
    // The root fans out to four nested runs at once; each child would take three
    // calls (two code steps, then an answer). Everything else is a final answer.
    let mock = MockLlm::spawn_blocking_thread(
        MockScript::replies((0..20).map(|_| MockReply::text("FINAL(forced)")))
            .rule(MockRule::contains(
                "Task: fan out to four",
                MockReply::text(
                    "```repl\nanswers = sub_rlm_parallel([f'child-{i}' for i in range(4)])\nprint(answers)\n```",
                ),
            ))
            .rule(MockRule::contains(
                "Task: child-",
                MockReply::text("```repl\nx = 1\n```"),
            )),
    )
    .unwrap();
    sb.bare()
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "fan out to four", "--model", "mock", "--base-url"])
        .arg(mock.control().openai_base_url())
        .args(["--max-llm-calls", "2", "--max-parallel", "4"])
        .assert()
        .success();
    // The tree's budget is 2 calls, forced answers included: the root's first call
    // and its forced answer; no child can start, as none could answer. Without the
    // shared ledger each child got "what is left" (1 call) for itself: 1 + 4 × (1 + 1
    // forced) + 1 forced = 10 requests; with it but forced answers uncounted, 7.
    let requests = mock.control().request_count();
    assert!(
        requests <= 2,
        "{requests} model requests for a budget of 2 in 5 runs"
    );
}

/// Issue 49, item 12: `--max-llm-calls 20` over a root and four children that go on
/// writing code made 26 requests (each of the five runs' forced answers uncounted, and
/// one asked twice). Each run holds one call of the tree's budget for its forced answer
/// from its start (a child's is held by its parent before it starts), so the tree
/// makes exactly the calls it was given.
#[test]
fn a_call_budget_over_a_root_and_four_looping_children_is_exact() {
    let (requests, _) = fan_out_under(
        &["--max-llm-calls", "20"],
        std::time::Duration::from_millis(20),
    );
    assert_eq!(requests, 20, "model requests for --max-llm-calls 20");
}

/// After a budget is spent a run makes one forced request, and counts it: a forced
/// reply in prose (or cut at its limit) used to be asked again past the budget.
#[test]
fn a_spent_budget_makes_one_forced_request_and_counts_it() {
    use rlm_test_support::mock_llm::{MockLlm, MockReply, MockRule, MockScript};
    for forced_reply in [
        MockReply::text("I believe the answer is probably 42, from what I saw."),
        crate::support::reply_with_finish("FINAL(4", "length"),
    ] {
        let sb = Sandbox::new();
        let mock = MockLlm::spawn_blocking_thread(
            MockScript::always(MockReply::text("```repl\nx = 1\n```")).rule(MockRule::function(
                "told to answer",
                move |request| {
                    let texts = request.message_texts();
                    let told = texts.last().is_some_and(|t| t.contains("Answer now"));
                    told.then(|| forced_reply.clone())
                },
            )),
        )
        .unwrap();
        let out = sb
            .bare()
            .env_remove("OPENAI_API_KEY")
            .arg("--data-dir")
            .arg(sb.data_dir())
            .args(["run", "count", "--model", "mock", "--json", "--base-url"])
            .arg(mock.control().openai_base_url())
            .args(["--max-llm-calls", "3"])
            .assert()
            .success();
        let result: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        assert_eq!(result["forced"], true, "{result}");
        assert_eq!(
            mock.control().request_count(),
            3,
            "two steps and one forced request: {result}"
        );
        assert_eq!(
            result["llm_calls"], 3,
            "the forced request counts: {result}"
        );
        assert_eq!(result["iterations"], 2, "{result}");
    }
    // No budget is smaller than the forced answer's one call.
    let sb = Sandbox::new();
    sb.bare()
        .args(["run", "count", "--max-llm-calls", "0"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--max-llm-calls"));
}

/// A root that fans out to four nested runs at once, each of which would go on writing
/// code (every call reporting 90 + 10 tokens, `delay` apart) until its budget stops
/// it; returns the number of model requests the tree made and how long it took.
fn fan_out_under(budget: &[&str], delay: std::time::Duration) -> (u64, std::time::Duration) {
    use rlm_test_support::mock_llm::{MockLlm, MockReply, MockRule, MockScript};
    let reply = move |text: &str| MockReply::text(text).with_usage(90, 10).with_delay(delay);
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(
        MockScript::always(reply("FINAL(forced)"))
            .rule(MockRule::contains(
                "Task: fan out to four",
                reply("```repl\nanswers = sub_rlm_parallel([f'child-{i}' for i in range(4)])\nprint(answers)\n```"),
            ))
            // A child writes code at every step until told to answer (its task is in
            // the first message, not the last).
            .rule(MockRule::function("a child goes on", move |request| {
                let texts = request.message_texts();
                let child = texts.iter().any(|t| t.contains("Task: child-"));
                let told = texts.last().is_some_and(|t| t.contains("Answer now"));
                (child && !told).then(|| reply("```repl\nx = 1\n```"))
            })),
    )
    .unwrap();
    let started = std::time::Instant::now();
    sb.bare()
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "fan out to four", "--model", "mock", "--base-url"])
        .arg(mock.control().openai_base_url())
        .args(["--max-parallel", "4", "--max-iterations", "30"])
        .args(budget)
        .assert()
        .success();
    (mock.control().request_count(), started.elapsed())
}

/// Seen failing before the tree ledger reserved a call's estimated tokens: the four
/// children's first calls, in flight together, each saw 250 tokens left.
#[test]
fn concurrent_children_share_the_token_budget() {
    // Calls 200 ms long, so the children's calls are in flight together.
    let (requests, _) = fan_out_under(
        &["--max-tokens", "350"],
        std::time::Duration::from_millis(200),
    );
    // 350 tokens are 3.5 calls of 100; each of the 5 runs may add its forced answer.
    assert!(
        requests <= 4 + 5,
        "{requests} model requests for 350 tokens in 5 runs"
    );
}

#[test]
fn concurrent_children_share_the_cost_budget() {
    // $1000 per million tokens: a call of 100 tokens costs $0.10.
    let (requests, _) = fan_out_under(
        &[
            "--max-cost-usd",
            "0.35",
            "--price-input",
            "1000",
            "--price-output",
            "1000",
        ],
        std::time::Duration::from_millis(200),
    );
    assert!(
        requests <= 4 + 5,
        "{requests} model requests for $0.35 at $0.10 a call in 5 runs"
    );
}

/// Children get what is left of the root's time, not a fresh `--max-time` each: with
/// calls 300 ms apart and 30 iterations a child alone would make 31 calls, past the
/// bound below. Counted in requests, not timed.
#[test]
fn concurrent_children_share_the_time_budget() {
    let delay = std::time::Duration::from_millis(300);
    let (requests, _) = fan_out_under(&["--max-time", "2"], delay);
    // Each call takes `delay`, so within the tree's 2 s a run makes at most 2 s / 300 ms
    // + 1 calls, then its forced answer: 8 for each of the 5 runs. A child that did not
    // inherit what is left of the budget would write code until --max-iterations 30.
    // A slow machine only makes fewer calls, so the bound holds however busy it is.
    let per_run = 2000 / delay.as_millis() as u64 + 2;
    assert!(
        requests <= 5 * per_run,
        "{requests} model requests under --max-time 2 in 5 runs of calls {delay:?} long"
    );
}

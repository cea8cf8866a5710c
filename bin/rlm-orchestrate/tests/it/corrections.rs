//! `--corrections` through the binary (issue 50, items 2 and 6): the same script run
//! with every rule and with none changes what the model is sent; a rule that fires is
//! an event `runs show` prints; `config show` lists the rules; an unknown name is an
//! error that lists the known ones, through the flag, `RLM_CORRECTIONS` and `rlm.toml`.

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockScript};
use serde_json::Value;

use crate::support::{reply_with_finish, Sandbox};

/// A reply cut at the model's output-token limit, holding code that would run.
const CUT: &str = "```repl\nprint(len(context))\n```\nFINAL(10";

/// Runs `count the apples` against a mock that sends a cut reply, then `FINAL(1000)`,
/// with `flags`; returns the `--json` report and the mock.
fn run_cut(sb: &Sandbox, flags: &[&str]) -> (Value, MockLlmThread) {
    let script = MockScript::new()
        .then(reply_with_finish(CUT, "length"))
        .or_else(MockReply::text("FINAL(1000)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let context = sb.file("context.txt", "one apple\n".repeat(100));
    let out = sb
        .bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args([
            "run",
            "count the apples",
            "--model",
            "mock",
            "--no-stream",
            "--json",
        ])
        .args(["--env", "python", "--max-iterations", "4"])
        .arg("--base-url")
        .arg(mock.control().openai_base_url())
        .arg("--context")
        .arg(&context)
        .args(flags)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_slice(&out.stdout).unwrap(), mock)
}

/// The last user message of the second model request (what followed the cut reply).
fn after_the_cut(mock: &MockLlmThread) -> String {
    let requests: Vec<_> = mock
        .control()
        .requests()
        .into_iter()
        .filter(|r| r.api.is_some())
        .collect();
    requests[1].last_user_message().unwrap_or_default()
}

#[test]
fn corrections_none_changes_what_the_model_is_sent_after_a_cut_reply() {
    let sb = Sandbox::new();
    let (all, mock) = run_cut(&sb, &[]);
    assert_eq!(all["answer"], "1000");
    let told = after_the_cut(&mock);
    assert!(
        told.starts_with("Your last reply was cut off at the output-token limit"),
        "{told}"
    );
    assert!(
        !told.contains("Code executed:"),
        "nothing of it ran: {told}"
    );

    let sb = Sandbox::new();
    let (none, mock) = run_cut(&sb, &["--corrections", "none"]);
    assert_eq!(none["answer"], "1000");
    let told = after_the_cut(&mock);
    // Without the rule the cut reply's code runs like any other, and nothing is said.
    assert!(told.starts_with("Code executed:"), "{told}");
    assert!(!told.contains("cut off"), "{told}");
}

#[test]
fn a_correction_is_an_event_that_runs_show_prints_under_its_step() {
    let sb = Sandbox::new();
    run_cut(&sb, &[]);
    let runs = sb.data_dir().join("runs");
    let run = std::fs::read_dir(&runs).unwrap().next().unwrap().unwrap();
    let events = std::fs::read_to_string(run.path().join("events.jsonl")).unwrap();
    let correction: Value = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["kind"] == "correction")
        .expect("a correction event");
    assert_eq!(correction["rule"], "truncated_reply");
    assert_eq!(correction["hook"], "on_reply");
    assert_eq!(correction["verdict"], "refuse");
    assert_eq!(correction["iteration"], 1);
    let text = correction["text"].as_str().unwrap();
    assert!(text.starts_with("Your last reply was cut off"), "{text}");

    let run_id = run.file_name().into_string().unwrap();
    let out = sb
        .bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["runs", "show", &run_id])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let at = shown
        .find("correction truncated_reply (on_reply, refuse): Your last reply was cut off")
        .unwrap_or_else(|| panic!("{shown}"));
    // Under its step: after step 1 begins, before step 2.
    let step1 = shown
        .find("step 1")
        .or_else(|| shown.find("Step 1"))
        .unwrap_or(0);
    assert!(step1 < at, "{shown}");

    let out = sb
        .bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["runs", "show", &run_id, "--json"])
        .output()
        .unwrap();
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(json.contains("\"truncated_reply\""), "{json}");
}

#[test]
fn config_show_lists_every_rule_and_which_are_on() {
    let sb = Sandbox::new();
    let out = sb
        .bare()
        .args([
            "config",
            "show",
            "--corrections",
            "value_block,repeat_limit",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Corrections (--corrections repeat_limit,value_block"),
        "{text}"
    );
    for (rule, on) in [
        ("value_block", "on "),
        ("repeat_limit", "on "),
        ("truncated_reply", "off"),
    ] {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(rule))
            .unwrap_or_else(|| panic!("{rule}: {text}"));
        assert!(line.contains(on), "{line}");
    }
    let out = sb
        .bare()
        .args(["config", "show", "--json"])
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules = json["corrections"].as_array().unwrap();
    assert_eq!(rules.len(), 13);
    assert!(rules.iter().all(|r| r["on"] == true));
}

#[test]
fn an_unknown_rule_is_an_error_listing_the_known_ones_from_every_front_door() {
    let sb = Sandbox::new();
    let check = |out: std::process::Output| {
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("unknown rule `answer_form`"), "{stderr}");
        assert!(stderr.contains("truncated_reply, not_taken"), "{stderr}");
    };
    check(
        sb.bare()
            .args([
                "run",
                "q",
                "--model",
                "m",
                "--corrections",
                "value_block,answer_form",
            ])
            .output()
            .unwrap(),
    );
    check(
        sb.bare()
            .env("RLM_CORRECTIONS", "answer_form")
            .args(["run", "q", "--model", "m"])
            .output()
            .unwrap(),
    );
    sb.file("rlm.toml", "corrections = \"answer_form\"\n");
    check(
        sb.bare()
            .args(["run", "q", "--model", "m"])
            .output()
            .unwrap(),
    );
}

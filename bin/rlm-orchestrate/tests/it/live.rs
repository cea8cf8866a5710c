//! What a run shows while it works: the plain progress lines on a stderr that is not a
//! terminal (snapshotted, with run ids, agent ids, times and token counts redacted),
//! nothing with `-q`, and nothing but JSON on stdout with `--json` or `--events`.
//!
//! The redrawn tree needs a terminal; it is tested beside its code (`src/live/tree.rs`).

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockRule, MockScript};
use serde_json::Value;

use crate::support::Sandbox;

/// A model that looks at the context, asks a sub-call and a nested run, then answers.
fn scripted_model() -> MockLlmThread {
    let script = MockScript::new()
        .rule(MockRule::contains(
            "Task: count the lines",
            MockReply::text("FINAL(3)"),
        ))
        .rule(MockRule::contains("Summarise in three words", "short log lines"))
        .then(MockReply::text(
            "Let me look first.\n```repl\nprint(len(context))\ngist = llm_query('Summarise in' + ' three words: ' + context)\nprint(gist)\n```",
        ))
        .then(MockReply::text(
            "```repl\nn = sub_rlm('count the lines', context=context)\nprint('child said', n)\n```",
        ))
        .then(MockReply::text("FINAL(3 lines of short log lines)"));
    MockLlm::spawn_blocking_thread(script).unwrap()
}

fn run_cmd(sb: &Sandbox, mock: &MockLlmThread) -> assert_cmd::Command {
    let context = sb.file("c.log", "one\ntwo\nthree\n");
    let mut cmd = sb.bare();
    cmd.env_remove("OPENAI_API_KEY")
        .env_remove("TERM")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "What is in the log?", "--context"])
        .arg(context)
        .arg("--base-url")
        .arg(mock.control().openai_base_url())
        .args(["--model", "mock", "--retry-base-delay-ms", "5"]);
    cmd
}

/// Replaces what changes from run to run: run ids, agent ids, milliseconds and token
/// counts.
fn redact(text: &str) -> String {
    text.lines()
        .map(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            let mut out = Vec::with_capacity(words.len());
            for (i, word) in words.iter().enumerate() {
                let next = words.get(i + 1).copied().unwrap_or("");
                let bare = word.trim_start_matches('(');
                out.push(if is_run_id(word) {
                    "[run-id]".to_owned()
                } else if word.len() == 12 && word.bytes().all(|b| b.is_ascii_hexdigit()) {
                    "[agent-id]".to_owned()
                } else if next.starts_with("ms") && bare.bytes().all(|b| b.is_ascii_digit()) {
                    format!("{}[n]", &word[..word.len() - bare.len()])
                } else if next.starts_with("tokens") && word.contains('+') {
                    "[p]+[c]".to_owned()
                } else {
                    (*word).to_owned()
                });
            }
            out.join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `20261122-094312-3fa9c1`.
fn is_run_id(word: &str) -> bool {
    let b = word.as_bytes();
    b.len() == 22
        && b[8] == b'-'
        && b[15] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 8 || i == 15 || c.is_ascii_hexdigit())
}

#[test]
fn plain_progress_of_a_scripted_run() {
    let sb = Sandbox::new();
    let mock = scripted_model();
    let out = run_cmd(&sb, &mock).assert().success();
    let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert_eq!(stdout, "3 lines of short log lines\n");
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    insta::assert_snapshot!(redact(&stderr));
}

#[test]
fn quiet_runs_say_nothing_on_stderr() {
    let sb = Sandbox::new();
    let mock = scripted_model();
    run_cmd(&sb, &mock)
        .arg("-q")
        .assert()
        .success()
        .stdout("3 lines of short log lines\n")
        .stderr("");
}

#[test]
fn json_and_events_put_nothing_but_json_on_stdout() {
    for flags in [&["--json"][..], &["--events"], &["--events", "--json"]] {
        let sb = Sandbox::new();
        let mock = scripted_model();
        let out = run_cmd(&sb, &mock).args(flags).assert().success();
        let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        assert!(!stdout.is_empty(), "{flags:?}");
        for line in stdout.lines() {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{flags:?}: not JSON ({e}): {line}"));
            assert_ne!(
                value["kind"], "text_delta",
                "{flags:?}: deltas stay off --events"
            );
        }
        let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
        if flags.contains(&"--events") {
            // The JSON lines are the progress; stderr stays free for errors.
            assert_eq!(stderr, "", "{flags:?}");
        } else {
            assert!(stderr.contains("step 1"), "{flags:?}: {stderr}");
        }
    }
}

#[test]
fn redaction_keeps_the_shape() {
    assert_eq!(
        redact("run 20261122-094312-3fa9c1 · m\n  root: 12+3 tokens, 45 ms\n  output (7 ms): x"),
        "run [run-id] · m\n  root: [p]+[c] tokens, [n] ms\n  output ([n] ms): x"
    );
    assert_eq!(
        redact("  sub-agent 0123456789ab exited with code 0 after 235 ms"),
        "  sub-agent [agent-id] exited with code 0 after [n] ms"
    );
}

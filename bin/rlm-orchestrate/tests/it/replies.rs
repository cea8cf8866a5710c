//! The corpus of real and hand-written model replies (`tests/fixtures/replies/`):
//! each replayed through the parser and through `run` against the mock model, and
//! made to do what `replies.toml` says — run, answer, or get a correction.

use std::path::{Path, PathBuf};

use rlm_orchestrator::parse::parse_response;
use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockScript};
use serde::Deserialize;
use serde_json::Value;

use crate::support::{reply_with_finish, Sandbox};

/// One reply of the corpus and what it must make the loop do.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    file: String,
    env: String,
    #[allow(dead_code, reason = "documentation in the file")]
    source: String,
    action: String,
    before: Option<String>,
    finish_reason: Option<String>,
    answer: Option<String>,
    output: Option<String>,
    says: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Corpus {
    reply: Vec<Case>,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/replies")
}

fn corpus() -> Vec<(Case, String)> {
    let dir = corpus_dir();
    let manifest = std::fs::read_to_string(dir.join("replies.toml")).unwrap();
    let corpus: Corpus = toml::from_str(&manifest).unwrap();
    corpus
        .reply
        .into_iter()
        .map(|case| {
            let text = std::fs::read_to_string(dir.join(&case.file)).unwrap();
            (case, text)
        })
        .collect()
}

/// The fence tags each code environment runs besides `repl`.
fn tags(env: &str) -> &'static [&'static str] {
    match env {
        "python" => &["python", "py", "python3"],
        "js" => &["js", "javascript"],
        _ => &[],
    }
}

#[test]
fn every_file_of_the_corpus_is_listed_once() {
    let listed: Vec<String> = corpus().into_iter().map(|(case, _)| case.file).collect();
    let mut files: Vec<String> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .collect();
    files.sort();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(sorted, files);
}

#[test]
fn the_parser_takes_each_reply_as_the_corpus_says() {
    for (case, text) in corpus().into_iter().filter(|(c, _)| c.env != "tools") {
        let parsed = parse_response(&text, tags(&case.env));
        let ok = match case.action.as_str() {
            "run" | "refuse_final" | "refuse_code" => !parsed.blocks.is_empty(),
            "final" => {
                parsed.final_literal.as_deref() == case.answer.as_deref()
                    || parsed.final_var.is_some()
                    || !parsed.blocks.is_empty()
            }
            "question" => parsed.final_literal.is_some() || !parsed.blocks.is_empty(),
            "correct" => {
                // A cut reply is parsed like any other; the loop refuses it.
                case.finish_reason.is_some()
                    || (parsed.blocks.is_empty() && parsed.final_literal.is_none())
            }
            other => panic!("{}: unknown action {other}", case.file),
        };
        assert!(ok, "{}: {parsed:?}", case.file);
    }
}

/// Runs `case` against the mock: its `before` reply, the reply, then FINAL(done).
fn replay(sb: &Sandbox, case: &Case, text: &str) -> (std::process::Output, MockLlmThread) {
    let mut script = MockScript::new();
    if let Some(before) = &case.before {
        script = script.then(MockReply::text(before.clone()));
    }
    script = script
        .then(match &case.finish_reason {
            Some(reason) => reply_with_finish(text, reason),
            None => MockReply::text(text.to_owned()),
        })
        .or_else(MockReply::text("FINAL(done)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let context = sb.file("context.txt", "one apple\n".repeat(100));
    let out = sb
        .bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "count the apples", "--model", "mock", "--no-stream"])
        .args(["--env", &case.env, "--max-iterations", "4"])
        .arg("--base-url")
        .arg(mock.control().openai_base_url())
        .arg("--context")
        .arg(&context)
        .output()
        .unwrap();
    (out, mock)
}

/// The requests for a completion the mock received (not the window discovery's).
fn model_requests(mock: &MockLlmThread) -> Vec<rlm_test_support::mock_llm::RecordedRequest> {
    mock.control()
        .requests()
        .into_iter()
        .filter(|r| r.api.is_some())
        .collect()
}

/// The events of the only run in `sb`.
fn events(sb: &Sandbox) -> Vec<Value> {
    let runs = sb.data_dir().join("runs");
    let run = std::fs::read_dir(&runs).unwrap().next().unwrap().unwrap();
    std::fs::read_to_string(run.path().join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn the_loop_does_what_the_corpus_says_with_each_reply() {
    for (case, text) in corpus() {
        let sb = Sandbox::new();
        let (out, mock) = replay(&sb, &case, &text);
        let name = &case.file;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        let answer = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let iteration = 1 + u64::from(case.before.is_some());
        let events = events(&sb);
        let outputs: Vec<&str> = events
            .iter()
            .filter(|e| e["kind"] == "exec" && e["iteration"] == iteration)
            .map(|e| e["output"].as_str().unwrap_or_default())
            .collect();
        let requests = model_requests(&mock);
        let next_message = requests
            .get(iteration as usize)
            .and_then(|r| r.last_user_message())
            .unwrap_or_default();
        let printed = |want: &Option<String>| {
            let want = want.as_deref().unwrap_or_default();
            outputs.iter().any(|o| o.contains(want))
        };
        match case.action.as_str() {
            "final" => {
                assert_eq!(Some(answer.as_str()), case.answer.as_deref(), "{name}");
                assert_eq!(requests.len() as u64, iteration, "{name}: answered at once");
            }
            "run" | "tool_call" => {
                assert!(printed(&case.output), "{name}: {outputs:?}");
            }
            "refuse_final" => {
                assert!(printed(&case.output), "{name}: {outputs:?}");
                let says = case.says.as_deref().unwrap_or_default();
                assert!(next_message.contains(says), "{name}: {next_message}");
                assert_eq!(answer, "done", "{name}: the premature FINAL was not taken");
            }
            "refuse_code" => {
                assert!(
                    !outputs.is_empty() && outputs.iter().all(|o| o.starts_with("[not run")),
                    "{name}: its blocks are refused: {outputs:?}"
                );
                let says = case.says.as_deref().unwrap_or_default();
                assert!(next_message.contains(says), "{name}: {next_message}");
                assert_eq!(answer, "done", "{name}");
            }
            "question" => {
                let says = case.says.as_deref().unwrap_or_default();
                assert!(next_message.contains(says), "{name}: {next_message}");
                assert_eq!(answer, "done", "{name}: its FINAL was not taken");
            }
            "correct" => {
                assert!(outputs.is_empty(), "{name}: nothing runs: {outputs:?}");
                let says = case.says.as_deref().unwrap_or_default();
                assert!(next_message.contains(says), "{name}: {next_message}");
                assert_eq!(answer, "done", "{name}");
            }
            other => panic!("{name}: unknown action {other}"),
        }
    }
}

#[test]
fn a_form_two_corrections_do_not_fix_ends_in_a_forced_answer() {
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(
        MockScript::new()
            .then(MockReply::text("```\nprint(1)\n```"))
            .then(MockReply::text("```\nprint(2)\n```"))
            .then(MockReply::text("```\nprint(3)\n```"))
            .or_else(MockReply::text("FINAL(gave up)")),
    )
    .unwrap();
    let context = sb.file("context.txt", "one apple\n");
    let out = sb
        .bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "count", "--model", "mock", "--no-stream", "--json"])
        .args(["--max-iterations", "20"])
        .arg("--base-url")
        .arg(mock.control().openai_base_url())
        .arg("--context")
        .arg(&context)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["answer"], "gave up");
    assert_eq!(report["forced"], true);
    // Three tries in the same form, then the forced answer: not twenty iterations.
    let requests = model_requests(&mock);
    assert_eq!(requests.len(), 4);
    let last = requests[3].last_user_message().unwrap();
    assert!(
        last.contains("the same correction (no_action) again, after 2 corrections"),
        "{last}"
    );
}

/// A megabyte reply of one adversarial piece (issue 49, item 4: 280 KB of `FINAL(\n`
/// took 19.6 s, 160 KB of `{` under `--tool-protocol text` 19.3 s) is handled in one
/// pass: the run goes on to its next reply and ends with it. Nextest's timeout is the
/// only bound on time.
#[test]
fn a_megabyte_reply_of_one_adversarial_piece_is_handled_in_one_pass() {
    for (piece, env) in [
        ("FINAL(\n", &["--env", "python"][..]),
        ("{", &["--env", "tools", "--tool-protocol", "text"][..]),
    ] {
        let sb = Sandbox::new();
        let reply = piece.repeat((1 << 20) / piece.len());
        let mock = MockLlm::spawn_blocking_thread(
            MockScript::new()
                .then(MockReply::text(reply))
                .or_else(MockReply::text("FINAL(done)")),
        )
        .unwrap();
        let context = sb.file("context.txt", "one apple\n".repeat(100));
        let out = sb
            .bare()
            .arg("--data-dir")
            .arg(sb.data_dir())
            .args(["run", "count the apples", "--model", "mock", "--no-stream"])
            .args(["--max-iterations", "3"])
            .args(env)
            .arg("--base-url")
            .arg(mock.control().openai_base_url())
            .arg("--context")
            .arg(&context)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{piece:?}: {stderr}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "done",
            "{piece:?}"
        );
        assert_eq!(model_requests(&mock).len(), 2, "{piece:?}");
    }
}

//! Server discovery once per base URL and model, end to end through `run`, asserted
//! from the mock's request log (never from timings): the first run asks in one round
//! and keeps the answer in the data directory; a second run, and a nested child, ask
//! nothing; the first model request goes out while the round is still under way;
//! the server's tokenizer is asked only for a tight request, and only where the
//! server said it has one — never the key or a sample to a path it did not name.

use std::os::unix::fs::PermissionsExt as _;
use std::process::Output;
use std::time::Duration;

use rlm_test_support::mock_llm::{
    MockLlm, MockLlmThread, MockReply, MockRule, MockScript, MockTokenizer, RecordedRequest,
};
use serde_json::Value;

use crate::support::Sandbox;

/// A key the mock must see only where it belongs.
const KEY_ENV: &str = "RLM_TEST_DISCOVERY_KEY";

/// `run` against `mock` with `extra` flags (the tools environment unless they say
/// another: it starts at once).
fn run(sb: &Sandbox, mock: &MockLlmThread, extra: &[&str]) -> Output {
    sb.bare()
        .env(KEY_ENV, "sk-discovery-test-0042")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "say hello", "--model", "mock", "--env", "tools"])
        .args(["--api-key-env", KEY_ENV])
        .arg("--base-url")
        .arg(mock.control().openai_base_url())
        .args(extra)
        .output()
        .unwrap()
}

fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `METHOD path` of each side request, in order.
fn asked(side: &[RecordedRequest]) -> Vec<String> {
    side.iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

/// The records kept under the data directory.
fn records(sb: &Sandbox) -> Vec<(u32, Value)> {
    let dir = sb.data_dir().join("servers");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    entries
        .map(|entry| {
            let path = entry.unwrap().path();
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            let value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            (mode, value)
        })
        .collect()
}

/// The events of every run in the data directory, each run's in order.
fn all_events(sb: &Sandbox) -> Vec<Value> {
    let mut events = Vec::new();
    for run in std::fs::read_dir(sb.data_dir().join("runs")).unwrap() {
        let file = run.unwrap().path().join("events.jsonl");
        let text = std::fs::read_to_string(file).unwrap_or_default();
        events.extend(
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()),
        );
    }
    events
}

fn windowed(tokens: u32) -> MockScript {
    let mut script = MockScript::always(MockReply::text("FINAL(hello)"));
    script.context_window = Some(tokens);
    script
}

#[test]
fn the_first_run_asks_once_and_keeps_the_answer_for_the_next() {
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(windowed(16_384)).unwrap();
    assert_ok(&run(&sb, &mock, &[]));
    let mut first = asked(&mock.control().side_requests());
    first.sort();
    // One round, nothing twice, no tokenizer: the first request is small.
    assert_eq!(
        first,
        ["GET /openapi.json", "GET /props", "GET /v1/models"],
        "{first:?}"
    );
    let kept = records(&sb);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let (mode, record) = &kept[0];
    assert_eq!(*mode, 0o600);
    assert_eq!(record["formatVersion"], 1);
    assert_eq!(record["baseUrl"], mock.control().openai_base_url());
    assert_eq!(record["model"], "mock");
    assert_eq!(record["window"]["tokens"], 16_384);
    assert_eq!(record["tokenizer"], "llama_cpp_python");
    assert!(record["learnedAtMs"].as_u64().unwrap() > 0);

    // The second run knows it all: no question, and its trace says the window at once.
    let before = mock.control().side_requests().len();
    assert_ok(&run(&sb, &mock, &[]));
    assert_eq!(mock.control().side_requests().len(), before, "asked again");
    let started: Vec<Value> = all_events(&sb)
        .into_iter()
        .filter(|e| e["kind"] == "run_started")
        .collect();
    assert_eq!(started.len(), 2);
    assert!(
        started
            .iter()
            .any(|s| s["context_window"]["tokens"] == 16_384),
        "{started:?}"
    );
}

#[test]
fn a_nested_child_asks_nothing_its_parent_learned() {
    let sb = Sandbox::new();
    let script = MockScript::new()
        .rule(MockRule::contains(
            "Task: the child's part",
            MockReply::text("FINAL(done by the child)"),
        ))
        .then(MockReply::text(
            "```repl\nanswer = sub_rlm(\"the child's part\")\nprint(answer)\n```",
        ))
        .then(MockReply::text("FINAL_VAR(answer)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let out = run(&sb, &mock, &["--env", "python", "--sub-model", "sub-mock"]);
    assert_ok(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "done by the child"
    );
    // The root asked about its two models, a round each; the child, whose model is
    // the root's sub-model, read the parent's record and asked nothing.
    let side = asked(&mock.control().side_requests());
    assert_eq!(side.len(), 6, "{side:?}");
    assert_eq!(side.iter().filter(|s| s.ends_with("/v1/models")).count(), 2);
    assert_eq!(records(&sb).len(), 2);
    let child = all_events(&sb)
        .into_iter()
        .find(|e| e["kind"] == "run_started" && e["depth"] == 1)
        .unwrap();
    assert_eq!(
        child["context_window"]["source"]["kind"], "default",
        "{child}"
    );
}

#[test]
fn the_first_request_goes_out_while_discovery_is_under_way() {
    let sb = Sandbox::new();
    let mut script = windowed(16_384);
    // The server takes 2.5 s to say anything about itself (within the 3 s discovery
    // waits for each answer, so a client that asks first is answered first), none to
    // answer a model request. The js environment starts at once.
    script.side_latency = Some(Duration::from_millis(2_500));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    // Without a constraint to apply (`--constrain off`): a constrained first request
    // waits for the round that says which fields the server takes.
    assert_ok(&run(&sb, &mock, &["--env", "js", "--constrain", "off"]));
    let requests = mock.control().requests();
    let side = mock.control().side_requests();
    assert!(!side.is_empty(), "discovery asked nothing");
    // Nothing discovery asked had been answered when the first request arrived (one
    // that waited would come after the answers, 2.5 s on). Whether the questions had
    // reached the server yet is the scheduler's business, not the product's.
    assert_eq!(
        requests[0].side_answered,
        0,
        "the first request waited for discovery: {:?}",
        asked(&side)
    );
}

/// Steps that print 5 000 characters each into a small window: every request past
/// the first is tight.
fn tight(tokenizer: MockTokenizer) -> MockScript {
    let mut script = MockScript::new();
    for step in 1..=3 {
        script = script.then(MockReply::text(format!(
            "Step {step}.\n```repl\nprint('{}')\n```",
            "a".repeat(5_000)
        )));
    }
    script = script.then(MockReply::text("FINAL(counted)"));
    script.context_window = Some(4_096);
    script.tokenizer = tokenizer;
    script
}

fn tokenizer_requests(mock: &MockLlmThread) -> Vec<RecordedRequest> {
    mock.control()
        .side_requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.contains("tokenize"))
        .collect()
}

#[test]
fn a_server_that_offers_no_tokenizer_gets_no_sample_and_no_key() {
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(tight(MockTokenizer::Unadvertised)).unwrap();
    assert_ok(&run(&sb, &mock, &["--env", "python"]));
    assert!(
        tokenizer_requests(&mock).is_empty(),
        "{:?}",
        asked(&mock.control().side_requests())
    );
    // The key went to the API's own listing only, never to /props or the OpenAPI
    // listing of a server that did not say it is llama.cpp.
    for request in mock.control().side_requests() {
        let keyed = request.path.ends_with("/v1/models");
        assert_eq!(
            request.auth_present(),
            keyed,
            "{} {}",
            request.method,
            request.path
        );
    }
    assert_eq!(records(&sb)[0].1["tokenizer"], Value::Null);
}

#[test]
fn a_tight_request_is_counted_by_the_tokenizer_the_server_named() {
    for (tokenizer, path, named) in [
        (MockTokenizer::LlamaCpp, "/tokenize", "llama_cpp"),
        (
            MockTokenizer::LlamaCppPython,
            "/extras/tokenize/count",
            "llama_cpp_python",
        ),
    ] {
        let sb = Sandbox::new();
        let mock = MockLlm::spawn_blocking_thread(tight(tokenizer)).unwrap();
        assert_ok(&run(&sb, &mock, &["--env", "python"]));
        let counted = tokenizer_requests(&mock);
        assert!(!counted.is_empty(), "{named}: nothing counted");
        assert!(
            counted.iter().all(|r| r.path == path),
            "{named}: {:?}",
            asked(&counted)
        );
        assert_eq!(records(&sb)[0].1["tokenizer"], named);
    }
}

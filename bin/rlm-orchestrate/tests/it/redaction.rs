//! Secrets never shown: credentials in `--base-url` (user info, key-like query values)
//! reach the server but not stderr, the trace or the summary; API keys that model code
//! or an agent prints are scrubbed from what the model, the trace and the terminal see.

use std::path::Path;
use std::process::Output;

use rlm_test_support::mock_llm::{MockLlm, MockReply, MockScript};

use crate::support::Sandbox;

/// Every byte under `dir` (the data directory: trace, summary, variables).
fn all_files_text(dir: &Path) -> String {
    let mut text = String::new();
    for entry in walk(dir) {
        text.push_str(&String::from_utf8_lossy(&std::fs::read(entry).unwrap()));
    }
    text
}

/// The stored results of agents (`sub-result-*` variables; the context the user gave,
/// key included, is stored as given).
fn agent_results(data: &Path) -> String {
    let files: Vec<_> = walk(&data.join("variables"))
        .into_iter()
        .filter(|path| path.to_string_lossy().contains("sub-result"))
        .collect();
    assert!(!files.is_empty(), "the agent's result was stored");
    files
        .iter()
        .map(|path| String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned())
        .collect()
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// `run "a task"` against `base_url` over `context`, with `env` set (every API key
/// removed first) and `extra` flags.
fn run(
    sb: &Sandbox,
    base_url: &str,
    context: &Path,
    env: &[(&str, &str)],
    extra: &[&str],
) -> Output {
    let mut command = sb.bare();
    command
        .env_remove("OPENAI_API_KEY")
        .envs(env.iter().copied())
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args([
            "run",
            "a task",
            "--model",
            "mock",
            "--retries",
            "0",
            "--base-url",
        ])
        .arg(base_url)
        .arg("--context")
        .arg(context)
        .args(extra);
    command.output().unwrap()
}

/// Seen failing before the fix: the URL was printed and traced whole (and its query
/// ended up before the API path).
#[test]
fn credentials_in_the_base_url_are_used_but_never_shown() {
    let sb = Sandbox::new();
    let mock =
        MockLlm::spawn_blocking_thread(MockScript::replies([MockReply::error(500, "broken")]))
            .unwrap();
    let base = mock
        .control()
        .openai_base_url()
        .replace("http://", "http://someone:hunter2pw@");
    let context = sb.file("context.txt", "the context\n");
    let output = run(
        &sb,
        &format!("{base}?api-version=7&api_key=QUERYSECRET"),
        &context,
        &[],
        &[],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let requests = mock.control().requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].path, "/v1/chat/completions?api-version=7&api_key=QUERYSECRET",
        "the query goes after the API path, as given"
    );
    assert!(
        requests[0].auth_present(),
        "the user info is sent as basic auth"
    );
    assert!(stderr.contains("http://redacted@"), "{stderr}");
    assert!(stderr.contains("api_key=redacted"), "{stderr}");
    assert!(stderr.contains("api-version=7"), "{stderr}");
    let traced = all_files_text(&sb.data_dir());
    for secret in ["hunter2pw", "QUERYSECRET", "someone"] {
        assert!(!stderr.contains(secret), "{secret} on stderr: {stderr}");
        assert!(!traced.contains(secret), "{secret} in the data directory");
    }
}

/// Seen failing before the fix: the key printed by model code went into the next
/// request, `events.jsonl`, the agent's stored result and the answer.
#[test]
fn a_key_printed_by_model_code_or_an_agent_is_scrubbed_everywhere() {
    const KEY: &str = "sk-test-LEAKME-0123456789";
    let sb = Sandbox::new();
    let leak = sb.file("leak.txt", format!("the key is {KEY}\n"));
    // The key reaches model code as its context (a file the sandbox lets it read).
    let code = "```repl\nprint(context)\nr = spawn_agent('tell me')\nprint('agent:', r)\n```";
    let mock = MockLlm::spawn_blocking_thread(MockScript::replies([
        MockReply::text(code),
        MockReply::text(format!("FINAL(it is {KEY})")),
    ]))
    .unwrap();
    let agent = format!("cat {}", leak.display());
    let output = run(
        &sb,
        &mock.control().openai_base_url(),
        &leak,
        &[("OPENAI_API_KEY", KEY)],
        &["--agent-cmd", &agent],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let requests = mock.control().requests();
    assert_eq!(requests.len(), 2);
    let next = requests[1].body.to_string();
    assert!(
        next.contains("the key is [redacted OPENAI_API_KEY]"),
        "model code's output reaches the model scrubbed: {next}"
    );
    assert!(
        next.contains("agent: the key is [redacted OPENAI_API_KEY]"),
        "{next}"
    );
    assert!(
        stdout.contains("it is [redacted OPENAI_API_KEY]"),
        "{stdout}"
    );
    for (what, text) in [
        ("the next request", next),
        ("stdout", stdout.into_owned()),
        ("stderr", stderr.into_owned()),
        ("the trace", all_files_text(&sb.data_dir().join("runs"))),
        ("the agent's stored result", agent_results(&sb.data_dir())),
    ] {
        assert!(!text.contains(KEY), "the key leaked into {what}");
    }
}

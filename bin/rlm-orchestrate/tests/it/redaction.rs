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

fn run(sb: &Sandbox, base_url: &str, extra_env: &[(&str, &str)]) -> Output {
    let context = sb.file("context.txt", "the context\n");
    let mut command = sb.bare();
    command
        .env_remove("OPENAI_API_KEY")
        .envs(extra_env.iter().copied())
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
        .arg(&context);
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
    let output = run(
        &sb,
        &format!("{base}?api-version=7&api_key=QUERYSECRET"),
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

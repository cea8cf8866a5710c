//! Issue 49, item 2: what an MCP client may point a run at. A call's `base_url` must be
//! one the server was started with or allows (`--mcp-allow-base-url`), since requests
//! carry the server's API key; its `context_paths` must resolve (links followed) under
//! an `--mcp-root` (default: the working directory). Refusals are tool errors naming
//! the flag, and a refused server receives nothing.

use rlm_test_support::mock_llm::{MockLlm, MockReply, MockScript};
use serde_json::json;

use crate::mcp_stdio::{initialize, Server};
use crate::support::{mock_replies, Sandbox};

/// The key the server holds: it must reach no host the operator did not choose.
const KEY: &str = "sk-test-mcp-policy-0123456789abcdef";

#[test]
fn a_base_url_the_server_was_not_started_with_is_refused_and_gets_nothing() {
    let sb = Sandbox::new();
    let own = mock_replies(&["FINAL(own)"]);
    let other = MockLlm::spawn_blocking_thread(MockScript::always(MockReply::text("FINAL(other)")))
        .unwrap();
    let own_url = own.control().openai_base_url();
    let other_url = other.control().openai_base_url();
    let own_authority = own_url
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_owned();
    let other_port = other.control().addr().port();
    let key_env = [("OPENAI_API_KEY", KEY)];
    let flags = [
        "--base-url",
        own_url.as_str(),
        "--model",
        "mock",
        "--env",
        "js",
    ];
    let mut server = Server::start_with_env(&sb, &flags, &key_env);
    initialize(&mut server, 1);
    let tricks = [
        other_url.clone(),
        format!("http://{own_authority}@127.0.0.1:{other_port}/v1"),
        format!("http://127.0.0.1:{other_port}/v1#{own_authority}"),
    ];
    for (n, url) in tricks.iter().enumerate() {
        let (is_error, text) = server.call_result(
            10 + n as u64,
            "rlm_run",
            json!({"task": "q", "base_url": url}),
        );
        assert!(is_error, "{url} was used: {text}");
        assert!(text.contains("base_url"), "{text}");
        if n == 0 {
            assert!(text.contains("--mcp-allow-base-url"), "{text}");
        }
    }
    assert_eq!(other.control().request_count(), 0);
    assert!(other.control().side_requests().is_empty());
    // The server's own URL, spelt otherwise, is its own.
    let (is_error, text) = server.call_result(
        20,
        "rlm_run",
        json!({"task": "q", "base_url": format!("{own_url}/")}),
    );
    assert!(!is_error && text == "own", "{text}");
    drop(server);

    // Allowed, the other server answers, with the key.
    let allow = [&flags[..], &["--mcp-allow-base-url", other_url.as_str()]].concat();
    let mut server = Server::start_with_env(&sb, &allow, &key_env);
    initialize(&mut server, 1);
    let (is_error, text) =
        server.call_result(2, "rlm_run", json!({"task": "q", "base_url": other_url}));
    assert!(!is_error && text == "other", "{text}");
    let requests = other.control().requests();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].auth_present());
}

#[test]
fn context_paths_are_served_only_under_the_roots() {
    let sb = Sandbox::new();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.log");
    std::fs::write(&secret, "the secret line\n").unwrap();
    sb.file("in.log", "an inside line\n");
    std::os::unix::fs::symlink(&secret, sb.root().join("link.log")).unwrap();
    let mock =
        MockLlm::spawn_blocking_thread(MockScript::always(MockReply::text("FINAL(read)"))).unwrap();
    let url = mock.control().openai_base_url();
    let flags = ["--base-url", url.as_str(), "--model", "mock", "--env", "js"];
    let mut server = Server::start(&sb, &flags);
    initialize(&mut server, 1);
    let secret_path = secret.to_str().unwrap();
    for (n, path) in [secret_path, "link.log", "-", "../"]
        .into_iter()
        .enumerate()
    {
        let (is_error, text) = server.call_result(
            10 + n as u64,
            "rlm_run",
            json!({"task": "q", "context_paths": [path]}),
        );
        assert!(is_error, "{path} was served: {text}");
        if path != "-" {
            assert!(text.contains("--mcp-root"), "{text}");
        }
    }
    assert_eq!(mock.control().request_count(), 0);
    let (is_error, text) = server.call_result(
        20,
        "rlm_run",
        json!({"task": "q", "context_paths": ["in.log"]}),
    );
    assert!(!is_error && text == "read", "{text}");
    drop(server);

    // With the other directory as the root, its file is served and the working
    // directory no longer is.
    let root = outside.path().to_str().unwrap();
    let with_root = [&flags[..], &["--mcp-root", root]].concat();
    let mut server = Server::start(&sb, &with_root);
    initialize(&mut server, 1);
    let (is_error, text) = server.call_result(
        2,
        "rlm_run",
        json!({"task": "q", "context_paths": [secret_path]}),
    );
    assert!(!is_error && text == "read", "{text}");
    let before = mock.control().request_count();
    let (is_error, _) = server.call_result(
        3,
        "rlm_run",
        json!({"task": "q", "context_paths": ["in.log"]}),
    );
    assert!(is_error);
    assert_eq!(mock.control().request_count(), before);
}

//! End-to-end runs of `rlm-orchestrate run` against the scripted mock model server:
//! what the model is sent, what the REPL does with its code, and how bad input fails
//! before any request and without touching stored variables.

use std::path::Path;

use predicates::prelude::*;
use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockScript};
use serde_json::Value;

use crate::support::mock_replies as mock;
use crate::support::{write_big_context, Sandbox};

/// `rlm-orchestrate --data-dir … run TASK --base-url <mock> --model mock …`.
fn run_cmd(sb: &Sandbox, mock: &MockLlmThread, task: &str) -> assert_cmd::Command {
    let mut cmd = sb.bare();
    cmd.env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .arg("run")
        .arg(task)
        .arg("--base-url")
        .arg(mock.control().openai_base_url())
        .args([
            "--model",
            "mock",
            "--retry-base-delay-ms",
            "5",
            "--exec-timeout",
            "30",
        ]);
    cmd
}

#[test]
fn needle_in_a_64_mb_context_is_found_by_model_code() {
    let sb = Sandbox::new();
    let needle = "SECRET-CODE=7f3a9c";
    let context = sb.root().join("big.log");
    write_big_context(&context, 64 << 20, 40 << 20, needle);
    let mock = mock(&[
        "Let me search.\n```repl\ni = context.find('SECRET-CODE=')\nanswer = context[i:i+18]\nprint(i, answer)\n```",
        "FINAL_VAR(answer)",
    ]);
    let out = run_cmd(&sb, &mock, "What is the secret code?")
        .arg("--context")
        .arg(&context)
        .arg("--json")
        .assert()
        .success();
    let result: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(result["answer"], needle);
    assert_eq!(result["forced"], false);
    assert_eq!(result["iterations"], 2);
    for field in ["run_id", "depth_reached", "sub_agents", "usage", "cost_usd"] {
        assert!(
            result.get(field).is_some(),
            "--json lacks {field}: {result}"
        );
    }
    let requests = mock.control().requests();
    assert_eq!(requests.len(), 2);
    // The model saw the real output of its code, and never the context.
    let second = requests[1].last_user_message().unwrap();
    assert!(
        second.contains("REPL output:") && second.contains(needle),
        "{second}"
    );
    assert!(
        requests.iter().all(|r| r.body_bytes < 20_000),
        "a request carried the context"
    );
}

#[test]
fn root_request_size_does_not_depend_on_context_size() {
    let sizes: Vec<usize> = [2 << 10, 64 << 20]
        .into_iter()
        .map(|bytes| {
            let sb = Sandbox::new();
            let context = sb.root().join("ctx.log");
            write_big_context(&context, bytes, bytes / 2, "needle");
            let mock = mock(&["FINAL(done)"]);
            run_cmd(&sb, &mock, "Summarise")
                .arg("--context")
                .arg(&context)
                .assert()
                .success()
                .stdout("done\n");
            mock.control().requests()[0].body_bytes
        })
        .collect();
    assert!(
        sizes[0].abs_diff(sizes[1]) < 2048,
        "2 KB context: {} bytes, 64 MB: {} bytes",
        sizes[0],
        sizes[1]
    );
}

#[test]
fn rate_limits_are_retried() {
    let sb = Sandbox::new();
    let script = MockScript::new()
        .then(MockReply::error(429, "slow down"))
        .then(MockReply::error(503, "busy"))
        .then(MockReply::text("FINAL(after retries)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    run_cmd(&sb, &mock, "q")
        .assert()
        .success()
        .stdout("after retries\n");
    assert_eq!(mock.control().request_count(), 3);
}

#[test]
fn an_endless_loop_is_interrupted_and_the_run_goes_on() {
    let sb = Sandbox::new();
    let mock = mock(&[
        "```repl\nkept = 41\nwhile True:\n    pass\n```",
        "```repl\nprint('alive', kept + 1)\n```",
        "FINAL(survived)",
    ]);
    run_cmd(&sb, &mock, "loop forever")
        .args(["--exec-timeout", "1"])
        .assert()
        .success()
        .stdout("survived\n");
    let requests = mock.control().requests();
    let after_loop = requests[1].last_user_message().unwrap();
    assert!(
        after_loop.to_lowercase().contains("timeout") || after_loop.contains("interrupted"),
        "{after_loop}"
    );
    assert!(requests[2]
        .last_user_message()
        .unwrap()
        .contains("alive 42"));
}

#[test]
fn the_trace_and_events_are_written() {
    let sb = Sandbox::new();
    let mock = mock(&["```repl\nx = 1 + 1\nprint(x)\n```", "FINAL(2)"]);
    let out = run_cmd(&sb, &mock, "add")
        .arg("--events")
        .assert()
        .success();
    let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    for kind in [
        "run_started",
        "step_started",
        "code",
        "exec",
        "llm_call",
        "final",
        "step_completed",
        "run_finished",
    ] {
        assert!(kinds.contains(&kind), "no {kind} event in {kinds:?}");
    }
    let run_id = events[0]["run_id"].as_str().unwrap();
    let run_dir = sb.data_dir().join("runs").join(run_id);
    let on_disk = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    assert_eq!(on_disk.lines().count(), events.len());
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["status"], "answered");
    assert_eq!(summary["answer"], "2");
}

#[test]
fn anthropic_provider_runs_the_loop() {
    let sb = Sandbox::new();
    let mock = mock(&["```repl\nprint(len(context))\n```", "FINAL(5 chars)"]);
    let context = sb.file("c.txt", "hello");
    sb.bare()
        .env("ANTHROPIC_API_KEY", "test-key")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args([
            "run",
            "how long?",
            "--provider",
            "anthropic",
            "--model",
            "claude-test",
            "--base-url",
        ])
        .arg(mock.control().base_url())
        .arg("--context")
        .arg(&context)
        .assert()
        .success()
        .stdout("5 chars\n");
    let requests = mock.control().requests();
    assert!(requests[0].path.ends_with("/v1/messages"));
    let fed_back = requests[1].last_user_message().unwrap();
    assert!(fed_back.contains("REPL output:\n5"), "{fed_back}");
}

#[test]
fn the_api_key_is_never_stored_or_traced() {
    let sb = Sandbox::new();
    let secret = "sk-planted-9d8c7b6a5f4e";
    let mock = mock(&["```repl\nimport os\nprint(sorted(k for k in os.environ if 'KEY' in k))\nstore.set('env-keys', str(os.environ.get('OPENAI_API_KEY')))\n```", "FINAL(ok)"]);
    let context = sb.file("c.txt", "some context");
    run_cmd(&sb, &mock, "q")
        .env("OPENAI_API_KEY", secret)
        .arg("--context")
        .arg(&context)
        .assert()
        .success();
    assert!(
        mock.control().requests()[0].auth_present(),
        "the key was not sent to the endpoint"
    );
    for entry in walk(&sb.data_dir()) {
        let bytes = std::fs::read(&entry).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(secret),
            "the API key leaked into {}",
            entry.display()
        );
    }
    let bodies = serde_json::to_string(
        &mock
            .control()
            .requests()
            .iter()
            .map(|r| r.body.clone())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    assert!(!bodies.contains(secret), "the API key leaked into a prompt");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// Every bad input: exit 2, a message naming the problem, no request to the model,
/// and the stored variable `keep` intact.
#[test]
fn bad_inputs_fail_before_any_model_call_and_keep_the_store() {
    let sb = Sandbox::new();
    sb.set(&["keep", "precious"]);
    let before = sb.show_json("keep");
    let mut not_utf8 = b"valid start ".to_vec();
    not_utf8.extend_from_slice(&[0xc3, 0x28]);
    let bad_text = sb.file("latin1.txt", not_utf8);
    let bad_json = sb.file("broken.json", "{\"a\": [1, 2");
    let good = sb.file("good.txt", "0123456789");
    let schema = sb.file("schema.json", "{\"type\": 12}");
    let dir = sb.root().join("adir");
    std::fs::create_dir_all(&dir).unwrap();
    let missing = sb.root().join("missing.txt");
    let cases: Vec<(Vec<std::ffi::OsString>, &str)> = vec![
        (
            vec!["--context".into(), missing.clone().into()],
            "does not exist",
        ),
        (
            vec!["--context".into(), dir.clone().into()],
            "is a directory",
        ),
        (
            vec!["--context".into(), bad_text.clone().into()],
            "byte offset 12",
        ),
        (
            vec!["--context".into(), bad_json.clone().into()],
            "not valid JSON",
        ),
        (
            vec![
                "--context".into(),
                good.clone().into(),
                "--max-context-bytes".into(),
                "5".into(),
            ],
            "max-context-bytes",
        ),
        (
            vec!["--context-dir".into(), good.clone().into()],
            "not a directory",
        ),
        (
            vec!["--context-var".into(), "nope".into()],
            "does not exist",
        ),
        (
            vec!["--output-schema".into(), schema.clone().into()],
            "not a valid JSON Schema",
        ),
        (
            vec!["--max-iterations".into(), "0".into()],
            "--max-iterations",
        ),
        (vec!["--provider".into(), "cli".into()], "command"),
    ];
    let mock = mock(&[]);
    for (args, message) in cases {
        run_cmd(&sb, &mock, "q")
            .args(&args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(message))
            .stdout("");
    }
    // An empty task, and a missing key for a remote endpoint.
    run_cmd(&sb, &mock, "  ")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("empty"));
    sb.bare()
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "q", "--base-url", "https://api.example.invalid/v1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("OPENAI_API_KEY"));
    assert_eq!(
        mock.control().request_count(),
        0,
        "a bad input reached the model"
    );
    assert_eq!(
        sb.show_json("keep"),
        before,
        "a bad input changed the store"
    );
    let keys: Vec<Value> = serde_json::from_slice(
        &sb.vars(&["list", "--json"])
            .assert()
            .success()
            .get_output()
            .stdout,
    )
    .unwrap();
    assert_eq!(
        keys.len(),
        1,
        "a failed load left variables behind: {keys:?}"
    );
}

#[test]
fn settings_come_from_rlm_toml_and_the_environment() {
    let sb = Sandbox::new();
    sb.file("rlm.toml", "max_iterations = 1\nmodel = \"from-file\"\n");
    let mock = mock(&["thinking", "FINAL(forced answer)"]);
    let out = run_cmd(&sb, &mock, "q")
        .env("RLM_MODEL", "from-env")
        .arg("--json")
        .assert()
        .success();
    let result: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        result["forced"], true,
        "max_iterations = 1 from rlm.toml was not applied"
    );
    // The flag --model mock wins over RLM_MODEL, which wins over the file.
    assert_eq!(mock.control().requests()[0].model(), Some("mock"));
    // The trace says once that the answer was forced.
    let shown = sb
        .bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["runs", "show", result["run_id"].as_str().unwrap()])
        .assert()
        .success();
    let shown = String::from_utf8(shown.get_output().stdout.clone()).unwrap();
    assert!(shown.contains("final answer (forced):"), "{shown}");
    assert!(!shown.contains("forced, forced"), "{shown}");
    sb.file("rlm.toml", "bogus_setting = 1\n");
    run_cmd(&sb, &mock, "q")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown setting `bogus_setting`"));
}

//! `runs prune` (issue 11, part B, item 10): the context copies of ended runs go,
//! everything else stays.

use predicates::prelude::*;
use rlm_test_support::mock_llm::{MockLlm, MockReply, MockScript};

use crate::support::Sandbox;

#[test]
fn prune_removes_ended_runs_context_copies_and_keeps_the_rest() {
    let sb = Sandbox::new();
    let mock =
        MockLlm::spawn_blocking_thread(MockScript::replies([MockReply::text("FINAL(done)")]))
            .unwrap();
    let context = sb.file("notes.txt", "some context to copy into the store\n");
    sb.bare()
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "summarise", "--context"])
        .arg(&context)
        .arg("--base-url")
        .arg(mock.control().openai_base_url())
        .args(["--model", "mock", "--retry-base-delay-ms", "5"])
        .assert()
        .success();
    sb.set(&["mine", "kept"]);
    let list = sb.vars(&["list", "--json"]).assert().success();
    let refs: serde_json::Value = serde_json::from_slice(&list.get_output().stdout).unwrap();
    let copies: Vec<String> = refs
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["scope"].as_str().unwrap().starts_with("session:"))
        .map(|r| r["key"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(copies.len(), 1, "{refs}");

    // Recent by default (7 days): nothing goes.
    sb.bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["runs", "prune"])
        .assert()
        .success()
        .stdout(predicate::str::contains("removed 0 context variables"));
    sb.vars(&["get", &copies[0]]).assert().success();

    sb.bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["runs", "prune", "--older-than", "0", "--dry-run"])
        .assert()
        .success()
        .stdout(predicate::str::contains("would remove 1 context variable"));
    sb.vars(&["get", &copies[0]]).assert().success();

    sb.bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["runs", "prune", "--older-than", "0", "--traces"])
        .assert()
        .success()
        .stdout(predicate::str::contains("removed 1 context variable"))
        .stdout(predicate::str::contains("and 1 trace"));
    sb.vars(&["get", &copies[0]]).assert().code(4);
    assert_eq!(sb.get("mine"), b"kept");
    assert_eq!(
        std::fs::read_dir(sb.data_dir().join("runs"))
            .unwrap()
            .count(),
        0
    );
}

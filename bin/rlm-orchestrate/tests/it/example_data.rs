//! `.rlm-data.example/`: the committed sample of the on-disk format stays readable.
//!
//! The files are checked on a copy (git does not keep their `0600` modes, and opening
//! a store creates `locks/`, which must not appear in the source tree). To regenerate
//! them after a format change:
//! `cargo test -p rlm-orchestrate --test it -- --ignored regenerate_example_data_dir`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use rlm_context_store::{ListFilter, Store, VariableType};
use serde_json::{json, Value};

use crate::support::Sandbox;

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.rlm-data.example")
}

/// The variables of the example: key, `vars set` arguments, type, value.
fn expected() -> Vec<(&'static str, Vec<&'static str>, VariableType, Value)> {
    let task = "Find every ERROR line in the server log and count them per service.";
    let chunk = "2024-05-01T10:00:01Z INFO  search: query ok\n\
                 2024-05-01T10:00:02Z ERROR auth: token expired\n\
                 2024-05-01T10:00:03Z ERROR billing: card declined\n";
    let intro =
        "# Intro\n\nKeys may be any UTF-8; this one has a slash, so its file name is hashed.\n";
    let tail = "2024-05-01T10:00:04Z ERROR auth: token expired\n";
    let config = json!({"maxDepth": 2, "maxIterations": 20, "env": "python"});
    let services = json!(["auth", "billing", "search"]);
    let memory = json!({"entries": [
        {"query": "How many ERROR lines?", "answer": "2"},
    ]});
    let result = json!({"result": {"auth": 1, "billing": 1}, "agentId": "7f3a", "exitCode": 0});
    vec![
        ("task", vec![], VariableType::Text, json!(task)),
        (
            "chunk-0",
            vec!["--scope", "session:demo"],
            VariableType::Text,
            json!(chunk),
        ),
        ("docs/intro.md", vec![], VariableType::Text, json!(intro)),
        ("config", vec!["--json"], VariableType::Json, config),
        ("services", vec!["--json"], VariableType::Json, services),
        (
            "session-memory",
            vec!["--json", "--scope", "session:demo"],
            VariableType::Memory,
            memory,
        ),
        (
            "sub-result-7f3a",
            vec!["--json", "--scope", "agent:root"],
            VariableType::Result,
            result,
        ),
        (
            "server-log-tail",
            vec!["--type", "stream"],
            VariableType::Stream,
            json!(tail),
        ),
    ]
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn example_data_dir_is_valid() {
    let sb = Sandbox::new();
    copy_dir(&example_dir(), &sb.data_dir());
    let store = Store::open(sb.data_dir()).unwrap();
    assert_eq!(store.problems(), vec![], "scan problems in the example");

    let refs = store.list(&ListFilter::default());
    let types: BTreeSet<&str> = refs.iter().map(|r| r.var_type.as_str()).collect();
    // A `file` variable names an absolute path, which an example directory copied
    // anywhere cannot carry; it is tested where its file exists (store and context tests).
    let all: BTreeSet<&str> = VariableType::ALL
        .iter()
        .filter(|t| **t != VariableType::File)
        .map(|t| t.as_str())
        .collect();
    assert_eq!(types, all, "every type is present");

    let expected = expected();
    assert_eq!(refs.len(), expected.len());
    for (key, _, var_type, value) in &expected {
        let reference = store.reference(key).unwrap();
        assert_eq!(reference.var_type, *var_type, "{key}");
        assert!(reference.sha256.is_some(), "{key}");
        assert_eq!(*store.get(key).unwrap(), *value, "{key}");
        // A sub-agent reads it with a plain JSON parser and finds "value".
        let path = store.path_of(key).unwrap();
        let file: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(file["value"], *value, "{key}");
        assert_eq!(file["formatVersion"], 1, "{key}");
        assert_eq!(file["ref"]["key"], *key);
    }

    // And the binary reads it without a word on stderr.
    sb.vars(&["list"]).assert().success().stderr("");
}

#[test]
#[ignore = "regenerates .rlm-data.example/ in the source tree"]
fn regenerate_example_data_dir() {
    let dir = example_dir();
    // README.md and anything else beside variables/ stay.
    let _ = std::fs::remove_dir_all(dir.join("variables"));
    let sb = Sandbox::new();
    for (key, flags, _, value) in expected() {
        let mut cmd = sb.bare();
        cmd.arg("--data-dir").arg(&dir).args(["vars", "set", key]);
        cmd.args(&flags);
        match value {
            Value::String(text) if flags.contains(&"--type") => {
                cmd.args(["--file", "-"]).write_stdin(text);
            }
            Value::String(text) => {
                cmd.arg(text);
            }
            other => {
                cmd.arg(other.to_string());
            }
        }
        cmd.assert().success();
    }
    // Lock files are per-process scratch; the store recreates the directory.
    std::fs::remove_dir_all(dir.join("locks")).unwrap();
}

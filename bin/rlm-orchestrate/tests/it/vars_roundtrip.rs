//! The happy paths of `vars`: every type in and out, listing, showing, paths, removal,
//! compare-and-set, and where the data directory comes from.

use predicates::prelude::*;
use serde_json::{json, Value};

use crate::support::Sandbox;

fn pretty(value: &Value) -> String {
    format!("{}\n", serde_json::to_string_pretty(value).unwrap())
}

#[test]
fn every_type_round_trips() {
    let sb = Sandbox::new();
    let text = "héllo \"world\"\n\ttabs, \\ backslash, 😀 and a trailing newline\n";
    let memory = json!({"entries": [{"query": "q", "answer": "a"}]});
    let result = json!({"result": "42", "agentId": "a1"});
    let array = json!([1, "two", {"three": [3.5, null, true]}]);

    let out = sb.set(&["notes", text]);
    assert!(out.starts_with("notes: text, scope global, "), "{out}");
    sb.set(&["arr", "--json", &array.to_string()]);
    sb.set(&["mem", "--json", &memory.to_string()]);
    sb.set(&["res", "--json", &result.to_string()]);
    let tail = sb.file("tail.log", "line 1\nline 2\n");
    sb.set(&["tail", "--type", "stream", "--file", tail.to_str().unwrap()]);

    assert_eq!(sb.get("notes"), text.as_bytes());
    assert_eq!(String::from_utf8(sb.get("arr")).unwrap(), pretty(&array));
    assert_eq!(String::from_utf8(sb.get("mem")).unwrap(), pretty(&memory));
    assert_eq!(String::from_utf8(sb.get("res")).unwrap(), pretty(&result));
    assert_eq!(sb.get("tail"), b"line 1\nline 2\n");

    for (key, ty) in [
        ("notes", "text"),
        ("arr", "json"),
        ("mem", "memory"),
        ("res", "result"),
        ("tail", "stream"),
    ] {
        assert_eq!(sb.show_json(key)["ref"]["type"], ty, "{key}");
    }
}

#[test]
fn set_prints_key_type_size_and_full_sha256() {
    let sb = Sandbox::new();
    let out = sb.set(&["n", "--json", "1"]);
    // sha256 of the compact serialisation `1`.
    assert_eq!(
        out,
        "n: json, scope global, 1 bytes, sha256 \
         6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b\n"
    );
    let out = sb.set(&["s", "x", "--scope", "agent:7"]);
    assert!(
        out.starts_with("s: text, scope agent:7, 3 bytes, sha256 "),
        "{out}"
    );
}

#[test]
fn list_shows_a_table_and_json_references() {
    let sb = Sandbox::new();
    sb.set(&["b-text", "hello"]);
    sb.set(&[
        "a-json",
        "--json",
        r#"{"k": [1, 2]}"#,
        "--scope",
        "agent:root",
    ]);
    sb.set(&[
        "c-mem",
        "--json",
        r#"{"memories": []}"#,
        "--scope",
        "agent:root",
    ]);

    let out = sb.vars(&["list"]).assert().success();
    let table = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    assert!(lines[0].starts_with("KEY"), "{table}");
    assert!(lines[0].contains("SHA256"), "{table}");
    assert!(
        lines[1].starts_with("a-json  json    agent:root"),
        "{table}"
    );
    assert!(
        lines[3].starts_with("c-mem   memory  agent:root"),
        "{table}"
    );
    let sha = sb.sha("b-text");
    assert!(
        lines[2].contains(&sha[..12]) && !lines[2].contains(&sha),
        "{table}"
    );

    let out = sb.vars(&["list", "--json"]).assert().success();
    let refs: Vec<Value> = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(refs.len(), 3);
    let fields: Vec<&String> = refs[0].as_object().unwrap().keys().collect();
    let mut expected = vec![
        "createdAt",
        "id",
        "key",
        "scope",
        "sha256",
        "sizeBytes",
        "type",
    ];
    expected.sort_unstable();
    assert_eq!(fields, expected);
    // Exactly as stored: the same object as the file's "ref".
    let path = sb.data_dir().join("variables/a-json.json");
    let file: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    assert_eq!(refs[0], file["ref"]);

    let out = sb
        .vars(&[
            "list",
            "--json",
            "--scope",
            "agent:root",
            "--type",
            "memory",
        ])
        .assert()
        .success();
    let refs: Vec<Value> = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0]["key"], "c-mem");
}

#[test]
fn empty_store_lists_nothing() {
    let sb = Sandbox::new();
    sb.vars(&["list"])
        .assert()
        .success()
        .stdout("")
        .stderr(predicate::str::contains("no variables"));
    sb.vars(&["list", "--json"])
        .assert()
        .success()
        .stdout("[]\n");
    assert!(
        !sb.data_dir().exists(),
        "reading must not create the data directory"
    );
}

#[test]
fn show_prints_reference_and_a_bounded_preview() {
    let sb = Sandbox::new();
    let long = format!("{}\nsecond line", "é".repeat(1000));
    sb.set(&["long", &long]);
    let sha = sb.sha("long");
    let out = sb.vars(&["show", "long"]).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(text.contains("key:     long\n"), "{text}");
    assert!(text.contains("type:    text\n"), "{text}");
    assert!(text.contains("scope:   global\n"), "{text}");
    let size = serde_json::to_string(&long).unwrap().len();
    assert!(
        text.contains(&format!("size:    2.0 KiB ({size} bytes)\n")),
        "{text}"
    );
    assert!(text.contains(&format!("sha256:  {sha}\n")), "{text}");
    let preview = format!("preview: {}…\n", "é".repeat(200));
    assert!(text.ends_with(&preview), "{text}");

    let shown = sb.show_json("long");
    let keys: Vec<&String> = shown.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["path", "preview", "ref"]);
    assert_eq!(shown["ref"]["key"], "long");
    assert_eq!(shown["ref"]["sizeBytes"], size);
    assert_eq!(shown["preview"].as_str().unwrap().chars().count(), 201);

    sb.set(&["short", "--json", r#"{"a": "b\nc"}"#]);
    sb.vars(&["show", "short"])
        .assert()
        .success()
        .stdout(predicate::str::contains(r#"preview: {"a":"b\nc"}"#));
}

#[test]
fn path_is_absolute_and_holds_plain_json() {
    let sb = Sandbox::new();
    for key in ["chunk-3", "docs/intro.md", "../escape"] {
        sb.set(&[key, "--json", r#"{"output": [1, 2]}"#]);
        let out = sb.vars(&["path", key]).assert().success();
        let printed = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        let path = std::path::PathBuf::from(printed.trim_end_matches('\n'));
        assert!(path.is_absolute(), "{path:?}");
        let variables = sb.data_dir().canonicalize().unwrap().join("variables");
        assert_eq!(path.parent(), Some(variables.as_path()), "{key}");
        let file: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(file["value"], json!({"output": [1, 2]}));
        assert_eq!(file["ref"]["key"], key);
    }
}

#[test]
fn rm_and_clear_remove_variables() {
    let sb = Sandbox::new();
    sb.set(&["a", "1"]);
    sb.set(&["b", "2"]);
    sb.set(&["c", "3"]);
    sb.vars(&["rm", "a"])
        .assert()
        .success()
        .stdout("removed a\n");
    sb.vars(&["get", "a"]).assert().code(4);
    sb.vars(&["clear"])
        .assert()
        .success()
        .stdout("removed 2 variables\n");
    sb.vars(&["list", "--json"])
        .assert()
        .success()
        .stdout("[]\n");
    sb.vars(&["clear"])
        .assert()
        .success()
        .stdout("removed 0 variables\n");
}

#[test]
fn if_sha256_writes_only_on_match() {
    let sb = Sandbox::new();
    sb.vars(&["set", "counter", "--json", "1", "--if-sha256", "none"])
        .assert()
        .success();
    let sha = sb.sha("counter");
    sb.vars(&["set", "counter", "--json", "2", "--if-sha256", &sha])
        .assert()
        .success();
    assert_eq!(sb.get("counter"), b"2\n");
    // Upper-case hex is the same sha256.
    let sha = sb.sha("counter").to_ascii_uppercase();
    let file = sb.file("three.txt", "three");
    sb.vars(&[
        "set",
        "counter",
        "--file",
        file.to_str().unwrap(),
        "--if-sha256",
        &sha,
    ])
    .assert()
    .success();
    assert_eq!(sb.get("counter"), b"three");
}

#[test]
fn value_from_stdin() {
    let sb = Sandbox::new();
    sb.vars(&["set", "piped", "--file", "-"])
        .write_stdin("from stdin\n")
        .assert()
        .success();
    assert_eq!(sb.get("piped"), b"from stdin\n");
    sb.vars(&["set", "piped-json", "--file", "-", "--json"])
        .write_stdin(r#"{"result": true}"#)
        .assert()
        .success();
    assert_eq!(sb.show_json("piped-json")["ref"]["type"], "result");
}

#[test]
fn data_dir_comes_from_flag_env_or_default() {
    let sb = Sandbox::new();
    let env_dir = sb.root().join("from-env");
    sb.bare()
        .env("RLM_DATA_DIR", &env_dir)
        .args(["vars", "set", "k", "env"])
        .assert()
        .success();
    assert!(env_dir.join("variables/k.json").is_file());
    sb.bare()
        .env("RLM_DATA_DIR", &env_dir)
        .args(["vars", "get", "k"])
        .assert()
        .success()
        .stdout("env");

    // The flag wins over the environment, and works after the sub-command too.
    let flag_dir = sb.root().join("from-flag");
    sb.bare()
        .env("RLM_DATA_DIR", &env_dir)
        .args(["vars", "set", "k", "flag", "--data-dir"])
        .arg(&flag_dir)
        .assert()
        .success();
    assert!(flag_dir.join("variables/k.json").is_file());

    // Default: ./.rlm-data in the working directory.
    sb.bare()
        .args(["vars", "set", "k", "default"])
        .assert()
        .success();
    assert!(sb.root().join(".rlm-data/variables/k.json").is_file());
}

#[test]
fn files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    sb.set(&["secret", "s"]);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&sb.data_dir()), 0o700);
    assert_eq!(mode(&sb.data_dir().join("variables")), 0o700);
    assert_eq!(mode(&sb.data_dir().join("variables/secret.json")), 0o600);
}

#[test]
fn an_agent_storing_its_own_result_gets_its_parents_scope() {
    let sb = Sandbox::new();
    let as_agent = |key: &str| {
        sb.vars(&["set", key, "42"])
            .env("RLM_RESULT_KEY", "sub-result-a1")
            .env("RLM_PARENT_ID", "run-parent")
            .assert()
            .success();
    };
    as_agent("sub-result-a1");
    as_agent("notes");
    assert_eq!(
        sb.show_json("sub-result-a1")["ref"]["scope"],
        "agent:run-parent"
    );
    assert_eq!(sb.show_json("notes")["ref"]["scope"], "global");
}

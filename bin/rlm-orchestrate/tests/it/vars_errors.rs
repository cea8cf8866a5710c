//! Failures of `vars`: each has its exit code and a message naming what is wrong, and
//! none of them changes what is stored.

use predicates::prelude::*;

use crate::support::Sandbox;

#[test]
fn missing_key_is_exit_4_naming_it() {
    let sb = Sandbox::new();
    sb.set(&["present", "x"]);
    for cmd in ["get", "show", "path", "rm"] {
        sb.vars(&[cmd, "absent-key"])
            .assert()
            .code(4)
            .stdout("")
            .stderr(predicate::str::contains(
                r#"no variable named "absent-key""#,
            ))
            .stderr(predicate::str::contains("hint: the data directory is"));
    }
}

#[test]
fn missing_data_dir_is_a_missing_key_and_is_not_created() {
    let sb = Sandbox::new();
    sb.vars(&["get", "k"])
        .assert()
        .code(4)
        .stderr(predicate::str::contains(r#"no variable named "k""#))
        .stderr(predicate::str::contains("does not exist"));
    assert!(!sb.data_dir().exists());
}

#[test]
fn invalid_keys_are_exit_2() {
    let sb = Sandbox::new();
    let long = "k".repeat(513);
    for args in [
        vec!["get", ""],
        vec!["set", "", "v"],
        vec!["get", long.as_str()],
        vec!["set", long.as_str(), "v"],
    ] {
        sb.vars(&args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("invalid variable key"));
    }
    // 512 bytes is still fine.
    sb.set(&["k".repeat(512).as_str(), "v"]);
}

#[test]
fn bad_json_is_exit_2_with_position_and_changes_nothing() {
    let sb = Sandbox::new();
    sb.set(&["cfg", "--json", r#"{"ok": true}"#]);
    let before = sb.show_json("cfg");
    sb.vars(&["set", "cfg", "--json", "{\"ok\": tru"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("VALUE is not valid JSON"))
        .stderr(predicate::str::contains("line 1 column"))
        .stderr(predicate::str::contains("hint: drop --json"));
    let file = sb.file("bad.json", "{\n  \"a\": [1, 2,]\n}\n");
    sb.vars(&["set", "cfg", "--json", "--file", file.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.json is not valid JSON"))
        .stderr(predicate::str::contains("line 2 column"));
    sb.vars(&["set", "new", "--json", "[1"]).assert().code(2);
    assert_eq!(sb.show_json("cfg"), before);
    sb.vars(&["get", "new"]).assert().code(4);
}

#[test]
fn non_utf8_file_is_exit_2_naming_offset_and_keeps_old_value() {
    let sb = Sandbox::new();
    sb.set(&["log", "previous value"]);
    let before = sb.show_json("log");
    let mut bytes = b"valid start ".to_vec();
    bytes.push(0xff);
    bytes.extend_from_slice(b" more");
    let file = sb.file("latin1.log", &bytes);
    for extra in [&[][..], &["--if-sha256", "none"][..]] {
        let mut args = vec!["set", "log", "--file", file.to_str().unwrap()];
        args.extend_from_slice(extra);
        sb.vars(&args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("latin1.log"))
            .stderr(predicate::str::contains("byte offset 12"));
    }
    assert_eq!(sb.get("log"), b"previous value");
    assert_eq!(sb.show_json("log"), before);
    let leftovers: Vec<_> = std::fs::read_dir(sb.data_dir().join("variables"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["log.json"], "no temporary file is left behind");
}

#[test]
fn sha256_conflict_is_exit_3_showing_both_hashes() {
    let sb = Sandbox::new();
    sb.set(&["counter", "--json", "1"]);
    let actual = sb.sha("counter");
    let wrong = "0".repeat(64);
    sb.vars(&["set", "counter", "--json", "2", "--if-sha256", &wrong])
        .assert()
        .code(3)
        .stdout("")
        .stderr(predicate::str::contains(format!("expected sha256 {wrong}")))
        .stderr(predicate::str::contains(format!("found {actual}")))
        .stderr(predicate::str::contains("hint:"));
    sb.vars(&["set", "counter", "--json", "2", "--if-sha256", "none"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("expected sha256 none"));
    sb.vars(&["set", "fresh", "x", "--if-sha256", &actual])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("found none"));
    assert_eq!(sb.get("counter"), b"1\n");
    sb.vars(&["get", "fresh"]).assert().code(4);
}

#[test]
fn usage_errors_are_exit_2() {
    let sb = Sandbox::new();
    let cases: [&[&str]; 6] = [
        &["set", "k"],
        &["set", "k", "v", "--file", "f"],
        &["set", "k", "v", "--if-sha256", "abc"],
        &["set", "k", "v", "--type", "blob"],
        &["set", "k", "v", "--type", "memory"],
        &["set", "k", "--json", "[1]", "--type", "text"],
    ];
    for args in cases {
        sb.vars(args).assert().code(2).stdout("");
    }
    sb.vars(&["set", "k", "--file", "does-not-exist.txt"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("does-not-exist.txt"));
    sb.vars(&["set", "k", "--file", "."])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is a directory"));
    sb.vars(&["list", "--json"])
        .assert()
        .success()
        .stdout("[]\n");
}

#[test]
fn corrupt_files_are_warned_about_and_good_ones_listed() {
    let sb = Sandbox::new();
    sb.set(&["good-1", "one"]);
    sb.set(&["good-2", "--json", "[2]"]);
    let variables = sb.data_dir().join("variables");
    std::fs::write(variables.join("broken.json"), "{\"ref\": {\"id\": ").unwrap();
    std::fs::write(variables.join("foreign.json"), r#"{"hello": "world"}"#).unwrap();
    std::fs::write(variables.join("notes.txt"), "not a variable").unwrap();

    let out = sb
        .vars(&["list"])
        .assert()
        .success()
        .stderr(predicate::str::contains("warning:"))
        .stderr(predicate::str::contains("broken.json"))
        .stderr(predicate::str::contains("foreign.json"))
        .stderr(predicate::str::contains("notes.txt"));
    let table = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(table.contains("good-1"), "{table}");
    assert!(table.contains("good-2"), "{table}");
    assert_eq!(table.lines().count(), 3, "{table}");

    let out = sb.vars(&["list", "--json"]).assert().success();
    let refs: Vec<serde_json::Value> = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(refs.len(), 2);

    // -q silences the warnings, not the listing.
    sb.vars(&["list", "-q"])
        .assert()
        .success()
        .stderr("")
        .stdout(predicate::str::contains("good-2"));
    assert_eq!(sb.get("good-1"), b"one");
}

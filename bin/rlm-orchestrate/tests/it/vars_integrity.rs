//! What `vars` does with files it cannot trust (issue 11, part B, items 10–13): a
//! truncated value prints nothing, a hand edit never matches its old `--if-sha256`, a
//! symlink is refused, a streaming `set --file -` waiting for input blocks no other
//! writer, and `rm`/`clear` leave no lock files behind; a `file` variable this data
//! directory did not sign is marked in `vars list` (issue 22, item 12d).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use predicates::prelude::*;

use crate::support::{Sandbox, BIN};

/// The variable file of `key` (from `vars path`).
fn path_of(sb: &Sandbox, key: &str) -> PathBuf {
    let out = sb.vars(&["path", key]).assert().success();
    PathBuf::from(
        String::from_utf8(out.get_output().stdout.clone())
            .unwrap()
            .trim(),
    )
}

#[test]
fn a_truncated_value_prints_nothing_and_is_reported_by_list() {
    let sb = Sandbox::new();
    let text = "a line of the log\n".repeat(5000);
    let input = sb.file("log.txt", &text);
    sb.set(&["log", "--file", input.to_str().unwrap()]);
    sb.set(&["other", "fine"]);
    let path = path_of(&sb, "log");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();

    sb.vars(&["get", "log"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains("does not match its recorded size"))
        .stderr(predicate::str::contains(path.to_str().unwrap()));
    sb.vars(&["list"])
        .assert()
        .success()
        .stdout(predicate::str::contains("other"))
        .stdout(predicate::str::contains("log").not())
        .stderr(predicate::str::contains(path.to_str().unwrap()));
}

#[test]
fn a_hand_edited_value_does_not_match_its_old_sha256() {
    let sb = Sandbox::new();
    sb.set(&["flag", "approved: no"]);
    let stale = sb.sha("flag");
    let path = path_of(&sb, "flag");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("approved: no", "approved: ja")).unwrap();

    sb.vars(&["set", "flag", "approved: yes", "--if-sha256", &stale])
        .assert()
        .failure()
        .stderr(predicate::str::contains("sha256"));
    sb.vars(&["get", "flag"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains("edited by hand"));
    // Nothing was written over it, and a plain set repairs it.
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .contains("approved: ja"));
    sb.set(&["flag", "approved: yes"]);
    assert_eq!(sb.get("flag"), b"approved: yes");
}

#[test]
fn a_symlinked_variable_is_refused() {
    let sb = Sandbox::new();
    sb.set(&["secret", "inside"]);
    let outside = Sandbox::new();
    outside.set(&["secret", "outside the store"]);
    let path = path_of(&sb, "secret");
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(path_of(&outside, "secret"), &path).unwrap();

    sb.vars(&["get", "secret"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains("symbolic link"));
    sb.vars(&["list"])
        .assert()
        .success()
        .stderr(predicate::str::contains("symbolic link"));
    // `rm` removes the link, not what it points to.
    sb.vars(&["rm", "secret"]).assert().success();
    assert!(std::fs::symlink_metadata(&path).is_err());
    assert_eq!(outside.get("secret"), b"outside the store");
}

#[test]
fn a_streaming_set_waiting_for_stdin_blocks_no_other_writer() {
    let sb = Sandbox::new();
    sb.set(&["k", "before"]);
    let mut streaming = Command::new(BIN)
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["vars", "set", "k", "--file", "-"])
        .env_remove("RLM_DATA_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = streaming.stdin.take().unwrap();
    stdin.write_all(b"streamed ").unwrap();
    stdin.flush().unwrap();
    // Wait (bounded) until the writer is inside the store: its temp file exists. The old
    // code had taken the key's lock by then and kept it until stdin closed.
    let vars = sb.data_dir().join("variables");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_dir(&vars)
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with(".tmp-"))
    {
        assert!(
            Instant::now() < deadline,
            "the streaming writer never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    sb.set(&["k", "meanwhile"]);
    assert_eq!(sb.get("k"), b"meanwhile");
    stdin.write_all(b"text").unwrap();
    drop(stdin);
    assert!(streaming.wait().unwrap().success());
    assert_eq!(sb.get("k"), b"streamed text");
}

#[test]
fn rm_and_clear_remove_lock_files() {
    let sb = Sandbox::new();
    for key in ["a", "b", "c"] {
        sb.set(&[key, "v"]);
    }
    let locks = sb.data_dir().join("locks");
    let count = || std::fs::read_dir(&locks).unwrap().count();
    assert_eq!(count(), 3);
    sb.vars(&["rm", "a"]).assert().success();
    assert_eq!(count(), 2);
    sb.vars(&["clear"]).assert().success();
    assert_eq!(count(), 0);
}

/// Rewrites the `file` variable `key` as a process that may write variables could:
/// consistent size and sha256, but its reference unsigned (`signature: null`) or signed
/// with a key of the forger's own.
fn forge(sb: &Sandbox, key: &str, signature: serde_json::Value) {
    use sha2::Digest as _;
    let path = path_of(sb, key);
    let path = if path.extension().is_some_and(|e| e == "json") {
        path
    } else {
        sb.data_dir().join("variables").join(format!("{key}.json"))
    };
    let mut file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    file["value"]["signature"] = signature;
    let value = serde_json::to_vec(&file["value"]).unwrap();
    file["ref"]["sizeBytes"] = value.len().into();
    file["ref"]["sha256"] = format!("{:x}", sha2::Sha256::digest(&value)).into();
    std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
}

#[test]
fn a_forged_file_variable_is_marked_in_the_list() {
    let sb = Sandbox::new();
    let secret = sb.file("secret.txt", "not for the model\n");
    let honest = sb.file("honest.txt", "fine\n");
    for (key, path) in [
        ("unsigned", &secret),
        ("self-signed", &secret),
        ("honest", &honest),
    ] {
        sb.set(&[key, "--ref", path.to_str().unwrap()]);
    }
    forge(&sb, "unsigned", serde_json::Value::Null);
    forge(&sb, "self-signed", serde_json::json!("00".repeat(32)));

    let out = sb.vars(&["list"]).assert().success();
    let table = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let row = |key: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("no row for {key} in\n{table}"))
            .to_owned()
    };
    assert!(row("unsigned").contains("file (unsigned)"), "{table}");
    assert!(row("self-signed").contains("file (unsigned)"), "{table}");
    assert!(!row("honest").contains("unsigned"), "{table}");
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        stderr.contains("unsigned") && stderr.contains("--ref"),
        "the warning says what to do: {stderr}"
    );
    // Nothing was read through the forged references, and they are still refused.
    sb.vars(&["get", "unsigned"])
        .assert()
        .failure()
        .stdout("")
        .stderr(predicate::str::contains("signature"));
}

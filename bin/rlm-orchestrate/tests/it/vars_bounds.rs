//! `vars set --file` is bounded like a context (`--max-bytes`, default and variable
//! those of `--max-context-bytes`), and leaves no temporary file behind on any exit:
//! past the bound, on an error, on Ctrl-C or SIGTERM.

use std::path::Path;
use std::process::{Command, Stdio};

use predicates::prelude::*;
use serde_json::Value;

use crate::support::{Sandbox, BIN};

/// The store's temporary files (`.tmp-*.partial`) under `data_dir`.
fn partial_files(data_dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(data_dir.join("variables")) else {
        return Vec::new();
    };
    entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".partial"))
        .collect()
}

fn keys(sb: &Sandbox) -> Vec<String> {
    let out = sb.vars(&["list", "--json"]).assert().success();
    let list: Vec<Value> = serde_json::from_slice(&out.get_output().stdout).unwrap();
    list.iter()
        .map(|v| v["key"].as_str().unwrap().to_owned())
        .collect()
}

/// Issue 22, item 12a: `vars set KEY --file /dev/zero` wrote hundreds of MB to a
/// `.partial` file and had no bound.
#[test]
fn a_value_past_max_bytes_is_refused_and_leaves_nothing() {
    let sb = Sandbox::new();
    sb.set(&["keep", "precious"]);
    let before = sb.show_json("keep");
    // An endless device as text; a long JSON array (it parses as far as the bound).
    let array = sb.file("array.json", format!("[{}1]", "1,".repeat(1 << 20)));
    let cases: [(&str, &[&str]); 3] = [
        ("/dev/zero", &[]),
        ("/dev/zero", &["--if-sha256", "none"]),
        (array.to_str().unwrap(), &["--json"]),
    ];
    for (file, extra) in cases {
        let args = ["set", "big", "--file", file, "--max-bytes", "1048576"];
        sb.vars(&[&args[..], extra].concat())
            .assert()
            .code(2)
            .stderr(predicate::str::contains(
                "larger than --max-bytes (1048576 bytes)",
            ));
        assert_eq!(partial_files(&sb.data_dir()), Vec::<String>::new());
    }
    // The default is that of --max-context-bytes, and so is the variable.
    sb.vars(&["set", "big", "--file", "/dev/zero"])
        .env("RLM_MAX_CONTEXT_BYTES", "4096")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "larger than --max-bytes (4096 bytes)",
        ));
    // At the bound exactly, the value is stored.
    let exact = sb.file("exact.txt", "x".repeat(4096));
    sb.vars(&[
        "set",
        "exact",
        "--file",
        exact.to_str().unwrap(),
        "--max-bytes",
        "4096",
    ])
    .assert()
    .success();
    assert_eq!(keys(&sb), ["exact", "keep"]);
    assert_eq!(sb.show_json("keep"), before);
    assert_eq!(partial_files(&sb.data_dir()), Vec::<String>::new());
}

/// Issue 22, item 12a: SIGTERM (or Ctrl-C) while a value streams in removes the
/// temporary file and exits 130; nothing is stored.
#[test]
fn a_signal_during_vars_set_leaves_no_partial_file() {
    for signal in [
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGINT,
    ] {
        let sb = Sandbox::new();
        sb.set(&["keep", "precious"]);
        let mut child = Command::new(BIN)
            .current_dir(sb.root())
            .env_remove("RLM_DATA_DIR")
            .arg("--data-dir")
            .arg(sb.data_dir())
            .args(["vars", "set", "big", "--file", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        // Some of the value, then a quiet pipe kept open: the read waits.
        std::io::Write::write_all(&mut stdin, &[b'y'; 1 << 20]).unwrap();
        let mut waited = 0;
        while partial_files(&sb.data_dir()).is_empty() {
            waited += 1;
            assert!(waited < 100_000, "no temporary file appeared");
            std::thread::yield_now();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
        nix::sys::signal::kill(pid, signal).unwrap();
        let output = child.wait_with_output().unwrap();
        drop(stdin);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(130), "{signal}: {stderr}");
        assert_eq!(
            partial_files(&sb.data_dir()),
            Vec::<String>::new(),
            "{signal}"
        );
        assert_eq!(keys(&sb), ["keep"], "{signal}");
    }
}

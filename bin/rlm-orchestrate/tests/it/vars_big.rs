//! Large values: streamed in from a file, out to a pipe, and a reader that stops early.

use std::io::Read;
use std::process::{Command, Stdio};

use crate::support::{Sandbox, BIN};

/// About `len` bytes of text exercising JSON escapes and multi-byte UTF-8.
fn big_text(len: usize) -> String {
    let line = "2024-01-01T00:00:00Z ERROR auth: \"token\" expired\tuser=é😀 path=C:\\tmp\n";
    line.repeat(len / line.len() + 1)
}

#[test]
fn twenty_megabyte_file_round_trips() {
    let sb = Sandbox::new();
    let text = big_text(20 * 1024 * 1024);
    let file = sb.file("big.log", &text);
    let out = sb.set(&["big", "--file", file.to_str().unwrap()]);
    let encoded_len = serde_json::to_string(&text).unwrap().len();
    assert!(
        out.starts_with(&format!("big: text, scope global, {encoded_len} bytes, ")),
        "{out}"
    );
    let got = sb.get("big");
    assert!(got == text.as_bytes(), "value differs after the round trip");
}

#[test]
fn large_stdin_round_trips() {
    let sb = Sandbox::new();
    let text = big_text(3 * 1024 * 1024);
    sb.vars(&["set", "piped", "--file", "-"])
        .write_stdin(text.clone())
        .assert()
        .success();
    assert!(sb.get("piped") == text.as_bytes());
}

/// Runs `vars get KEY`, reads `n` bytes of its stdout, closes the pipe and returns the
/// exit status, stderr and what was read.
fn get_then_close(
    sb: &Sandbox,
    key: &str,
    n: usize,
) -> (std::process::ExitStatus, String, Vec<u8>) {
    let mut child = Command::new(BIN)
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["vars", "get", key])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = vec![0u8; n];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    // The read end is dropped here: further writes by the child get EPIPE.
    let out = child.wait_with_output().unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        head,
    )
}

#[test]
fn closed_stdout_is_success() {
    let sb = Sandbox::new();
    let text = big_text(8 * 1024 * 1024);
    let file = sb.file("big.log", &text);
    sb.set(&["big", "--file", file.to_str().unwrap()]);
    let (status, stderr, head) = get_then_close(&sb, "big", 10);
    assert!(status.success(), "{status:?}: {stderr}");
    assert_eq!(stderr, "");
    assert_eq!(head, &text.as_bytes()[..10]);

    // The same through a shell pipeline, as a user would write it.
    let status_file = sb.root().join("status");
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"{ "$0" --data-dir "$1" vars get big; echo $? > "$2"; } | head -c 10"#)
        .arg(BIN)
        .arg(sb.data_dir())
        .arg(&status_file)
        .output()
        .unwrap();
    assert_eq!(out.stdout, &text.as_bytes()[..10]);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(std::fs::read_to_string(&status_file).unwrap(), "0\n");

    // JSON values are streamed through another path; it must behave the same.
    let items: Vec<String> = (0..200_000).map(|i| format!("item {i}")).collect();
    let json = serde_json::to_string(&items).unwrap();
    let file = sb.file("big.json", &json);
    sb.set(&["big-json", "--json", "--file", file.to_str().unwrap()]);
    let (status, stderr, head) = get_then_close(&sb, "big-json", 10);
    assert!(status.success(), "{status:?}: {stderr}");
    assert_eq!(stderr, "");
    assert_eq!(head, b"[\n  \"item ");
}

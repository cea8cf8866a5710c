//! `vars get --lines / --bytes / --count` and `vars view` / `vars gc`: a variable's
//! text read as plain text, a range at a time or as a file, by tools that cannot read
//! a variable file (one JSON line however large the value).

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use predicates::prelude::*;

use crate::support::{Sandbox, BIN};

/// A text with JSON escapes, `\r\n`, multi-byte characters and no final newline.
const TEXT: &str = "one \"quoted\"\r\ntwo é\\path\n\tthree 😀\n\nfive 日本\u{1}";

/// `vars get KEY ARGS…` that must succeed; its stdout.
fn get(sb: &Sandbox, key: &str, args: &[&str]) -> String {
    let out = sb
        .vars(&[&["get", key], args].concat())
        .assert()
        .success()
        .stderr("");
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

/// Lines `first..=last` of `text`, 1-based, with their newlines (what `sed -n` prints).
fn sed(text: &str, first: usize, last: usize) -> String {
    text.split_inclusive('\n')
        .skip(first - 1)
        .take(last + 1 - first)
        .collect()
}

fn text_sandbox() -> Sandbox {
    let sb = Sandbox::new();
    let file = sb.file("text.txt", TEXT);
    sb.set(&["t", "--file", file.to_str().unwrap()]);
    sb
}

#[test]
fn lines_print_raw_like_sed() {
    let sb = text_sandbox();
    assert_eq!(get(&sb, "t", &["--lines", "1:2"]), sed(TEXT, 1, 2));
    assert_eq!(get(&sb, "t", &["--lines", "1:1"]), "one \"quoted\"\r\n");
    assert_eq!(get(&sb, "t", &["--lines", "3"]), "\tthree 😀\n");
    assert_eq!(get(&sb, "t", &["--lines", "4"]), "\n");
    assert_eq!(get(&sb, "t", &["--lines", "2:"]), sed(TEXT, 2, 5));
    assert_eq!(get(&sb, "t", &["--lines", ":3"]), sed(TEXT, 1, 3));
    assert_eq!(get(&sb, "t", &["--lines", "5"]), "five 日本\u{1}");
    assert_eq!(get(&sb, "t", &["--lines", "4:99"]), "\nfive 日本\u{1}");
    assert_eq!(get(&sb, "t", &["--lines", "1:"]), TEXT);
}

#[test]
fn bytes_print_whole_characters_and_consecutive_ranges_tile_the_text() {
    let sb = text_sandbox();
    assert_eq!(get(&sb, "t", &["--bytes", "0:3"]), "one");
    assert_eq!(get(&sb, "t", &["--bytes", ":3"]), "one");
    assert_eq!(get(&sb, "t", &["--bytes", "3:3"]), "");
    assert_eq!(get(&sb, "t", &["--bytes", "0:"]), TEXT);
    let e_acute = TEXT.find('é').unwrap();
    // A bound inside `é` moves forward past it: the range holding its first byte
    // prints it.
    let cut = (e_acute + 1).to_string();
    assert_eq!(
        get(&sb, "t", &["--bytes", &format!("{e_acute}:{cut}")]),
        "é"
    );
    assert_eq!(
        get(&sb, "t", &["--bytes", &format!("{cut}:{}", e_acute + 2)]),
        ""
    );
    for step in [1, 2, 3, 5, 7] {
        let mut joined = String::new();
        let mut at = 0;
        while at < TEXT.len() {
            joined += &get(&sb, "t", &["--bytes", &format!("{at}:{}", at + step)]);
            at += step;
        }
        assert_eq!(joined, TEXT, "pages of {step} bytes");
    }
}

#[test]
fn count_gives_lines_bytes_and_characters_as_json() {
    let sb = text_sandbox();
    let counts: serde_json::Value = serde_json::from_str(&get(&sb, "t", &["--count"])).unwrap();
    assert_eq!(
        counts,
        serde_json::json!({
            "lines": 5,
            "bytes": TEXT.len(),
            "chars": TEXT.chars().count(),
        })
    );
    assert!(get(&sb, "t", &["--count"]).starts_with("{\"lines\":5,"));
}

#[test]
fn json_variables_range_over_their_pretty_json() {
    let sb = Sandbox::new();
    sb.set(&["cfg", "--json", r#"{"depth": 2, "names": ["a", "é"]}"#]);
    let pretty = "{\n  \"depth\": 2,\n  \"names\": [\n    \"a\",\n    \"é\"\n  ]\n}";
    assert_eq!(get(&sb, "cfg", &["--lines", "1:"]), pretty);
    assert_eq!(get(&sb, "cfg", &["--lines", "3:4"]), sed(pretty, 3, 4));
    assert_eq!(get(&sb, "cfg", &["--bytes", "0:1"]), "{");
    let view = view(&sb, "cfg");
    assert_eq!(std::fs::read_to_string(view).unwrap(), pretty);
}

#[test]
fn file_variables_range_over_the_file_and_refuse_a_changed_one() {
    let sb = Sandbox::new();
    let log = sb.file("app.log", "a\nb\nc\n");
    sb.set(&["log", "--ref", log.to_str().unwrap()]);
    assert_eq!(get(&sb, "log", &["--lines", "2:3"]), "b\nc\n");
    assert_eq!(get(&sb, "log", &["--bytes", "4:"]), "c\n");
    assert_eq!(view(&sb, "log"), std::fs::canonicalize(&log).unwrap());
    std::fs::write(&log, "changed\n").unwrap();
    for args in [
        &["get", "log", "--lines", "1"][..],
        &["get", "log", "--bytes", "0:1"],
        &["get", "log", "--count"],
        &["view", "log"],
    ] {
        sb.vars(args)
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains("changed since it was referenced"));
    }
}

#[test]
fn a_range_past_the_end_prints_nothing_and_says_how_long_the_text_is() {
    let sb = text_sandbox();
    sb.vars(&["get", "t", "--lines", "6:9"])
        .assert()
        .success()
        .stdout("")
        .stderr(predicate::str::contains(
            "has 5 lines: nothing from line 6 on",
        ));
    let len = TEXT.len();
    sb.vars(&["get", "t", "--bytes", &format!("{len}:")])
        .assert()
        .success()
        .stdout("")
        .stderr(predicate::str::contains(format!("has {len} bytes")));
    sb.vars(&["-q", "get", "t", "--lines", "60"])
        .assert()
        .success()
        .stdout("")
        .stderr("");
}

#[test]
fn bad_ranges_are_exit_2_print_nothing_and_change_nothing() {
    let sb = text_sandbox();
    let before = sb.show_json("t");
    for (flag, range, says) in [
        ("--lines", "0", "numbered from 1"),
        ("--lines", "1:0", "numbered from 1"),
        ("--lines", "0:3", "numbered from 1"),
        ("--lines", "5:3", "before it starts"),
        ("--lines", "x:y", "not a whole number"),
        ("--lines", "-5:", "negative"),
        ("--lines", "", "empty"),
        ("--bytes", "5", "no colon"),
        ("--bytes", "9:3", "before it starts"),
        ("--bytes", "1:-1", "negative"),
        ("--bytes", "a:", "not a whole number"),
    ] {
        sb.vars(&["get", "t", flag, range])
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(says))
            .stderr(predicate::str::contains(flag));
    }
    for args in [
        &["get", "t", "--lines", "1", "--bytes", "0:1"][..],
        &["get", "t", "--lines", "1", "--count"],
        &["get", "t", "--bytes", "0:1", "--count"],
    ] {
        sb.vars(args)
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains("cannot be used with"));
    }
    for args in [
        &["get", "absent", "--lines", "1"][..],
        &["get", "absent", "--bytes", "0:1"],
        &["get", "absent", "--count"],
        &["view", "absent"],
    ] {
        sb.vars(args)
            .assert()
            .code(4)
            .stdout("")
            .stderr(predicate::str::contains(r#"no variable named "absent""#));
    }
    assert_eq!(sb.show_json("t"), before);
    assert_eq!(sb.get("t"), TEXT.as_bytes());
}

/// `vars view KEY` that must succeed: the path it prints.
fn view(sb: &Sandbox, key: &str) -> PathBuf {
    let out = sb.vars(&["view", key]).assert().success().stderr("");
    let path = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    PathBuf::from(path.strip_suffix('\n').unwrap())
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_view_is_a_private_plain_text_file_shared_until_the_variable_changes() {
    let sb = text_sandbox();
    let path = view(&sb, "t");
    assert!(path.is_absolute());
    assert_eq!(
        path,
        sb.data_dir()
            .canonicalize()
            .unwrap()
            .join("views")
            .join(format!("{}.txt", sb.sha("t")))
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), TEXT);
    assert_eq!((mode(&path), mode(path.parent().unwrap())), (0o600, 0o700));
    assert_eq!(view(&sb, "t"), path, "shared");
    sb.set(&["t", "changed"]);
    let new = view(&sb, "t");
    assert_ne!(new, path);
    assert_eq!(std::fs::read_to_string(&new).unwrap(), "changed");
}

#[test]
fn gc_and_clear_remove_the_views_no_variable_has() {
    let sb = text_sandbox();
    sb.set(&["other", "kept"]);
    let stale = view(&sb, "t");
    let kept = view(&sb, "other");
    sb.vars(&["rm", "t"]).assert().success();
    // Made a while ago (views younger than two minutes are kept).
    let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(600);
    for path in [&stale, &kept] {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(long_ago).unwrap();
    }
    sb.vars(&["gc"])
        .assert()
        .success()
        .stdout("removed 1 stale text view\n");
    assert!(!stale.exists() && kept.exists());
    sb.vars(&["gc"])
        .assert()
        .success()
        .stdout("removed 0 stale text views\n");
    sb.vars(&["clear"]).assert().success();
    assert!(!kept.exists());
    // No data directory: nothing to do, and none is made.
    let empty = Sandbox::new();
    empty
        .vars(&["gc"])
        .assert()
        .success()
        .stdout("removed 0 stale text views\n");
    assert!(!empty.data_dir().exists());
}

/// The peak resident memory (`VmHWM`, KiB) of the running process `pid`.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .unwrap_or_else(|| panic!("no VmHWM in /proc/{pid}/status:\n{status}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A 64 MiB text variable is never loaded whole: `vars get --bytes` of its last
/// 4 MiB streams through the rest first, and the process's peak memory, read once
/// it printed its first byte (all it read before is behind it), stays far below the
/// value's size.
#[test]
fn a_range_at_the_end_of_a_large_value_is_streamed() {
    let sb = Sandbox::new();
    let line = "2024-01-01 ERROR \"token\" é😀 path=C:\\tmp\tx\n";
    let text = line.repeat(64 * 1024 * 1024 / line.len());
    let file = sb.file("big.log", &text);
    drop(text);
    sb.set(&["big", "--file", file.to_str().unwrap()]);
    let len = std::fs::metadata(&file).unwrap().len();
    let start = len - 4 * 1024 * 1024;
    let mut child = Command::new(BIN)
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["vars", "get", "big", "--bytes", &format!("{start}:")])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    // The child now waits for us to read its 4 MiB: it cannot have exited.
    let peak = peak_rss_kib(child.id());
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(rest.len() as u64 + 1, len - start);
    assert!(
        peak < 40 * 1024,
        "peak RSS {peak} KiB while streaming a 64 MiB value"
    );
}

//! Contexts larger than memory, end to end: a multi-GB file (created sparse, so it
//! costs the disk nothing) is referenced rather than copied, read lazily by the
//! Python kernel without any flag, and searched; `file` variables from the shell
//! (`vars set --ref`, `show`, `get`, `path`) and the errors for a changed file and
//! for an eager load over `--max-context-bytes`.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockRule, MockScript};
use serde_json::Value;

use crate::support::mock_replies as mock;
use crate::support::Sandbox;

fn run_cmd(sb: &Sandbox, mock: &MockLlmThread, task: &str) -> assert_cmd::Command {
    let mut cmd = sb.bare();
    cmd.env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", task, "--base-url"])
        .arg(mock.control().openai_base_url())
        .args(["--model", "mock", "--exec-timeout", "120"]);
    cmd
}

/// Bytes under `dir`, recursively.
fn du(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            du(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

/// A sparse file of `size` bytes: log lines at the start and the end, `needle` on a
/// line of its own at `needle_at`, holes (NUL bytes, valid UTF-8) in between.
fn sparse_log(path: &Path, size: u64, needle_at: u64, needle: &str) {
    let mut file = std::fs::File::create(path).unwrap();
    let lines = "2026-11-24T08:00:00Z svc=api level=info msg=\"served\"\n".repeat(2000);
    file.write_all(lines.as_bytes()).unwrap();
    file.seek(SeekFrom::Start(needle_at)).unwrap();
    write!(file, "\n{needle}\n").unwrap();
    file.seek(SeekFrom::Start(size - lines.len() as u64))
        .unwrap();
    file.write_all(lines.as_bytes()).unwrap();
    assert_eq!(file.metadata().unwrap().len(), size);
}

#[test]
fn a_3_gb_file_is_referenced_and_searched_lazily_without_any_flag() {
    let sb = Sandbox::new();
    let big = sb.root().join("huge.log");
    let needle = "NEEDLE-3GB=4b1d";
    sparse_log(&big, 3 << 30, (5u64 << 29) + 12_345, needle);
    std::fs::create_dir_all(sb.data_dir()).unwrap();
    let before = du(&sb.data_dir());
    let mock = mock(&[
        "```repl\nhits = search(context, 'NEEDLE-3GB=')\nprint(type(context).__name__, len(hits), hits[0]['line'])\nat = hits[0]['offset']\nanswer = context[at:at + 15]\n```",
        "FINAL_VAR(answer)",
    ]);
    let out = run_cmd(&sb, &mock, "What is the needle?")
        .arg("--context")
        .arg(&big)
        .arg("--json")
        .assert()
        .success();
    let result: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(result["answer"], needle);

    let requests = mock.control().requests();
    let first = requests[0].last_user_message().unwrap_or_default();
    assert!(
        first.contains("- lazy:") && first.contains("about ") && first.contains("3.0 GiB"),
        "the model is told the context is a lazy view: {first}"
    );
    let second = requests[1].last_user_message().unwrap_or_default();
    assert!(second.contains("LazyText 1 2002"), "{second}");
    // The trace says what the context was.
    let run_id = result["run_id"].as_str().unwrap();
    let shown = sb
        .bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["runs", "show", run_id])
        .assert()
        .success();
    let shown = String::from_utf8_lossy(&shown.get_output().stdout).into_owned();
    assert!(
        shown.contains("context: str · 3.0 GiB · about ")
            && shown.contains("huge.log · referenced, read lazily"),
        "{shown}"
    );
    // The store holds a reference, not a copy: the run added its trace and a few
    // small variables.
    let grown = du(&sb.data_dir()) - before;
    assert!(grown < 1 << 20, "the data directory grew by {grown} bytes");
}

#[test]
fn an_eager_load_over_the_limit_names_the_lazy_mode_and_asks_nothing() {
    let sb = Sandbox::new();
    let file = sb.file("small.log", "x".repeat(2000));
    let mock = mock(&["FINAL(no)"]);
    let out = run_cmd(&sb, &mock, "q")
        .arg("--context")
        .arg(&file)
        .args(["--lazy-context", "never", "--max-context-bytes", "1000"])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(
        stderr.contains("over --max-context-bytes 1000")
            && stderr.contains("read it lazily instead"),
        "{stderr}"
    );
    assert!(mock.control().requests().is_empty());
    // Referenced and lazy (the default above --lazy-above), the same file needs no cap.
    let mock = crate::support::mock_replies(&["FINAL(read)"]);
    run_cmd(&sb, &mock, "q")
        .arg("--context")
        .arg(&file)
        .args(["--lazy-above", "100", "--max-context-bytes", "1000"])
        .assert()
        .success();
}

#[test]
fn file_variables_from_the_shell_refer_check_and_hash_their_file() {
    let sb = Sandbox::new();
    let log = sb.file("app.log", "one\ntwo\nthree\n");
    let out = sb
        .vars(&["set", "logs", "--ref", log.to_str().unwrap()])
        .assert()
        .success();
    let said = String::from_utf8_lossy(&out.get_output().stdout);
    assert!(said.starts_with("logs: file, scope global"), "{said}");
    assert_eq!(sb.get("logs"), b"one\ntwo\nthree\n");
    let shown = sb.show_json("logs");
    assert_eq!(shown["ref"]["type"], "file");
    assert_eq!(shown["file"]["size"], 14);
    let canonical = std::fs::canonicalize(&log).unwrap();
    assert_eq!(shown["file"]["path"], canonical.to_str().unwrap());
    // `vars get` read it whole, so the contents' sha256 is now recorded (this is
    // sha256("one\ntwo\nthree\n")).
    assert_eq!(
        shown["file"]["sha256"],
        "b6285c57e8797db5d4c51c80d6f11938afda9b11c6a003549709189e9b4b92a2"
    );
    assert_eq!(shown["status"], "unchanged since it was referenced");
    let path = sb.vars(&["path", "logs"]).assert().success();
    assert_eq!(
        String::from_utf8_lossy(&path.get_output().stdout).trim_end(),
        canonical.to_str().unwrap(),
        "a sub-agent is given the file itself"
    );

    // Changed: shown as such, refused when read (bad input, exit 2), and kept.
    std::fs::write(&log, "one\ntwo\n").unwrap();
    let shown = sb.show_json("logs");
    assert!(
        shown["status"]
            .as_str()
            .unwrap()
            .contains("size went from 14 to 8 bytes"),
        "{shown}"
    );
    let out = sb.vars(&["get", "logs"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(
        stderr.contains("changed since it was referenced") && stderr.contains("--ref"),
        "{stderr}"
    );
    assert_eq!(sb.show_json("logs")["ref"]["type"], "file");
    // Referenced again, it reads the new contents.
    sb.vars(&["set", "logs", "--ref", log.to_str().unwrap()])
        .assert()
        .success();
    assert_eq!(sb.get("logs"), b"one\ntwo\n");

    // Bad input: no such file, a directory.
    for bad in ["/nonexistent/x.log", "."] {
        sb.vars(&["set", "x", "--ref", bad]).assert().code(2);
    }
}

#[test]
fn a_nested_run_gets_a_lazy_context_by_reference_and_reads_it_lazily() {
    let sb = Sandbox::new();
    let mut text = "2026-11-24 svc=api ok\n".repeat(5000);
    text.push_str("CODE=9d2e1f\n");
    text.push_str(&"2026-11-24 svc=db ok\n".repeat(5000));
    let file = sb.file("app.log", &text);
    let script = MockScript::new()
        // The child: told its context is lazy, it searches it.
        .rule(MockRule::function("the child's first turn", |request| {
            let message = request.last_user_message().unwrap_or_default();
            (request.model() == Some("sub-model") && message.contains("- lazy:")).then(|| {
                MockReply::text(
                    "```repl\nat = search(context, 'CODE=')[0]['offset']\nfound = type(context).__name__ + ' ' + context[at:at + 11]\n```",
                )
            })
        }))
        .rule(MockRule::function("the child's answer", |request| {
            (request.model() == Some("sub-model")).then(|| MockReply::text("FINAL_VAR(found)"))
        }))
        .then(MockReply::text(
            "```repl\nanswer = sub_rlm('find the code', context)\nprint(answer)\n```",
        ))
        .then(MockReply::text("FINAL_VAR(answer)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let result = crate::subagents::run_json(
        &sb,
        &mock.control().openai_base_url(),
        "delegate",
        &[
            "--context",
            file.to_str().unwrap(),
            "--lazy-context",
            "always",
        ],
    );
    assert_eq!(result["answer"], "LazyText CODE=9d2e1f", "{result}");
    assert_eq!(result["sub_agents"], 1);
    // Nothing was copied for the child: the only context variable is the reference.
    let out = sb.vars(&["list", "--json"]).assert().success();
    let listed: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let big: Vec<&Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["sizeBytes"].as_u64().unwrap_or(0) > 10_000)
        .collect();
    assert!(big.is_empty(), "a copy of the context was stored: {big:?}");
}

#[test]
fn javascript_reads_a_referenced_file_whole_and_refuses_a_lazy_one_naming_python() {
    let sb = Sandbox::new();
    let file = sb.file("app.log", "alpha\nCODE=js42\nomega\n");
    let mock = mock(&[
        "```repl\nconst i = context.indexOf('CODE=');\nvar answer = context.slice(i, i + 9);\n```",
        "FINAL_VAR(answer)",
    ]);
    let out = run_cmd(&sb, &mock, "code?")
        .arg("--context")
        .arg(&file)
        .args(["--env", "js", "--json"])
        .assert()
        .success();
    let result: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(result["answer"], "CODE=js42");

    let mock = crate::support::mock_replies(&["```repl\nconsole.log(context.length)\n```"]);
    let out = run_cmd(&sb, &mock, "code?")
        .arg("--context")
        .arg(&file)
        .args(["--env", "js", "--lazy-context", "always"])
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(
        stderr.contains("would be read lazily") && stderr.contains("--env python"),
        "{stderr}"
    );
}

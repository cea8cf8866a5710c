//! `rlm-orchestrate eval --arm NAME='COMMAND'`: external arms (here the stub arm,
//! `scripts/arms/stub.py`, which answers from the context without a model) scored
//! beside the built-in ones against the oracle; an arm that writes `{output_file}`
//! with the JSON answer form, one that fails, one that times out, one that cannot
//! start; a killed evaluation resumed without asking scored items again; and the
//! `rlms` adapter without its library.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rlm_test_support::mock_llm::MockLlmThread;
use serde_json::Value;

use crate::eval::{eval_command as eval, results};
use crate::support::Sandbox;

/// The stub arm.
const STUB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/arms/stub.py");
/// The official library's adapter.
const RLMS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/arms/rlms.py");

fn oracle() -> MockLlmThread {
    crate::eval::oracle(Duration::ZERO)
}

/// `--arm NAME='python3 stub.py --context-file {context_file} EXTRA'`.
fn stub_arm(name: &str, extra: &str) -> String {
    format!("{name}=python3 '{STUB}' --context-file {{context_file}} {extra}")
}

fn of_arm<'a>(all: &'a [Value], arm: &str) -> Vec<&'a Value> {
    let found: Vec<&Value> = all.iter().filter(|r| r["arm"] == arm).collect();
    assert!(!found.is_empty(), "no results of arm {arm}");
    found
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn external_arms_are_scored_beside_the_baseline_with_tokens_when_they_report_them() {
    let sb = Sandbox::new();
    let mock = oracle();
    let out = sb.root().join("eval");
    let plain = stub_arm("stub", "--question {question}");
    let json = stub_arm(
        "stub-json",
        "--question-file {question_file} --output-file {output_file} --json --forced",
    );
    let output = eval(
        &sb,
        &mock,
        &out,
        &[
            "--lengths",
            "2k,64k",
            "--items",
            "2",
            "--baseline-window",
            "8k",
            "--arms",
            "baseline,stub,stub-json",
            "--arm",
            &plain,
            "--arm",
            &json,
        ],
    )
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let all = results(&out);
    assert_eq!(all.len(), 4 * 2 * 2 * 3, "suites × lengths × items × arms");
    // The stub reads the whole context: every answer right, at both lengths.
    for arm in ["stub", "stub-json"] {
        for result in of_arm(&all, arm) {
            assert_eq!(result["score"], 1.0, "{result}");
            assert!(result["failed"].is_null() && result["error"].is_null());
        }
    }
    // Answered on stdout, without the JSON form: tokens unknown, not 0.
    for result in of_arm(&all, "stub") {
        assert!(result["tokens"].is_null() && result["input_tokens"].is_null());
        assert_eq!(result["forced"], false);
    }
    // Written to {output_file} in the JSON form: its usage and forcing are kept.
    for result in of_arm(&all, "stub-json") {
        assert!(result["input_tokens"].as_u64().unwrap() > 400, "{result}");
        assert!(result["output_tokens"].as_u64().unwrap() > 0);
        assert_eq!(result["forced"], true);
    }
    assert!(
        stdout.contains("| sniah | 64k | stub | 2 | 2 | 100 % | 34–100 % | 100 % | unknown | unknown | unknown |"),
        "{stdout}"
    );
    let forced_row = stdout
        .lines()
        .find(|l| l.starts_with("| pairs | 2k | stub-json |"))
        .unwrap();
    assert!(
        forced_row.ends_with("| 2 | 0 |"),
        "forced 2, failed 0: {forced_row}"
    );
    assert!(
        stdout.contains("| pairs | 64k | baseline | 2 | 0 | 0 % | 0–66 % |"),
        "{stdout}"
    );
    let svg = std::fs::read_to_string(out.join("accuracy.svg")).unwrap();
    assert!(svg.contains("sniah · stub-json") && svg.contains("Wilson interval"));
}

#[test]
fn an_arm_that_fails_or_times_out_fails_its_items_and_one_that_cannot_start_is_an_error() {
    let sb = Sandbox::new();
    let mock = oracle();
    let out = sb.root().join("eval");
    let failing = stub_arm("failing", "--question {question} --fail");
    let hanging = stub_arm("hanging", "--question {question} --hang");
    let output = eval(
        &sb,
        &mock,
        &out,
        &[
            "--suite",
            "sniah",
            "--lengths",
            "2k",
            "--items",
            "1",
            "--arms",
            "failing,hanging",
            "--arm",
            &failing,
            "--arm",
            &hanging,
            // Long enough for the failing arm's Python to start and exit on a loaded
            // machine (1 s was not, beside a model server).
            "--arm-timeout",
            "5",
        ],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "failed items are scored: {stderr}");
    assert!(
        stderr.contains("failed: sniah 2k #0 failing: arm failing exited with code 3"),
        "{stderr}"
    );
    let all = results(&out);
    let failed = of_arm(&all, "failing")[0];
    assert_eq!(failed["score"], 0.0);
    assert!(failed["error"].is_null());
    assert_eq!(failed["failed"], "arm failing exited with code 3");
    assert!(failed["stderr_tail"]
        .as_str()
        .unwrap()
        .contains("failing on purpose"));
    let hung = of_arm(&all, "hanging")[0];
    assert_eq!(
        hung["failed"],
        "arm hanging timed out after 5 s (--arm-timeout)"
    );
    assert!(hung["stderr_tail"]
        .as_str()
        .unwrap()
        .contains("hanging on purpose"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    for arm in ["failing", "hanging"] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| sniah | 2k | {arm} |")))
            .unwrap();
        assert!(row.contains("| 1 | 0 | 0 % | 0–79 % |"), "{row}");
        assert!(row.ends_with("| 0 | 1 |"), "one failed: {row}");
    }

    // A program that does not exist: not scored, the eval fails and says why.
    let missing = eval(
        &sb,
        &mock,
        &sb.root().join("eval-missing"),
        &[
            "--suite",
            "sniah",
            "--lengths",
            "2k",
            "--items",
            "1",
            "--arms",
            "missing",
            "--arm",
            "missing=/nonexistent/arm --q {question}",
        ],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot start arm missing (`/nonexistent/arm --q {question}`)"),
        "{stderr}"
    );
}

#[test]
fn bad_arms_are_refused_before_anything_runs() {
    let sb = Sandbox::new();
    let mock = oracle();
    let out = sb.root().join("eval");
    for (flags, says) in [
        (&["--arm", "rlm=cat"][..], "`rlm` is a built-in arm"),
        (&["--arm", "cat"][..], "write NAME=COMMAND"),
        (
            &["--arm", "a=cat", "--arm", "a=cat"][..],
            "two arms have this name",
        ),
        (
            &["--arm", "a=cat", "--arms", "rlm,b"][..],
            "unknown arm `b`; use rlm, baseline, a",
        ),
    ] {
        let output = eval(&sb, &mock, &out, flags).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
    assert_eq!(mock.control().request_count(), 0);
}

/// A crash (`kill -9`) midway: what was scored is in results.json, and `--resume`
/// asks only the rest, of the external arm too (each invocation of the stub is
/// counted in a file).
#[test]
fn a_killed_evaluation_resumes_without_asking_the_external_arm_again() {
    let sb = Sandbox::new();
    let mock = oracle();
    let out = sb.root().join("eval");
    let first: PathBuf = sb.root().join("first-run.txt");
    let second: PathBuf = sb.root().join("resumed-run.txt");
    let arm = |counter: &Path| {
        stub_arm(
            "stub",
            &format!(
                "--question {{question}} --delay 0.3 --counter '{}'",
                counter.display()
            ),
        )
    };
    let flags = [
        "--suite",
        "sniah",
        "--lengths",
        "2k",
        "--items",
        "6",
        "--parallel",
        "1",
        "--arms",
        "stub",
    ];
    let mut child = eval(
        &sb,
        &mock,
        &out,
        &[&flags[..], &["--arm", &arm(&first)]].concat(),
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    // Wait (bounded) until two answers are scored, then kill it.
    let mut waited = Duration::ZERO;
    while waited < Duration::from_secs(60)
        && (!out.join("results.json").exists() || results(&out).len() < 2)
    {
        std::thread::sleep(Duration::from_millis(20));
        waited += Duration::from_millis(20);
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    let scored: Vec<String> = results(&out)
        .iter()
        .map(|r| format!("sniah-2k-seed1-{}.txt", r["index"]))
        .collect();
    assert!(
        (2..6).contains(&scored.len()),
        "{scored:?} scored before the kill"
    );
    assert!(lines(&first).len() >= scored.len());

    let resumed = eval(
        &sb,
        &mock,
        &out,
        &[&flags[..], &["--arm", &arm(&second), "--resume"]].concat(),
    )
    .output()
    .unwrap();
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let asked_again = lines(&second);
    assert_eq!(
        asked_again.len() + scored.len(),
        6,
        "only the unscored items are asked: {asked_again:?} after {scored:?}"
    );
    for item in &asked_again {
        assert!(
            !scored.contains(item),
            "{item} was scored, then asked again"
        );
    }
    // The names match (so the check above compares like with like): together they are
    // the six items.
    let mut every: Vec<&String> = scored.iter().chain(&asked_again).collect();
    every.sort();
    let want: Vec<String> = (0..6).map(|i| format!("sniah-2k-seed1-{i}.txt")).collect();
    assert_eq!(every, want.iter().collect::<Vec<_>>());
    let all = results(&out);
    assert_eq!(all.len(), 6);
    assert!(all.iter().all(|r| r["score"] == 1.0));
}

/// The adapter of the official library answers `--help` and `--dry-run` without the
/// library, and explains how to install it when it is missing (`python3 -S`: no
/// site-packages, so the library cannot be found even where it is installed).
#[test]
fn the_rlms_adapter_works_without_the_library_and_says_how_to_install_it() {
    let python = |args: &[&str]| {
        std::process::Command::new("python3")
            .arg("-S")
            .arg(RLMS)
            .args(args)
            .output()
            .unwrap()
    };
    let help = python(&["--help"]);
    let stdout = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.status.success(),
        "{}",
        String::from_utf8_lossy(&help.stderr)
    );
    assert!(
        stdout.contains("--context-file") && stdout.contains("setup-rlms.sh"),
        "{stdout}"
    );

    let sb = Sandbox::new();
    let context = sb.file("context.txt", "The special magic number for x is 7.");
    let context = context.to_str().unwrap();
    let item = [
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--question",
        "Which?",
        "--context-file",
        context,
    ];
    let dry = python(&[&item[..], &["--timeout", "900", "--dry-run"]].concat());
    assert!(
        dry.status.success(),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    let call: Value = serde_json::from_slice(&dry.stdout).unwrap();
    assert_eq!(call["backend_kwargs"]["base_url"], "http://127.0.0.1:9/v1");
    assert_eq!(call["backend_kwargs"]["model_name"], "m");
    assert_eq!(call["backend_kwargs"]["timeout"], 900.0);
    assert_eq!(call["root_prompt"], "Which?");
    assert_eq!(call["context_chars"], 36);

    let missing = python(&item);
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("not installed")
            && stderr.contains("scripts/arms/setup-rlms.sh")
            && stderr.contains("rlms==0.1.3"),
        "{stderr}"
    );
}

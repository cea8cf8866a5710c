//! `rlm-orchestrate eval` end to end against the oracle model: the RLM arm scores 100 %,
//! the baseline falls off past its window; results, table and chart are written;
//! `--resume` skips what was scored; Ctrl-C keeps it.

use std::path::Path;
use std::time::Duration;

use rlm_test_support::mock_llm::{oracle_rule, MockLlm, MockLlmThread, MockReply, MockScript};
use serde_json::Value;

use crate::support::{Sandbox, BIN};

fn oracle(delay: Duration) -> MockLlmThread {
    let mut script = MockScript::new().rule(oracle_rule());
    script.when_empty = rlm_test_support::mock_llm::WhenEmpty::Repeat(MockReply::text("?"));
    script.latency = delay;
    MockLlm::spawn_blocking_thread(script).unwrap()
}

fn eval_command(
    sb: &Sandbox,
    mock: &MockLlmThread,
    out: &Path,
    extra: &[&str],
) -> std::process::Command {
    let mut command = std::process::Command::new(BIN);
    command
        .current_dir(sb.root())
        .env_remove("OPENAI_API_KEY")
        .env_remove("RLM_DATA_DIR")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["eval", "--base-url"])
        .arg(mock.control().openai_base_url())
        .args(["--model", "oracle", "--out"])
        .arg(out)
        .args(extra);
    command
}

fn results(out: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(out.join("results.json")).unwrap();
    serde_json::from_str::<Value>(&text)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn mean_score(results: &[Value], suite: &str, length: u64, arm: &str) -> f64 {
    let scores: Vec<f64> = results
        .iter()
        .filter(|r| r["suite"] == suite && r["length"] == length && r["arm"] == arm)
        .map(|r| r["score"].as_f64().unwrap())
        .collect();
    assert!(!scores.is_empty(), "no {suite} {length} {arm}");
    scores.iter().sum::<f64>() / scores.len() as f64
}

/// Two lengths, one within the baseline's 8k window and one far past it.
const SMALL_RUN: [&str; 6] = [
    "--lengths",
    "2k,64k",
    "--items",
    "2",
    "--baseline-window",
    "8k",
];

#[test]
fn the_oracle_scores_the_rlm_full_and_the_baseline_falls_off_past_its_window() {
    let sb = Sandbox::new();
    let mock = oracle(Duration::ZERO);
    let out = sb.root().join("eval");
    let output = eval_command(&sb, &mock, &out, &SMALL_RUN).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let all = results(&out);
    assert_eq!(all.len(), 4 * 2 * 2 * 2, "suites × lengths × items × arms");
    for suite in ["sniah", "multi-needle", "aggregate", "pairs"] {
        for length in [2048, 65536] {
            assert_eq!(
                mean_score(&all, suite, length, "rlm"),
                1.0,
                "{suite} {length}"
            );
        }
        assert_eq!(
            mean_score(&all, suite, 2048, "baseline"),
            1.0,
            "{suite} within the window"
        );
    }
    // Past the window the baseline misses what it cannot see: the needle at 90 %, the
    // counts and pairs of the records beyond 8k.
    assert!(mean_score(&all, "sniah", 65536, "baseline") < 1.0);
    assert_eq!(mean_score(&all, "pairs", 65536, "baseline"), 0.0);
    for result in &all {
        if result["arm"] == "rlm" {
            let run_id = result["run_id"].as_str().unwrap();
            assert!(sb
                .data_dir()
                .join("runs")
                .join(run_id)
                .join("events.jsonl")
                .exists());
        } else {
            assert!(result["run_id"].is_null());
        }
        assert!(result["tokens"].as_u64().unwrap() > 0);
    }
    assert!(
        stdout.contains("| sniah | 64k | rlm | 2 | 2 | 100 % | 34–100 % |"),
        "{stdout}"
    );
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(stdout.contains(&table));
    let svg = std::fs::read_to_string(out.join("accuracy.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("pairs · baseline"));

    // Resumed, nothing is asked again; started again without --resume, it refuses.
    let asked = mock.control().request_count();
    let resumed = eval_command(&sb, &mock, &out, &[&SMALL_RUN[..], &["--resume"]].concat())
        .output()
        .unwrap();
    assert!(resumed.status.success());
    assert_eq!(mock.control().request_count(), asked);
    let again = eval_command(&sb, &mock, &out, &["--lengths", "2k"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--resume"));
}

#[test]
fn bad_flags_are_refused_with_a_clear_error() {
    let sb = Sandbox::new();
    let mock = oracle(Duration::ZERO);
    let out = sb.root().join("eval");
    for (flags, says) in [
        (&["--suite", "niah"][..], "unknown suite `niah`"),
        (&["--lengths", "8q"][..], "bad context length `8q`"),
        (&["--arms", "both"][..], "unknown arm `both`"),
        (&["--context", "x.txt"][..], "eval generates its contexts"),
    ] {
        let output = eval_command(&sb, &mock, &out, flags).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
    assert_eq!(mock.control().request_count(), 0);
}

/// Ctrl-C keeps what was scored (exit 130); `--resume` finishes the rest.
#[test]
fn an_interrupted_evaluation_keeps_what_was_done_and_resumes() {
    let sb = Sandbox::new();
    let mock = oracle(Duration::from_millis(300));
    let out = sb.root().join("eval");
    let flags = [
        "--suite",
        "sniah",
        "--lengths",
        "2k",
        "--items",
        "6",
        "--parallel",
        "1",
    ];
    let mut child = eval_command(&sb, &mock, &out, &flags)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait (bounded) until some answers are scored, then interrupt.
    let mut waited = Duration::ZERO;
    while waited < Duration::from_secs(60)
        && (!out.join("results.json").exists() || results(&out).len() < 2)
    {
        std::thread::sleep(Duration::from_millis(50));
        waited += Duration::from_millis(50);
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let kept = results(&out).len();
    assert!((2..12).contains(&kept), "{kept} answers kept");
    let resumed = eval_command(&sb, &mock, &out, &[&flags[..], &["--resume"]].concat())
        .output()
        .unwrap();
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert_eq!(results(&out).len(), 12);
}

/// Seen failing before the fix: with the model unreachable, eval printed a table of
/// 0 % and exited 0, and --resume then skipped the failed answers as scored.
#[test]
fn failed_answers_are_reported_not_scored_and_resume_asks_them_again() {
    let sb = Sandbox::new();
    let out = sb.root().join("eval");
    let flags = [
        "--suite",
        "sniah",
        "--lengths",
        "2k",
        "--items",
        "2",
        "--retries",
        "0",
    ];
    let mut down = std::process::Command::new(BIN);
    down.current_dir(sb.root())
        .env_remove("OPENAI_API_KEY")
        .env_remove("RLM_DATA_DIR")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args([
            "eval",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "oracle",
            "--out",
        ])
        .arg(&out)
        .args(flags);
    let output = down.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: sniah 2k #0 rlm: cannot reach the model endpoint"),
        "{stderr}"
    );
    assert!(
        stderr.contains("4 of 4 answers failed and were not scored"),
        "{stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("0 %"),
        "no score for failures"
    );

    let mock = oracle(Duration::ZERO);
    let resumed = eval_command(&sb, &mock, &out, &[&flags[..], &["--resume"]].concat())
        .output()
        .unwrap();
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert!(
        mock.control().request_count() > 0,
        "the failed answers were asked again"
    );
    let all = results(&out);
    assert_eq!(all.len(), 4);
    assert_eq!(mean_score(&all, "sniah", 2048, "rlm"), 1.0);
}

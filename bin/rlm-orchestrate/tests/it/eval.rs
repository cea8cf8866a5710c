//! `rlm-orchestrate eval` end to end against the oracle model: the RLM arm scores 100 %,
//! the baseline falls off past its window; results, table and chart are written;
//! `--resume` skips what was scored; Ctrl-C keeps it. With a haystack (real text) and
//! distractors too, and `--resume` refuses results of another haystack or distractors.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rlm_test_support::mock_llm::{oracle_rule, MockLlm, MockLlmThread, MockReply, MockScript};
use serde_json::Value;

use crate::support::{Sandbox, BIN};

/// The oracle model, answering after `delay`; `?` to whatever it does not know.
pub(crate) fn oracle(delay: Duration) -> MockLlmThread {
    let mut script = MockScript::new().rule(oracle_rule());
    script.when_empty = rlm_test_support::mock_llm::WhenEmpty::Repeat(MockReply::text("?"));
    script.latency = delay;
    MockLlm::spawn_blocking_thread(script).unwrap()
}

/// `rlm-orchestrate eval` against `mock` (model `oracle`) into `out`, with `extra`.
pub(crate) fn eval_command(
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

/// The records of `out/results.json`.
pub(crate) fn results(out: &Path) -> Vec<Value> {
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
        (
            &["--suite", "sniah,word-count"][..],
            "suite word-count counts words in real text: pass --haystack",
        ),
        (
            &["--haystack", "no-such-corpus"][..],
            "failed to read the haystack no-such-corpus",
        ),
        (&["--distractors", "101"][..], "--distractors"),
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

/// Seen failing before the fix: a request the server refused (here, every request, as
/// llama-cpp-python refuses one past its window) made the RLM's and the baseline's items
/// unscored errors, asked again on every --resume, so an arm skipped the items it could
/// not do. They fail now, scored 0 and counted, like an external arm's failure.
#[test]
fn answers_the_server_refuses_fail_scored_zero() {
    let sb = Sandbox::new();
    let out = sb.root().join("eval");
    let mut script = MockScript::new();
    script.when_empty = rlm_test_support::mock_llm::WhenEmpty::Repeat(MockReply::error(
        400,
        "Requested tokens (9000) exceed context window of 8192",
    ));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let flags = [
        "--suite",
        "sniah",
        "--lengths",
        "2k",
        "--items",
        "1",
        "--retries",
        "0",
    ];
    let output = eval_command(&sb, &mock, &out, &flags).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let all = results(&out);
    assert_eq!(all.len(), 2, "both arms scored");
    for record in &all {
        assert_eq!(record["score"], 0.0, "{record}");
        assert!(record["error"].is_null(), "{record}");
        let failed = record["failed"].as_str().unwrap();
        assert!(failed.contains("exceed context window"), "{failed}");
    }
    let asked = mock.control().request_count();
    let resumed = eval_command(&sb, &mock, &out, &[&flags[..], &["--resume"]].concat())
        .output()
        .unwrap();
    assert!(resumed.status.success());
    assert_eq!(mock.control().request_count(), asked, "nothing asked again");
}

/// The small committed corpus (three short texts).
fn fixture_haystack() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crates/eval/fixtures/haystack")
}

/// The haystack's digest computed here: its .txt files in name order, each as name,
/// NUL, length in decimal, NUL, contents.
fn digest_of(dir: &Path) -> String {
    use sha2::{Digest, Sha256};
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".txt"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 3);
    let mut hasher = Sha256::new();
    for name in names {
        let bytes = std::fs::read(dir.join(&name)).unwrap();
        hasher.update(format!("{name}\0{}\0", bytes.len()));
        hasher.update(&bytes);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn in_real_text_with_distractors_the_oracle_scores_the_rlm_full() {
    let sb = Sandbox::new();
    let mock = oracle(Duration::ZERO);
    let out = sb.root().join("eval");
    let haystack = fixture_haystack();
    let digest = digest_of(&haystack);
    let flags = [
        "--suite",
        "sniah,multi-needle,word-count",
        "--lengths",
        "4k,32k",
        "--items",
        "2",
        "--baseline-window",
        "8k",
        "--distractors",
        "2",
        "--haystack",
        haystack.to_str().unwrap(),
    ];
    let output = eval_command(&sb, &mock, &out, &flags).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("sha256 {digest}")), "{stderr}");
    let all = results(&out);
    assert_eq!(all.len(), 3 * 2 * 2 * 2, "suites × lengths × items × arms");
    for suite in ["sniah", "multi-needle", "word-count"] {
        for length in [4096, 32768] {
            assert_eq!(
                mean_score(&all, suite, length, "rlm"),
                1.0,
                "{suite} {length}"
            );
        }
        assert_eq!(mean_score(&all, suite, 4096, "baseline"), 1.0, "{suite}");
    }
    // Counted over 32k, a word occurs more often than in the first 8k the baseline sees.
    assert_eq!(mean_score(&all, "word-count", 32768, "baseline"), 0.0);
    for result in &all {
        assert_eq!(result["variant"]["haystack"]["digest"], digest.as_str());
        assert_eq!(result["variant"]["distractors"], 2);
    }
    // Each context's item file records the same; the needles sit in the prose among
    // their distractors.
    let mut contexts = 0;
    for entry in std::fs::read_dir(out.join("contexts")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let item: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            assert_eq!(item["variant"]["haystack"]["digest"], digest.as_str());
            let text = std::fs::read_to_string(path.with_extension("txt")).unwrap();
            assert!(
                text.contains("The keeper") || text.contains("orchard") || text.contains("maps")
            );
            let needles = text.matches("The special magic number for ").count();
            let want = match item["suite"].as_str().unwrap() {
                "sniah" => 1 + 2,
                "multi-needle" => 4 + 2,
                _ => 0,
            };
            assert_eq!(needles, want, "{}", path.display());
            contexts += 1;
        }
    }
    assert_eq!(contexts, 3 * 2 * 2);

    // Resumed with other distractors, or without the haystack, it refuses and asks
    // nothing; with the same ones, it asks nothing either.
    let asked = mock.control().request_count();
    let mut other = flags.to_vec();
    other[9] = "1";
    let refused = eval_command(&sb, &mock, &out, &[&other[..], &["--resume"]].concat())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "sha256 {digest}) and 2 distractors, but this run uses"
        )) && stderr.contains("and 1 distractors")
            && stderr.contains("pass the same --haystack, --distractors, --variant and --data"),
        "{stderr}"
    );
    let refused = eval_command(
        &sb,
        &mock,
        &out,
        &[
            "--suite",
            "sniah",
            "--lengths",
            "4k",
            "--items",
            "2",
            "--distractors",
            "2",
            "--resume",
        ],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("this run uses generated filler (no --haystack)"),
        "{stderr}"
    );
    let resumed = eval_command(&sb, &mock, &out, &[&flags[..], &["--resume"]].concat())
        .output()
        .unwrap();
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert_eq!(mock.control().request_count(), asked);
}

/// One `aggregate` item of 64k characters asked of the baseline alone (128k of it
/// offered) with `--context-window window`; the run must succeed and the answer must
/// not have failed. The characters of context the baseline was shown.
fn baseline_shown(mock: &MockLlmThread, window: &str) -> u64 {
    let flags = [
        "--suite",
        "aggregate",
        "--lengths",
        "64k",
        "--items",
        "1",
        "--baseline-window",
        "128k",
        "--context-window",
        window,
    ];
    let all = baseline_answers(mock, &flags);
    assert_eq!(all.len(), 1);
    all[0]["context_chars"].as_u64().unwrap()
}

/// The results of the baseline arm alone run with `flags`, each answered (none failed).
fn baseline_answers(mock: &MockLlmThread, flags: &[&str]) -> Vec<Value> {
    let sb = Sandbox::new();
    let out = sb.root().join("eval");
    let mut flags = flags.to_vec();
    flags.extend(["--arms", "baseline"]);
    let output = eval_command(&sb, mock, &out, &flags).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let all = results(&out);
    for result in &all {
        assert!(result["failed"].is_null(), "{result}");
    }
    all
}

#[test]
fn the_baseline_reads_only_what_fits_the_models_window() {
    let mock = oracle(Duration::ZERO);
    // 64k characters of records, a 128k baseline window and a model of 2 048 tokens
    // (the mock counts a token per four characters): only a prefix can fit.
    let shown = baseline_shown(&mock, "2048");
    // The window less the answer's room (512 tokens) is 1 536 tokens, about 6 100
    // characters of prompt: the prefix is cut to fit, and not far below.
    assert!((4_000..6_144).contains(&shown), "{shown}");
    let asked: Vec<_> = mock
        .control()
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .collect();
    assert_eq!(asked.len(), 1);
    let prompt = asked[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        prompt.chars().count().div_ceil(4) <= 1_536,
        "{}",
        prompt.len()
    );
    // It asks for at most the answer's room, as the RLM arm's requests do.
    assert_eq!(asked[0].body["max_tokens"], 512, "{}", asked[0].body);
}

#[test]
fn a_baseline_refused_as_too_long_is_fitted_to_the_named_window_and_asked_again() {
    // The user says 8 192 tokens; the server holds 2 048 and refuses the first prompt,
    // naming its window: the baseline is fitted again and answers, not failed.
    let mut script = MockScript::new().rule(oracle_rule());
    script.when_empty = rlm_test_support::mock_llm::WhenEmpty::Repeat(MockReply::text("?"));
    script.context_window = Some(2_048);
    script.advertise_window = false;
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let shown = baseline_shown(&mock, "8192");
    assert!(shown < 8_192, "{shown}");
    let asked = mock
        .control()
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .map(|r| {
            r.body["messages"][0]["content"]
                .as_str()
                .unwrap_or("")
                .len()
        })
        .collect::<Vec<_>>();
    // The refused prompt (streamed, then whole to read the refusal), then the one that
    // fits: about 2 048 tokens of four characters less the answer's room.
    assert_eq!(asked.len(), 3, "{asked:?}");
    assert_eq!(asked[0], asked[1]);
    assert!(asked[2] < 8_192 && asked[2] < asked[0], "{asked:?}");
}

#[test]
fn a_baseline_refused_again_after_a_refit_is_fitted_within_what_the_server_counted() {
    // A tokenizer that splits a numbered word list twice as finely as English (digits
    // a token each, the rest a token per two characters, where the estimate assumes
    // more): a prompt is refused, and a refit by the estimate alone, which the refusal
    // taught nothing about any other prefix of this text, was refused again (the
    // second item failed). Fitted within what the refusal counted, it fits.
    let mut script = MockScript::new().rule(oracle_rule());
    script.when_empty = rlm_test_support::mock_llm::WhenEmpty::Repeat(MockReply::text("?"));
    script.context_window = Some(8_192);
    script.advertise_window = false;
    script.digits_are_tokens = true;
    script.chars_per_token = 2;
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    // RULER's common words: a numbered word list, a quarter of it digits.
    let flags = [
        "--suite",
        "ruler/cwe",
        "--lengths",
        "64k",
        "--items",
        "2",
        "--baseline-window",
        "64k",
    ];
    let all = baseline_answers(&mock, &flags);
    assert_eq!(all.len(), 2);
    let shown = all[1]["context_chars"].as_u64().unwrap();
    let asked: Vec<_> = mock
        .control()
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .collect();
    let last = asked.last().unwrap();
    let counted = rlm_test_support::mock_llm::mock_tokens_at(&last.prompt_text(), true, 2);
    assert!(
        counted <= 8_192,
        "the answered prompt fits: {counted} tokens"
    );
    // Not cut far below what fits: more than half the window's worth of this text.
    assert!(counted > 4_096, "{counted} tokens, {shown} characters");
    // Each item refused at most once (streamed, then whole to read the refusal),
    // then answered.
    assert!(asked.len() <= 6, "{} requests", asked.len());
}

#[test]
fn resumed_answers_are_scored_by_todays_rules() {
    let sb = Sandbox::new();
    let mock = oracle(Duration::ZERO);
    let out = sb.root().join("eval-out");
    let args = [
        "--suite",
        "aggregate",
        "--lengths",
        "2k",
        "--items",
        "2",
        "--arms",
        "baseline",
    ];
    let first = eval_command(&sb, &mock, &out, &args).output().unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    // As an older rlm saved it: item 1 ("which label…") expected as plain text, and an
    // answer that hedges across labels, which that rule scored right.
    let mut saved = results(&out);
    let at = saved
        .iter()
        .position(|r| r["expected"]["kind"] == "choice")
        .unwrap();
    let label = saved[at]["expected"]["value"]["answer"]
        .as_str()
        .unwrap()
        .to_owned();
    let other = saved[at]["expected"]["value"]["others"][0]
        .as_str()
        .unwrap()
        .to_owned();
    saved[at]["expected"] = serde_json::json!({"kind": "exact", "value": label});
    saved[at]["got"] = Value::String(format!("{other} or {label}"));
    saved[at]["score"] = Value::from(1.0);
    std::fs::write(
        out.join("results.json"),
        serde_json::to_vec(&saved).unwrap(),
    )
    .unwrap();
    for entry in std::fs::read_dir(out.join("contexts")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let mut meta: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            if meta["expected"]["kind"] == "choice" {
                meta["expected"] = serde_json::json!({"kind": "exact", "value": label});
                std::fs::write(&path, serde_json::to_vec(&meta).unwrap()).unwrap();
            }
        }
    }

    let again = eval_command(&sb, &mock, &out, &args)
        .arg("--resume")
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("1 earlier answers scored again"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let rescored = results(&out);
    assert_eq!(rescored.len(), 2, "nothing asked again");
    assert_eq!(rescored[at]["expected"]["kind"], "choice");
    assert_eq!(rescored[at]["score"], 0.0, "a hedge is not an answer");
    assert_eq!(rescored[1 - at]["score"], 1.0);
}

/// `--variant` puts the record suites' items in another wording or format: each form
/// scores full through the RLM arm (the oracle's code reads every form), records the
/// form in every result, keeps its contexts apart, and `--resume` refuses another form.
#[test]
fn each_variant_of_the_record_suites_runs_and_is_recorded() {
    let sb = Sandbox::new();
    let mock = oracle(Duration::ZERO);
    for form in ["reworded", "json", "csv"] {
        let out = sb.root().join(format!("eval-{form}"));
        let output = eval_command(
            &sb,
            &mock,
            &out,
            &[
                "--suite",
                "aggregate,pairs",
                "--lengths",
                "4k",
                "--items",
                "3",
                "--arms",
                "rlm",
                "--variant",
                form,
            ],
        )
        .output()
        .unwrap();
        assert!(
            output.status.success(),
            "{form}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let all = results(&out);
        assert_eq!(all.len(), 2 * 3, "{form}");
        for result in &all {
            assert_eq!(result["variant"]["form"], form, "{result}");
            assert_eq!(result["score"].as_f64(), Some(1.0), "{form}: {result}");
        }
        let names: Vec<String> = std::fs::read_dir(out.join("contexts"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().all(|n| n.contains(&format!("-{form}."))),
            "{names:?}"
        );
        let again = eval_command(
            &sb,
            &mock,
            &out,
            &[
                "--suite",
                "aggregate",
                "--lengths",
                "4k",
                "--items",
                "3",
                "--resume",
            ],
        )
        .output()
        .unwrap();
        assert_eq!(again.status.code(), Some(2), "{form}");
        assert!(
            String::from_utf8_lossy(&again.stderr).contains("--variant"),
            "{}",
            String::from_utf8_lossy(&again.stderr)
        );
    }
    let refused = eval_command(
        &sb,
        &mock,
        &sb.root().join("eval-sniah"),
        &["--suite", "sniah", "--lengths", "4k", "--variant", "json"],
    )
    .output()
    .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("record suites"));
}

//! Plans bounded in the host's own work and in what they send (the fourth hostile
//! review, items 5–7), end to end through `run` against the mock: a split whose
//! overlap would have the host read its input hundreds of times over is refused before
//! any work; a piece of a file without line ends is read in bounded ranges; a pieces
//! variable written by model code is measured by what its pieces would send, not by
//! what it claims, and refused by the window, `--sub-context-chars` and `--max-tokens`
//! before any call; a plan's leaves honour `--sub-context-chars`; and
//! `llm_query(split=True)` that cannot finish within the budget is refused before its
//! first call.

use std::process::Output;
use std::time::Duration;

use rlm_test_support::mock_llm::{
    MockLlm, MockLlmThread, MockReply, MockRule, MockScript, RecordedRequest,
};

use super::plans::{plan_stages, printed};
use crate::support::Sandbox;

/// What only a leaf's prompt holds: the instruction's end and its piece.
const LEAF: &str = "\n\nContext:\n";

/// True for a sub-call that carries a piece: one message, the instruction and the
/// piece (the root's requests have a system prompt too).
fn is_leaf(request: &RecordedRequest) -> bool {
    request.messages().len() == 1
        && request
            .last_user_message()
            .unwrap_or_default()
            .contains(LEAF)
}

/// A root model that runs `code`, then answers; leaves answer "3".
fn script(code: &str) -> MockScript {
    MockScript::new()
        .rule(MockRule::function("a leaf", |request| {
            is_leaf(request).then(|| MockReply::text("3"))
        }))
        .then(MockReply::text(format!("```repl\n{code}\n```")))
        .then(MockReply::text("FINAL(done)"))
}

/// `run` over the file `context` against `mock`, with `extra` flags.
fn run_over(
    sb: &Sandbox,
    mock: &MockLlmThread,
    context: &std::path::Path,
    extra: &[&str],
) -> Output {
    sb.bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "look at the log", "--model", "mock", "--no-stream"])
        .args(["--exec-timeout", "300"])
        .arg("--base-url")
        .arg(mock.control().openai_base_url())
        .arg("--context")
        .arg(context)
        .args(extra)
        .output()
        .unwrap()
}

/// Runs `code` over a file of `log` with `extra` flags; the run must succeed. The
/// mock, and what the code printed.
fn run_code_over(log: &str, code: &str, extra: &[&str]) -> (MockLlmThread, String, Sandbox) {
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(script(code)).unwrap();
    let context = sb.file("app.log", log);
    let out = run_over(&sb, &mock, &context, extra);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = printed(&sb);
    (mock, printed, sb)
}

/// The requests that carried a piece (a plan's leaf, a split call's piece).
fn leaves(mock: &MockLlmThread) -> Vec<usize> {
    mock.control()
        .requests()
        .iter()
        .filter(|r| is_leaf(r))
        .map(|r| r.body_bytes)
        .collect()
}

/// `lines` lines of a log, about 40 bytes each.
fn log_of(lines: usize) -> String {
    (0..lines)
        .map(|i| format!("2026-03-07 line {i:06}: payment ok\n"))
        .collect()
}

#[test]
fn a_split_that_repeats_its_input_a_thousand_times_is_refused_before_any_work() {
    // The review's case: 400 KB in pieces of 1000 lines, 999 of them repeated — 9001
    // pieces holding 360 MB, 14 s of the host's reading. Refused before the split, as
    // a whole plan and as a step.
    let code = "try:\n    map_reduce(split={'by': 'lines', 'size': 1000, 'overlap': 999}, map={'count': 'payment'}, reduce={'op': 'sum'})\nexcept Exception as e:\n    print('plan:', e)\n\
                try:\n    ctx_split('context', by='lines', size=1000, overlap=999)\nexcept Exception as e:\n    print('step:', e)";
    let (mock, printed, sb) = run_code_over(&log_of(10_000), code, &[]);
    for part in ["plan:", "step:"] {
        let line = printed
            .lines()
            .find(|l| l.starts_with(part))
            .unwrap_or_default();
        assert!(
            line.contains("refused before any work: a split of 1000 lines a piece with an overlap of 999 puts each byte of its input")
                && line.contains("use an `overlap` of at most "),
            "{printed}"
        );
    }
    assert!(leaves(&mock).is_empty());
    assert_eq!(plan_stages(&sb), ["refused"]);
}

#[test]
fn a_chars_overlap_over_32_mib_is_refused_before_any_work() {
    // The review's case: a `chars` overlap over 32 MiB peaked at 540 MB (a mark kept
    // for every character repeated) before failing for its piece count.
    let log = log_of(32 << 20 >> 5);
    let code = "try:\n    map_reduce(split={'by': 'chars', 'size': 16000000, 'overlap': 15999999}, map={'count': 'payment'}, reduce={'op': 'sum'})\nexcept Exception as e:\n    print('plan:', e)";
    let (mock, printed, _sb) = run_code_over(&log, code, &["--lazy-context", "always"]);
    assert!(
        printed.contains("plan: the plan was refused before any work: a split of 16000000 characters a piece with an overlap of 15999999")
            && printed.contains("use an `overlap` of at most "),
        "{printed}"
    );
    assert!(leaves(&mock).is_empty());
}

/// The peak resident memory of process `pid` so far (`VmHWM`), in KiB; `None` once it
/// is gone.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs `code` over the file `context` (referenced, not copied), watching the
/// orchestrator's peak memory; the run must succeed. What the code printed, and the
/// peak in KiB.
fn run_watching_memory(sb: &Sandbox, code: &str, context: &std::path::Path) -> (String, u64) {
    let mock = MockLlm::spawn_blocking_thread(script(code)).unwrap();
    let mut child = std::process::Command::new(crate::support::BIN)
        .current_dir(sb.root())
        .env_remove("RLM_DATA_DIR")
        .env_remove("RUST_LOG")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "look at the log", "--model", "mock", "--no-stream"])
        .args(["--lazy-context", "always", "--exec-timeout", "600"])
        .arg("--base-url")
        .arg(mock.control().openai_base_url())
        .arg("--context")
        .arg(context)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut peak = 0;
    // Bounded: a working build is done in seconds.
    for _ in 0..6_000 {
        if let Some(kib) = peak_rss_kib(pid) {
            peak = peak.max(kib);
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(leaves(&mock).is_empty(), "nothing here asks a model");
    (printed(sb), peak)
}

#[test]
fn a_piece_of_a_file_without_line_ends_is_read_in_bounded_ranges() {
    use std::io::{Seek, SeekFrom, Write};
    let sb = Sandbox::new();
    // 64 MiB and not one line end (sparse: the holes read as NUL characters), so a
    // `lines` split makes it one piece. It was read whole — for the count, and for the
    // line count of a too-large piece's refusal — and the run peaked at twice its size
    // (562 MB for 256 MiB).
    let big = sb.root().join("one-line.log");
    let mut file = std::fs::File::create(&big).unwrap();
    file.seek(SeekFrom::Start(40 << 20)).unwrap();
    file.write_all(b"NEEDLE").unwrap();
    file.set_len(64 << 20).unwrap();
    drop(file);
    let code = "print(map_reduce(split={'by': 'lines'}, map={'count': 'NEEDLE'}, reduce={'op': 'sum'}))\nprint(map_reduce.last['pieces'])\n\
                try:\n    map_reduce(split={'by': 'lines', 'size': 10}, map={'ask': 'How many needles?'}, reduce={'op': 'sum'})\nexcept Exception as e:\n    print('ask:', e)";
    let (printed, peak) = run_watching_memory(&sb, code, &big);
    assert!(printed.starts_with("1\n1\n"), "{printed}");
    assert!(
        printed.contains("ask: use \"size\": ") && printed.contains("(counted in lines)"),
        "{printed}"
    );
    // Ranges of at most a few MiB at a time (38 MB at the peak, the process itself
    // included, for a piece of 96 MiB), never the 64 MiB piece whole.
    assert!(peak < 96 * 1024, "the orchestrator peaked at {peak} KiB");
}

/// Code that writes a pieces variable claiming one character for a piece that spans
/// the whole context, then maps it with a question.
const LYING_PIECES: &str = "pieces = ctx_split('context', by='lines', size=100)\n\
    lie = store.get(pieces)\n\
    lie['pieces'] = [{'index': 0, 'start': 0, 'end': lie['file_bytes'], 'chars': 1}]\n\
    store.set('lie', lie)\n\
    try:\n    ctx_map('lie', ask='What does this say?')\nexcept Exception as e:\n    print('refused:', e)";

#[test]
fn a_pieces_variable_that_lies_is_measured_by_what_it_would_send() {
    // The review's case: `chars: 1` over the whole file sent a 977 KB prompt past the
    // window check, `--sub-context-chars` and `--max-tokens`. Each refuses it now,
    // before any call.
    let log = log_of(28_000);
    assert!(log.len() > 900_000);
    let big_window = ["--sub-context-window", "1000000"];
    for (flags, says) in [
        (vec!["--sub-context-window", "8192"], "over the"),
        (
            [&big_window[..], &["--sub-context-chars", "50000"]].concat(),
            "--sub-context-chars",
        ),
        (
            [
                &big_window[..],
                &["--sub-context-chars", "2000000", "--max-tokens", "100000"],
            ]
            .concat(),
            "tokens, ",
        ),
    ] {
        let (mock, printed, _sb) = run_code_over(&log, LYING_PIECES, &flags);
        let line = printed
            .lines()
            .find(|l| l.starts_with("refused:"))
            .unwrap_or_default();
        assert!(
            line.contains("refused before any call") || line.contains("use \"size\""),
            "{flags:?}: {printed}"
        );
        assert!(line.contains(says), "{flags:?}: {printed}");
        assert!(leaves(&mock).is_empty(), "{flags:?}: {:?}", leaves(&mock));
        let largest = mock
            .control()
            .requests()
            .iter()
            .map(|r| r.body_bytes)
            .max()
            .unwrap_or(0);
        assert!(largest < 100_000, "{flags:?}: a request of {largest} bytes");
    }
}

#[test]
fn plan_leaves_honour_sub_context_chars() {
    // Pieces of 100 lines, 4 KB each, past a `--sub-context-chars` of 1000 in a window
    // that takes them: refused before any call, the limit named.
    let code = "try:\n    map_reduce(split={'by': 'lines', 'size': 100}, map={'ask': 'How many payments?'}, reduce={'op': 'sum'})\nexcept Exception as e:\n    print('plan:', e)\n\
                pieces = ctx_split('context', by='lines', size=100)\n\
                try:\n    ctx_map(pieces, ask='How many payments?')\nexcept Exception as e:\n    print('step:', e)";
    let (mock, printed, _sb) = run_code_over(
        &log_of(1_000),
        code,
        &[
            "--sub-context-window",
            "100000",
            "--sub-context-chars",
            "1000",
        ],
    );
    for part in ["plan:", "step:"] {
        let line = printed
            .lines()
            .find(|l| l.starts_with(part))
            .unwrap_or_default();
        assert!(
            line.contains("--sub-context-chars 1000") && line.contains("\"size\": "),
            "{printed}"
        );
    }
    assert!(leaves(&mock).is_empty(), "{:?}", leaves(&mock));
}

#[test]
fn a_split_llm_query_that_cannot_finish_within_the_budget_is_refused_before_its_first_call() {
    // The review's case: the split call spent 9 of 10 calls on its pieces, then had
    // none left to combine them. Priced before the first: the pieces and the
    // combining rounds.
    let code = "try:\n    print(llm_query('How many payments?', context, split=True))\nexcept Exception as e:\n    print('refused:', e)";
    let (mock, printed, _sb) = run_code_over(
        &log_of(3_000),
        code,
        &["--sub-context-window", "4096", "--max-llm-calls", "10"],
    );
    assert!(
        printed.contains("refused: llm_query(split=True) was refused before any call")
            && printed.contains("model calls, ")
            && printed.contains("left"),
        "{printed}"
    );
    assert!(leaves(&mock).is_empty(), "{:?}", leaves(&mock));
}

//! Results: one record per item and arm (`results.json`), and the table that sums them
//! up per suite × length × arm.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::EvalError;
use crate::score::Expected;
use crate::stats::wilson_interval;
use crate::suite::{format_length, Suite, Variant};

/// One item answered by one arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemResult {
    /// The suite.
    pub suite: Suite,
    /// The context's length, in characters.
    pub length: u64,
    /// The item's index in its suite and length.
    pub index: u32,
    /// The seed the item came from.
    pub seed: u64,
    /// `rlm`, `baseline` or the name of an external arm (`--arm NAME=COMMAND`).
    pub arm: String,
    /// The question.
    pub question: String,
    /// The right answer.
    pub expected: Expected,
    /// The answer given (empty when the arm failed).
    pub got: String,
    /// Its score, 0 to 1.
    pub score: f64,
    /// Tokens used (prompt + completion, sub-calls included); `None` when the arm did
    /// not report them (an external arm without a `usage`).
    #[serde(default)]
    pub tokens: Option<u64>,
    /// Input (prompt) tokens, when reported.
    #[serde(default)]
    pub input_tokens: Option<u64>,
    /// Output (completion) tokens, when reported.
    #[serde(default)]
    pub output_tokens: Option<u64>,
    /// The answer was forced: the arm ran out of iterations (or another budget) and
    /// was made to answer with what it had.
    #[serde(default)]
    pub forced: bool,
    /// Why the arm failed at this item (an external arm that exited non-zero or timed
    /// out): the item is scored 0, counted as failed, and not asked again by
    /// `--resume`. Unlike `error`, which is not scored.
    #[serde(default)]
    pub failed: Option<String>,
    /// The last lines of the arm's stderr, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
    /// Characters of the context the arm was shown, for an arm shown a prefix: the
    /// baseline's first `--baseline-window` characters, fewer when the model's window
    /// holds less.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_chars: Option<u64>,
    /// Cost in USD, when prices are configured.
    pub cost_usd: Option<f64>,
    /// Wall time.
    pub seconds: f64,
    /// The RLM run's id (its trace is `runs show <id>`); none for the baseline.
    pub run_id: Option<String>,
    /// Why there is no answer (the model unreachable, a run that broke, an arm that
    /// could not start): such an item is not scored, and `--resume` asks it again.
    pub error: Option<String>,
    /// The haystack (path and digest) and distractors the item was made with; absent
    /// for generated filler without distractors. `--resume` refuses another variant.
    #[serde(default, skip_serializing_if = "Variant::is_default")]
    pub variant: Variant,
}

impl ItemResult {
    /// What identifies a result for `--resume`.
    pub fn key(&self) -> (Suite, u64, u32, u64, String) {
        (
            self.suite,
            self.length,
            self.index,
            self.seed,
            self.arm.clone(),
        )
    }
}

/// Scores `results` again against `items` as generated now, where an item's expected
/// answer changed since its answers were scored (a scoring rule made stricter, say: a
/// hedge naming several labels no longer counts). The question must be the same — the
/// same generator made the same context —, else the result is left as it is. Failed
/// answers stay at 0. Returns how many results changed their score.
pub fn rescore(results: &mut [ItemResult], items: &[crate::suite::Item]) -> usize {
    let mut changed = 0;
    for result in results.iter_mut() {
        let Some(item) = items.iter().find(|item| {
            (item.suite, item.length, item.index, item.seed)
                == (result.suite, result.length, result.index, result.seed)
        }) else {
            continue;
        };
        if item.expected == result.expected || item.question != result.question {
            continue;
        }
        result.expected = item.expected.clone();
        if result.failed.is_some() || result.error.is_some() {
            continue;
        }
        let score = crate::score::score(&result.expected, &result.got);
        if score != result.score {
            result.score = score;
            changed += 1;
        }
    }
    changed
}

/// One line of the table: a suite, a length and an arm.
///
/// An item is *correct* when its score is 1: for the binary suites that is the
/// accuracy, and for the F1-scored ones (`multi-needle`) it counts only complete
/// answers; [`SummaryRow::score`] is the mean score either way.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryRow {
    /// The suite.
    pub suite: Suite,
    /// The context's length.
    pub length: u64,
    /// The arm.
    pub arm: String,
    /// Items scored (failed ones included, at 0).
    pub items: usize,
    /// Items whose score is 1.
    pub correct: usize,
    /// `correct / items`.
    pub accuracy: f64,
    /// Lower end of the 95 % Wilson score interval of the accuracy.
    pub ci_low: f64,
    /// Upper end of the 95 % Wilson score interval of the accuracy.
    pub ci_high: f64,
    /// Mean score, 0 to 1.
    pub score: f64,
    /// Mean input tokens per item, over the items that reported them; `None` when
    /// none did.
    pub mean_input_tokens: Option<f64>,
    /// Mean output tokens per item, over the items that reported them.
    pub mean_output_tokens: Option<f64>,
    /// Items that reported their tokens.
    pub tokens_reported: usize,
    /// All tokens of the cell over its correct answers; `None` when some item did not
    /// report its tokens, or none was correct.
    pub tokens_per_correct: Option<f64>,
    /// Total cost, when known.
    pub cost_usd: Option<f64>,
    /// Mean seconds per item.
    pub mean_seconds: f64,
    /// All seconds of the cell over its correct answers; `None` when none was correct.
    #[serde(default)]
    pub seconds_per_correct: Option<f64>,
    /// Answers that were forced.
    pub forced: usize,
    /// Items the arm failed (scored 0).
    pub failed: usize,
}

/// The table of `results`, in suite, length, arm order. Answers that have an `error`
/// (the model unreachable, a run that broke) were not scored and are left out; items
/// an arm `failed` count, at 0.
pub fn summarise(results: &[ItemResult]) -> Vec<SummaryRow> {
    let mut groups: BTreeMap<(Suite, u64, String), Vec<&ItemResult>> = BTreeMap::new();
    for result in results.iter().filter(|r| r.error.is_none()) {
        groups
            .entry((result.suite, result.length, result.arm.clone()))
            .or_default()
            .push(result);
    }
    groups
        .into_iter()
        .map(|((suite, length, arm), items)| {
            let n = items.len() as f64;
            let costs: Vec<f64> = items.iter().filter_map(|r| r.cost_usd).collect();
            let correct = items.iter().filter(|r| r.score >= 1.0).count();
            let (ci_low, ci_high) =
                wilson_interval(correct as u64, items.len() as u64).unwrap_or((0.0, 1.0));
            let mean_of = |values: Vec<u64>| {
                (!values.is_empty())
                    .then(|| values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64)
            };
            let totals: Option<Vec<u64>> = items.iter().map(|r| r.tokens).collect();
            SummaryRow {
                suite,
                length,
                arm,
                items: items.len(),
                correct,
                accuracy: correct as f64 / n,
                ci_low,
                ci_high,
                score: items.iter().map(|r| r.score).sum::<f64>() / n,
                mean_input_tokens: mean_of(items.iter().filter_map(|r| r.input_tokens).collect()),
                mean_output_tokens: mean_of(items.iter().filter_map(|r| r.output_tokens).collect()),
                tokens_reported: items.iter().filter(|r| r.tokens.is_some()).count(),
                tokens_per_correct: totals
                    .filter(|_| correct > 0)
                    .map(|t| t.iter().sum::<u64>() as f64 / correct as f64),
                cost_usd: (!costs.is_empty()).then(|| costs.iter().sum()),
                mean_seconds: items.iter().map(|r| r.seconds).sum::<f64>() / n,
                seconds_per_correct: (correct > 0)
                    .then(|| items.iter().map(|r| r.seconds).sum::<f64>() / correct as f64),
                forced: items.iter().filter(|r| r.forced).count(),
                failed: items.iter().filter(|r| r.failed.is_some()).count(),
            }
        })
        .collect()
}

/// The header of [`markdown_table`].
const TABLE_HEADER: &str = "| suite | length | arm | items | correct | accuracy | 95 % CI | mean score | mean input tokens | mean output tokens | tokens per correct | cost | mean seconds | seconds per correct | forced | failed |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";

/// The table as Markdown (what the terminal shows and `table.md` holds). Tokens an
/// arm did not report are `unknown`; tokens and seconds per correct answer are `—`
/// when no answer was correct.
pub fn markdown_table(rows: &[SummaryRow]) -> String {
    let mut out = String::from(TABLE_HEADER);
    let tokens =
        |value: Option<f64>| value.map_or_else(|| "unknown".to_owned(), |v| format!("{v:.0}"));
    for row in rows {
        let cost = row
            .cost_usd
            .map_or_else(|| "—".to_owned(), |c| format!("${c:.4}"));
        let per_correct = if row.correct == 0 {
            "—".to_owned()
        } else {
            tokens(row.tokens_per_correct)
        };
        let seconds_per_correct = row
            .seconds_per_correct
            .map_or_else(|| "—".to_owned(), |s| format!("{s:.1}"));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.0} % | {:.0}–{:.0} % | {:.0} % | {} | {} | {} | {} | {:.1} | {} | {} | {} |",
            row.suite,
            format_length(row.length),
            row.arm,
            row.items,
            row.correct,
            row.accuracy * 100.0,
            row.ci_low * 100.0,
            row.ci_high * 100.0,
            row.score * 100.0,
            tokens(row.mean_input_tokens),
            tokens(row.mean_output_tokens),
            per_correct,
            cost,
            row.mean_seconds,
            seconds_per_correct,
            row.forced,
            row.failed,
        );
    }
    out
}

/// Writes `results` to `path` as pretty JSON, atomically (a temp file, then a rename),
/// so an interrupted evaluation never leaves a torn file.
pub fn write_results(path: &Path, results: &[ItemResult]) -> Result<(), EvalError> {
    let text = serde_json::to_vec_pretty(results)
        .map_err(|e| EvalError::io("encode", path, std::io::Error::other(e)))?;
    write_atomically(path, &text)
}

/// Writes `bytes` to `path` through a temp file and a rename.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), EvalError> {
    let tmp = path.with_extension("tmp");
    let written = std::fs::File::create(&tmp)
        .and_then(|mut file| file.write_all(bytes))
        .and_then(|()| std::fs::rename(&tmp, path));
    written.map_err(|source| EvalError::io("write", path, source))
}

/// Reads `results.json` (for `--resume`); an absent file is no results.
pub fn read_results(path: &Path) -> Result<Vec<ItemResult>, EvalError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| EvalError::io("read", path, std::io::Error::other(e))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(EvalError::io("read", path, source)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(arm: &str, length: u64, score: f64) -> ItemResult {
        ItemResult {
            suite: Suite::Sniah,
            length,
            index: 0,
            seed: 1,
            arm: arm.into(),
            question: "q".into(),
            expected: Expected::Exact("1".into()),
            got: "1".into(),
            score,
            tokens: Some(100),
            input_tokens: Some(90),
            output_tokens: Some(10),
            forced: false,
            failed: None,
            stderr_tail: None,
            context_chars: None,
            cost_usd: None,
            seconds: 1.0,
            run_id: None,
            error: None,
            variant: Variant::default(),
        }
    }

    #[test]
    fn answers_are_scored_again_when_their_item_is_scored_by_a_stricter_rule() {
        let item = |expected: Expected| crate::suite::Item {
            suite: Suite::Sniah,
            length: 8192,
            index: 0,
            seed: 1,
            question: "q".into(),
            expected,
            depth_percent: None,
            variant: Variant::default(),
            framing: None,
        };
        let hedge = ItemResult {
            expected: Expected::Exact("shipping".into()),
            got: "fraud or shipping".into(),
            ..result("rlm", 8192, 1.0)
        };
        let right = ItemResult {
            expected: Expected::Exact("shipping".into()),
            got: "shipping".into(),
            ..result("baseline", 8192, 1.0)
        };
        let mut results = vec![hedge, right];
        let choice = Expected::Choice {
            answer: "shipping".into(),
            others: vec!["fraud".into()],
        };
        assert_eq!(rescore(&mut results, &[item(choice.clone())]), 1);
        assert_eq!((results[0].score, results[1].score), (0.0, 1.0));
        assert!(results.iter().all(|r| r.expected == choice));
        // Another question (another generator): left alone.
        let mut other = vec![ItemResult {
            question: "another".into(),
            ..results[0].clone()
        }];
        other[0].score = 1.0;
        assert_eq!(rescore(&mut other, &[item(choice)]), 0);
        assert_eq!(other[0].score, 1.0);
    }

    #[test]
    fn rows_average_per_suite_length_and_arm() {
        let failed = ItemResult {
            error: Some("unreachable".into()),
            ..result("rlm", 8192, 0.0)
        };
        let rows = summarise(&[
            result("rlm", 8192, 1.0),
            result("rlm", 8192, 0.0),
            result("baseline", 8192, 1.0),
            failed,
        ]);
        assert_eq!(rows.len(), 2);
        let rlm = rows.iter().find(|r| r.arm == "rlm").unwrap();
        assert_eq!((rlm.items, rlm.score), (2, 0.5));
        let table = markdown_table(&rows);
        assert!(
            table.contains(
                "| sniah | 8k | rlm | 2 | 1 | 50 % | 9–91 % | 50 % | 90 | 10 | 200 | — | 1.0 | 2.0 | 0 | 0 |"
            ),
            "{table}"
        );
    }

    #[test]
    fn partial_scores_are_not_correct_and_unknown_tokens_stay_unknown() {
        let external = |score: f64| ItemResult {
            tokens: None,
            input_tokens: None,
            output_tokens: None,
            ..result("stub", 1024, score)
        };
        let failed = ItemResult {
            failed: Some("timed out".into()),
            ..external(0.0)
        };
        let forced = ItemResult {
            forced: true,
            ..external(1.0)
        };
        let rows = summarise(&[external(1.0), external(0.75), failed, forced]);
        let row = &rows[0];
        assert_eq!(
            (row.items, row.correct, row.failed, row.forced),
            (4, 2, 1, 1)
        );
        assert_eq!(row.accuracy, 0.5);
        assert!((row.score - 2.75 / 4.0).abs() < 1e-12, "{}", row.score);
        assert_eq!(row.mean_input_tokens, None);
        assert_eq!(row.tokens_per_correct, None);
        let (low, high) = wilson_interval(2, 4).unwrap();
        assert_eq!((row.ci_low, row.ci_high), (low, high));
        let table = markdown_table(&rows);
        assert!(
            table.contains(
                "| sniah | 1k | stub | 4 | 2 | 50 % | 15–85 % | 69 % | unknown | unknown | unknown | — | 1.0 | 2.0 | 1 | 1 |"
            ),
            "{table}"
        );
        // Nothing correct: tokens per correct answer is a dash, not infinity or 0.
        let none = summarise(&[result("rlm", 1024, 0.0)]);
        assert_eq!(none[0].tokens_per_correct, None);
        assert_eq!(none[0].seconds_per_correct, None);
        assert!(markdown_table(&none).contains("| 1.0 | — | 0 | 0 |"));
        assert!(
            markdown_table(&none).contains("| 90 | 10 | — |"),
            "{}",
            markdown_table(&none)
        );
    }

    #[test]
    fn results_of_an_older_version_still_read() {
        let old = r#"[{"suite":"sniah","length":1024,"index":0,"seed":1,"arm":"rlm",
            "question":"q","expected":{"kind":"exact","value":"1"},"got":"1","score":1.0,
            "tokens":1500,"cost_usd":null,"seconds":0.4,"run_id":"r","error":null}]"#;
        let results: Vec<ItemResult> = serde_json::from_str(old).unwrap();
        assert_eq!(results[0].tokens, Some(1500));
        assert_eq!((results[0].input_tokens, results[0].forced), (None, false));
        assert_eq!(summarise(&results)[0].tokens_per_correct, Some(1500.0));
    }

    #[test]
    fn results_round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.json");
        assert!(read_results(&path).unwrap().is_empty());
        let results = vec![result("rlm", 1024, 1.0)];
        write_results(&path, &results).unwrap();
        assert_eq!(read_results(&path).unwrap(), results);
    }
}

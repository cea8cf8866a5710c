//! Results: one record per item and arm (`results.json`), and the table that sums them
//! up per suite × length × arm.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::EvalError;
use crate::score::Expected;
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
    /// `rlm` or `baseline`.
    pub arm: String,
    /// The question.
    pub question: String,
    /// The right answer.
    pub expected: Expected,
    /// The answer given (empty when the arm failed).
    pub got: String,
    /// Its score, 0 to 1.
    pub score: f64,
    /// Tokens used (prompt + completion, sub-calls included).
    pub tokens: u64,
    /// Cost in USD, when prices are configured.
    pub cost_usd: Option<f64>,
    /// Wall time.
    pub seconds: f64,
    /// The RLM run's id (its trace is `runs show <id>`); none for the baseline.
    pub run_id: Option<String>,
    /// Why the arm failed, if it did (the score is then 0).
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

/// One line of the table: a suite, a length and an arm.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryRow {
    /// The suite.
    pub suite: Suite,
    /// The context's length.
    pub length: u64,
    /// The arm.
    pub arm: String,
    /// Items scored.
    pub items: usize,
    /// Mean score, 0 to 1.
    pub score: f64,
    /// Mean tokens per item.
    pub mean_tokens: f64,
    /// Total cost, when known.
    pub cost_usd: Option<f64>,
    /// Mean seconds per item.
    pub mean_seconds: f64,
}

/// The table of `results`, in suite, length, arm order. Answers that failed (an
/// `error`: the model unreachable, a run that broke) were not scored and are left out.
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
            SummaryRow {
                suite,
                length,
                arm,
                items: items.len(),
                score: items.iter().map(|r| r.score).sum::<f64>() / n,
                mean_tokens: items.iter().map(|r| r.tokens as f64).sum::<f64>() / n,
                cost_usd: (!costs.is_empty()).then(|| costs.iter().sum()),
                mean_seconds: items.iter().map(|r| r.seconds).sum::<f64>() / n,
            }
        })
        .collect()
}

/// The table as Markdown (what the terminal shows and `table.md` holds).
pub fn markdown_table(rows: &[SummaryRow]) -> String {
    let mut out = String::from(
        "| suite | length | arm | items | score | mean tokens | cost | mean seconds |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for row in rows {
        let cost = row
            .cost_usd
            .map_or_else(|| "—".to_owned(), |c| format!("${c:.4}"));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.0} % | {:.0} | {} | {:.1} |",
            row.suite,
            format_length(row.length),
            row.arm,
            row.items,
            row.score * 100.0,
            row.mean_tokens,
            cost,
            row.mean_seconds
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
            tokens: 100,
            cost_usd: None,
            seconds: 1.0,
            run_id: None,
            error: None,
            variant: Variant::default(),
        }
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
            table.contains("| sniah | 8k | rlm | 2 | 50 % | 100 | — | 1.0 |"),
            "{table}"
        );
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

//! The deterministic reductions: the pieces' results (texts, in piece order) to one
//! answer, with no model call. Numbers are read from the results as a small model
//! writes them ("There are 1,432 errors." → 1432); items are the results' lines, or
//! their comma-separated parts.

use std::collections::HashMap;

pub use crate::reading::first_number;
use crate::reading::normalise;
use crate::spec::{Map, Reduce};

/// Why results cannot be reduced.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReduceError {
    /// `ask` needs the sub-model: the orchestrator reduces it.
    #[error("the `ask` reduction needs the sub-model")]
    NeedsModel,
    /// A numeric reduction found no number in any result.
    #[error("`{op}` found no number in any of the {results} results (the first: {first:?})")]
    NoNumbers {
        /// The reduction.
        op: &'static str,
        /// How many results there were.
        results: usize,
        /// The first result, shortened.
        first: String,
    },
    /// A reduction over records (`group_by`, `argmax`) could not read them.
    #[error(transparent)]
    Records(#[from] crate::group::RecordError),
}

impl ReduceError {
    /// What to change, given the map that made the results (`None`: not known): the fix
    /// for words where numbers were wanted depends on where the words came from. An
    /// `extract` gives the matched values themselves, so the reductions of values are
    /// named, each once and always in the same order (the plan alone says nothing of
    /// which one the model meant). `None` for [`ReduceError::NeedsModel`], which is the
    /// orchestrator's to handle.
    pub fn advice(&self, map: Option<&Map>) -> Option<String> {
        match (self, map) {
            // Each says what in the plan's own patterns or values to change.
            (Self::NeedsModel | Self::Records(_), _) => None,
            (Self::NoNumbers { .. }, Some(Map::Extract(_))) => Some(format!(
                "the extract gave values, not numbers: {}",
                VALUE_REDUCTIONS.join("; ")
            )),
            (Self::NoNumbers { .. }, _) => Some(
                "ask the map for a number only, or reduce words with count, top_k, union or pairs"
                    .to_owned(),
            ),
        }
    }
}

/// The reductions of values, as a refusal names them, in a fixed order.
const VALUE_REDUCTIONS: [&str; 4] = [
    "to count them use {\"op\": \"count\"}",
    "for the most frequent use {\"op\": \"top_k\", \"k\": 1}",
    "for each once use {\"op\": \"union\"}",
    "for how many pairs are equal use {\"op\": \"pairs\"}",
];

/// Reduces `results` (in piece order) as `reduce` says.
pub fn reduce(reduce: &Reduce, results: &[String]) -> Result<String, ReduceError> {
    match reduce {
        Reduce::Sum => numeric("sum", results, |n| n.iter().sum()),
        Reduce::Min => numeric("min", results, |n| {
            n.iter().copied().fold(f64::INFINITY, f64::min)
        }),
        Reduce::Max => numeric("max", results, |n| {
            n.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        }),
        Reduce::Count => Ok(results.iter().filter(|r| says_yes(r)).count().to_string()),
        Reduce::Concat { separator } => Ok(results.join(separator.as_deref().unwrap_or("\n\n"))),
        Reduce::Vote => Ok(vote(results)),
        Reduce::Union => Ok(distinct_items(results).join("\n")),
        Reduce::Join { separator } => {
            Ok(distinct_items(results).join(separator.as_deref().unwrap_or(", ")))
        }
        Reduce::TopK { k } => Ok(top_k(results, *k)),
        Reduce::Pairs => Ok(equal_pairs(results).to_string()),
        Reduce::CountDistinct => Ok(distinct_items(results).len().to_string()),
        Reduce::Argmax { value } => Ok(crate::group::argmax(value.as_deref(), results)?),
        Reduce::GroupBy { key, value, agg, k } => {
            let spec = crate::group::GroupBy {
                key,
                value: value.as_deref(),
                agg: *agg,
                k: *k,
            };
            Ok(crate::group::group_by(&spec, results)?)
        }
        Reduce::Ask { .. } => Err(ReduceError::NeedsModel),
    }
}

/// A reduction over the numbers of the results (results without one are skipped).
fn numeric(
    op: &'static str,
    results: &[String],
    fold: impl Fn(&[f64]) -> f64,
) -> Result<String, ReduceError> {
    if results.is_empty() && op == "sum" {
        // Nothing to add (no piece kept, no match extracted): the sum is 0.
        return Ok("0".to_owned());
    }
    let numbers: Vec<f64> = results.iter().filter_map(|r| first_number(r)).collect();
    if numbers.is_empty() {
        return Err(ReduceError::NoNumbers {
            op,
            results: results.len(),
            first: results
                .first()
                .map(|r| r.chars().take(80).collect())
                .unwrap_or_default(),
        });
    }
    Ok(format_number(fold(&numbers)))
}

/// A whole number without a decimal part, else the number as is.
fn format_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// True when a result answers yes: "yes", "true", a number above zero, or any other
/// non-empty text that is not a no ("no", "none", "false", "0", "n/a", "nothing").
fn says_yes(result: &str) -> bool {
    let word = normalise(result);
    let first = word.split_whitespace().next().unwrap_or("");
    if let Some(n) = first_number(&word).filter(|_| {
        first
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.' || c == ',')
    }) {
        return n > 0.0;
    }
    !word.is_empty()
        && ![
            "no",
            "none",
            "false",
            "0",
            "n/a",
            "nothing",
            "not found",
            "no.",
        ]
        .iter()
        .any(|no| first == *no || word == *no)
}

/// The most frequent result (normalised), the first of a tie; returned as first
/// written.
fn vote(results: &[String]) -> String {
    let mut counts: HashMap<String, (usize, usize)> = HashMap::new();
    for (i, r) in results.iter().enumerate() {
        let entry = counts.entry(normalise(r)).or_insert((0, i));
        entry.0 += 1;
    }
    counts
        .values()
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .map(|(_, first)| results[*first].trim().to_owned())
        .unwrap_or_default()
}

/// The items of every result (lines, or comma-separated parts of a one-line result;
/// list markers dropped), distinct (normalised), in the order first seen.
fn distinct_items(results: &[String]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    items(results)
        .filter(|item| seen.insert(normalise(item)))
        .collect()
}

fn items(results: &[String]) -> impl Iterator<Item = String> + '_ {
    results.iter().flat_map(|r| {
        let lines: Vec<&str> = r.lines().filter(|l| !l.trim().is_empty()).collect();
        let parts: Vec<String> = if lines.len() == 1 {
            lines[0].split(',').map(str::to_owned).collect()
        } else {
            lines.into_iter().map(str::to_owned).collect()
        };
        parts
            .into_iter()
            .map(|p| {
                p.trim()
                    .trim_start_matches(['-', '*', '•'])
                    .trim()
                    .to_owned()
            })
            .filter(|p| !p.is_empty() && !says_nothing(p))
    })
}

/// True for an item that only says the piece had nothing.
fn says_nothing(item: &str) -> bool {
    matches!(normalise(item).as_str(), "none" | "nothing" | "n/a" | "no")
}

/// The `k` most frequent items, `item (count)` one per line, ties in the order first
/// seen.
fn top_k(results: &[String], k: usize) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut counts: HashMap<String, (usize, String)> = HashMap::new();
    for item in items(results) {
        let key = normalise(&item);
        let entry = counts.entry(key.clone()).or_insert_with(|| {
            order.push(key.clone());
            (0, item.clone())
        });
        entry.0 += 1;
    }
    let mut ranked: Vec<(usize, usize, &String)> = order
        .iter()
        .enumerate()
        .filter_map(|(i, key)| counts.get(key).map(|(n, item)| (*n, i, item)))
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    ranked
        .into_iter()
        .take(k)
        .map(|(n, _, item)| ranked_line(item, n))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One line of a `top_k` result: the item and how many results held it,
/// `billing (184)`.
fn ranked_line(item: &str, count: usize) -> String {
    format!("{item} ({count})")
}

/// The item of a line in the `top_k` reduction's form (`billing (184)` → `billing`), or
/// `None` for a line without a count in brackets at its end: how a ranked value printed
/// by a plan is read back where a reply states it.
pub fn ranked_item(line: &str) -> Option<&str> {
    let (item, count) = line.trim().rsplit_once(" (")?;
    let digits = count.strip_suffix(')')?;
    (!item.is_empty() && !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()))
        .then_some(item)
}

/// How many unordered pairs of items are equal (normalised): n(n−1)/2 for each
/// distinct item seen n times, summed.
fn equal_pairs(results: &[String]) -> u64 {
    let mut counts: HashMap<String, u64> = HashMap::new();
    for item in items(results) {
        *counts.entry(normalise(&item)).or_default() += 1;
    }
    counts.values().map(|n| n * n.saturating_sub(1) / 2).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_ranked_line_is_read_back_to_its_item() {
        assert_eq!(ranked_item("billing (184)"), Some("billing"));
        assert_eq!(ranked_item("  loyalty (80)\n"), Some("loyalty"));
        assert_eq!(ranked_item("gate (b) (3)"), Some("gate (b)"));
        for line in [
            "billing",
            "billing ()",
            "billing (x)",
            " (3)",
            "billing (3",
            "184",
        ] {
            assert_eq!(ranked_item(line), None, "{line}");
        }
    }

    proptest::proptest! {
        #[test]
        fn every_line_top_k_writes_reads_back(
            item in "[a-z0-9_()-]([a-z0-9 _()-]{0,20}[a-z0-9_()-])?",
            count in 1usize..100_000,
        ) {
            let line = ranked_line(&item, count);
            proptest::prop_assert_eq!(ranked_item(&line), Some(item.as_str()));
        }
    }

    #[test]
    fn numbers_are_read_as_small_models_write_them() {
        assert_eq!(first_number("There are 1,432 errors."), Some(1432.0));
        assert_eq!(first_number("about 3.5 per line"), Some(3.5));
        assert_eq!(first_number("-7 degrees"), Some(-7.0));
        assert_eq!(first_number("2, 3 and 4"), Some(2.0));
        assert_eq!(first_number("none"), None);
    }

    #[test]
    fn numeric_reductions_skip_results_without_a_number() {
        let results = strings(&["12 errors", "none here", "There are 1,000.", "3"]);
        assert_eq!(reduce(&Reduce::Sum, &results).unwrap(), "1015");
        assert_eq!(reduce(&Reduce::Min, &results).unwrap(), "3");
        assert_eq!(reduce(&Reduce::Max, &results).unwrap(), "1000");
        let error = reduce(&Reduce::Sum, &strings(&["no", "nothing"])).unwrap_err();
        assert!(error.to_string().contains("found no number"), "{error}");
        assert!(error
            .advice(None)
            .is_some_and(|a| a.starts_with("ask the map for a number only")));
        // Values extracted, then summed: every reduction of values is named, in one
        // order whatever the plan was for.
        let extract = Map::Extract("host=(\\w+)".into());
        assert_eq!(
            error.advice(Some(&extract)).expect("advice"),
            "the extract gave values, not numbers: to count them use {\"op\": \"count\"}; for the most frequent use {\"op\": \"top_k\", \"k\": 1}; for each once use {\"op\": \"union\"}; for how many pairs are equal use {\"op\": \"pairs\"}"
        );
        assert_eq!(reduce(&Reduce::Sum, &[]).unwrap(), "0");
        assert!(reduce(&Reduce::Max, &[]).is_err());
    }

    #[test]
    fn count_vote_and_lists() {
        let answers = strings(&["Yes", "no", "yes.", "None", "3", "0", "It mentions it"]);
        assert_eq!(reduce(&Reduce::Count, &answers).unwrap(), "4");
        assert_eq!(
            reduce(&Reduce::Vote, &strings(&["Paris", "paris.", "Lyon"])).unwrap(),
            "Paris"
        );
        let lists = strings(&["- alice\n- bob", "Bob, carol", "none", "alice"]);
        assert_eq!(reduce(&Reduce::Union, &lists).unwrap(), "alice\nbob\ncarol");
        assert_eq!(
            reduce(&Reduce::Join { separator: None }, &lists).unwrap(),
            "alice, bob, carol"
        );
        assert_eq!(
            reduce(&Reduce::TopK { k: 2 }, &lists).unwrap(),
            "alice (2)\nbob (2)"
        );
        // alice twice and bob twice: one pair each; carol alone: none.
        assert_eq!(reduce(&Reduce::Pairs, &lists).unwrap(), "2");
        let cities = strings(&["Lima", "lima", "Oslo", "Lima", "Oslo", "Quito"]);
        assert_eq!(reduce(&Reduce::Pairs, &cities).unwrap(), "4");
        assert_eq!(reduce(&Reduce::Pairs, &[]).unwrap(), "0");
        assert_eq!(
            reduce(
                &Reduce::Concat {
                    separator: Some(" | ".into())
                },
                &strings(&["a", "b"])
            )
            .unwrap(),
            "a | b"
        );
        assert_eq!(
            reduce(
                &Reduce::Ask {
                    instruction: "x".into()
                },
                &lists
            ),
            Err(ReduceError::NeedsModel)
        );
    }

    #[test]
    fn count_distinct_counts_the_items_union_lists() {
        for (results, want) in [
            (
                strings(&["- alice\n- bob", "Bob, carol", "none", "alice"]),
                "3",
            ),
            (strings(&["GET", "get", "POST ", "PUT"]), "3"),
            (strings(&[]), "0"),
        ] {
            assert_eq!(
                reduce(&Reduce::CountDistinct, &results).as_deref(),
                Ok(want),
                "{results:?}"
            );
        }
    }

    #[test]
    fn a_record_reduction_s_error_is_its_own_and_advises_nothing_more() {
        let error = reduce(
            &Reduce::GroupBy {
                key: r"user=(\w+)".into(),
                value: None,
                agg: crate::spec::Aggregate::Count,
                k: None,
            },
            &strings(&["GET /a 200"]),
        )
        .unwrap_err();
        assert!(
            error.to_string().starts_with(
                r#"the key pattern "user=(\\w+)" of `group_by` matched none of the 1 records"#
            ),
            "{error}"
        );
        assert_eq!(error.advice(Some(&Map::Extract("^.*$".into()))), None);
    }
}

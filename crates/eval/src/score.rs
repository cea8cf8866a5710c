//! Scorers: each item's answer is exact text, a number or a set, RULER's gold strings
//! (`ruler`) or OOLONG's answer (`oolong`), and an answer the model gave is scored in
//! [0, 1] against it.

use std::collections::BTreeSet;

pub mod oolong;
pub mod ruler;

use serde::{Deserialize, Serialize};

/// An item's expected answer, and how an answer is scored against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Expected {
    /// Exact text (case and surrounding punctuation aside); an answer of a few words
    /// that contains it as a whole word counts too ("The number is 4172.").
    Exact(String),
    /// A number; the first number in the answer must match it within a relative
    /// 1e-6.
    Number(f64),
    /// A set of values, all to be found: F1 of the values in the answer (split at
    /// commas, semicolons, whitespace and "and") against the set.
    Set(Vec<String>),
    /// One of named candidates (the labels, the five words of a question): scored as
    /// [`Expected::Exact`], and wrong when the answer also names another candidate —
    /// "fraud, support or shipping" is a hedge, not an answer.
    Choice {
        /// The right candidate.
        answer: String,
        /// The other candidates.
        others: Vec<String>,
    },
    /// RULER's gold strings, scored by the task's RULER metric (`ruler/*`).
    Ruler {
        /// The gold strings.
        refs: Vec<String>,
        /// `string_match_all` or `string_match_part`.
        metric: ruler::Metric,
    },
    /// OOLONG's gold answer, scored as OOLONG scores its kind (`oolong/*`).
    Oolong {
        /// The answer (a label, a number, a user id, `YYYY-MM-DD`, `Month YYYY` or a
        /// comparison phrase).
        answer: String,
        /// What kind of answer it is.
        kind: oolong::AnswerKind,
    },
}

impl Expected {
    /// The answer as a model would write it, for tables and the oracle.
    pub fn as_answer(&self) -> String {
        match self {
            Self::Exact(text) => text.clone(),
            Self::Number(n) => format_number(*n),
            Self::Set(items) => items.join(", "),
            Self::Choice { answer, .. } => answer.clone(),
            Self::Ruler { refs, .. } => refs.join(", "),
            Self::Oolong { answer, kind } => kind.written(answer),
        }
    }
}

/// A number as an answer: integral values without a fraction.
pub fn format_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// The score of `got` against `expected`, in [0, 1].
pub fn score(expected: &Expected, got: &str) -> f64 {
    match expected {
        Expected::Exact(want) => {
            let got = normalise(got);
            let want = normalise(want);
            let words = got.split_whitespace().count();
            f64::from(u8::from(
                got == want || (words <= 12 && has_whole_word(&got, &want)),
            ))
        }
        Expected::Choice { answer, others } => {
            let hedged = others
                .iter()
                .any(|other| has_whole_word(&normalise(got), &normalise(other)));
            if hedged {
                0.0
            } else {
                score(&Expected::Exact(answer.clone()), got)
            }
        }
        Expected::Number(want) => match first_number(got) {
            Some(n) if (n - want).abs() <= want.abs().max(1.0) * 1e-6 => 1.0,
            _ => 0.0,
        },
        Expected::Ruler { refs, metric } => metric.score(refs, got),
        Expected::Oolong { answer, kind } => oolong::score(answer, *kind, got),
        Expected::Set(want) => {
            let want: BTreeSet<String> = want.iter().map(|w| normalise(w)).collect();
            let got: BTreeSet<String> = normalise(got)
                .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
                .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_owned())
                .filter(|w| !w.is_empty() && w != "and")
                .collect();
            let hits = want.intersection(&got).count() as f64;
            if hits == 0.0 {
                return 0.0;
            }
            let precision = hits / got.len() as f64;
            let recall = hits / want.len() as f64;
            2.0 * precision * recall / (precision + recall)
        }
    }
}

/// True when `word` is one of the words of `text` (words split at anything but
/// letters, digits, `-` and `_`).
fn has_whole_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric() && c != '-' && c != '_')
        .any(|w| w == word)
}

/// Lower case, trimmed of whitespace, quotes and a final period.
fn normalise(text: &str) -> String {
    text.trim()
        .trim_matches(|c: char| c == '"' || c == '\'' || c == '`')
        .trim_end_matches('.')
        .trim()
        .to_lowercase()
}

/// The first number in `text` (thousands separators allowed).
fn first_number(text: &str) -> Option<f64> {
    let re = regex::Regex::new(r"-?\d[\d,]*(\.\d+)?").ok()?;
    let found = re.find(text)?;
    found.as_str().replace(',', "").parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_answers_tolerate_case_quotes_and_a_short_sentence() {
        let want = Expected::Exact("4172093".into());
        assert_eq!(score(&want, "4172093"), 1.0);
        assert_eq!(score(&want, " '4172093'. "), 1.0);
        assert_eq!(score(&want, "The special magic number is 4172093."), 1.0);
        assert_eq!(score(&want, "41720930"), 0.0);
        assert_eq!(score(&want, "I could not find it"), 0.0);
        let label = Expected::Exact("billing".into());
        assert_eq!(score(&label, "Billing"), 1.0);
        assert_eq!(score(&label, "billing-v2"), 0.0);
    }

    #[test]
    fn a_choice_that_names_another_candidate_is_a_hedge_and_wrong() {
        let want = Expected::Choice {
            answer: "shipping".into(),
            others: vec!["fraud".into(), "support".into(), "payments".into()],
        };
        assert_eq!(score(&want, "shipping"), 1.0);
        assert_eq!(score(&want, "The most frequent label is shipping."), 1.0);
        assert_eq!(score(&want, "label=shipping"), 1.0);
        // Seen from a real model: three labels at once.
        assert_eq!(
            score(
                &want,
                "label=fraud appears 44 times, label=support appears 44 times, label=shipping appears 44 times"
            ),
            0.0
        );
        assert_eq!(score(&want, "fraud"), 0.0);
        assert_eq!(score(&want, "shipping-v2"), 0.0);
        // The candidates' own forms: a choice survives a round trip through results.json.
        let json = serde_json::to_string(&want).unwrap();
        assert_eq!(serde_json::from_str::<Expected>(&json).unwrap(), want);
    }

    #[test]
    fn numbers_are_read_from_the_answer() {
        let want = Expected::Number(1234.0);
        assert_eq!(score(&want, "1234"), 1.0);
        assert_eq!(score(&want, "There are 1,234 records."), 1.0);
        assert_eq!(score(&want, "1235"), 0.0);
        assert_eq!(score(&want, "none"), 0.0);
        assert_eq!(score(&Expected::Number(0.5), "0.5000000001"), 1.0);
    }

    #[test]
    fn sets_score_f1() {
        let want = Expected::Set(vec!["11".into(), "22".into(), "33".into(), "44".into()]);
        assert_eq!(score(&want, "11, 22, 33, 44"), 1.0);
        assert_eq!(score(&want, "44; 33 and 22, 11."), 1.0);
        let half = score(&want, "11, 22");
        assert!((half - 2.0 * 1.0 * 0.5 / 1.5).abs() < 1e-9, "{half}");
        assert_eq!(score(&want, "99"), 0.0);
    }

    #[test]
    fn every_expected_answer_scores_itself_one() {
        for want in [
            Expected::Exact("ruby-falcon".into()),
            Expected::Number(-12.5),
            Expected::Number(40_000.0),
            Expected::Set(vec!["1".into(), "2".into()]),
            Expected::Ruler {
                refs: vec!["ABCDE".into(), "FGHIJ".into()],
                metric: crate::ruler::Metric::All,
            },
            Expected::Oolong {
                answer: "human being".into(),
                kind: crate::oolong::AnswerKind::Label,
            },
        ] {
            assert_eq!(score(&want, &want.as_answer()), 1.0, "{want:?}");
        }
    }
}

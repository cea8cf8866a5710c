//! RULER's two metrics (`scripts/eval/synthetic/constants.py`), per item: the gold
//! strings are looked for in the answer, case-insensitively, as substrings.
//!
//! RULER strips the prediction and turns its control characters into newlines before
//! matching (`postprocess_pred`); neither changes whether a gold string (which holds no
//! control character) is a substring, so the answer is matched as it is.

use serde::{Deserialize, Serialize};

/// Which of RULER's metrics scores a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// `string_match_all`: the fraction of the gold strings found in the answer.
    #[serde(rename = "string_match_all")]
    All,
    /// `string_match_part`: 1 when any gold string is found in the answer, else 0.
    #[serde(rename = "string_match_part")]
    Part,
}

impl Metric {
    /// The score of `answer` against the gold strings `refs`, in [0, 1].
    pub fn score(self, refs: &[String], answer: &str) -> f64 {
        match self {
            Self::All => string_match_all(refs, answer),
            Self::Part => string_match_part(refs, answer),
        }
    }
}

/// `string_match_all` of one item: the fraction of `refs` found in `answer` (0 when
/// there are none).
pub fn string_match_all(refs: &[String], answer: &str) -> f64 {
    if refs.is_empty() {
        return 0.0;
    }
    let answer = answer.to_lowercase();
    let found = refs
        .iter()
        .filter(|r| answer.contains(&r.to_lowercase()))
        .count();
    found as f64 / refs.len() as f64
}

/// `string_match_part` of one item: 1 when one of `refs` is found in `answer`.
pub fn string_match_part(refs: &[String], answer: &str) -> f64 {
    let answer = answer.to_lowercase();
    f64::from(u8::from(
        refs.iter().any(|r| answer.contains(&r.to_lowercase())),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Scores computed by hand from RULER's definitions.
    #[test]
    fn the_metrics_match_hand_computed_scores() {
        let four = refs(&["1234567", "7654321", "1111111", "2222222"]);
        // Two of four found: 0.5 by string_match_all, 1 by string_match_part.
        let answer = "The numbers are 1234567 and 2222222.";
        assert_eq!(string_match_all(&four, answer), 0.5);
        assert_eq!(string_match_part(&four, answer), 1.0);
        // Case does not matter; a substring counts (RULER's rule), so does a gold
        // string inside a longer word.
        let words = refs(&["Apple", "pear", "art"]);
        assert_eq!(string_match_all(&words, "APPLE, Pear, start"), 1.0);
        assert!((string_match_all(&words, "apple") - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(string_match_part(&words, "none here"), 0.0);
        assert_eq!(string_match_all(&words, ""), 0.0);
        // UUIDs and variable names as RULER's tasks write them.
        let vt = refs(&["ABCDE", "FGHIJ", "KLMNO", "PQRST", "UVWXY"]);
        assert_eq!(
            string_match_all(&vt, "they are: ABCDE FGHIJ KLMNO PQRST UVWXY"),
            1.0
        );
        assert_eq!(string_match_all(&vt, "abcde, fghij, klmno"), 0.6);
        assert_eq!(string_match_all(&[], "x"), 0.0);
        assert_eq!(Metric::All.score(&four, answer), 0.5);
        assert_eq!(Metric::Part.score(&four, answer), 1.0);
    }
}

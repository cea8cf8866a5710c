//! OOLONG's scoring of a synthetic item (`synth_attempt_answer_parse` and
//! `synth_process_response` in `src/eval/eval_helpers.py`), re-implemented: the answer
//! is cut after its last `:` and trimmed of `*`, `[` and `]`; then an exact match scores
//! 1, a comparison is matched on its phrase, a count scores `0.75^|error|` and a date is
//! read as a date. Exact means exact: case counts, as in OOLONG.
//!
//! OOLONG reads dates with `dateutil`'s parser; this module reads the forms a model
//! writes (`MM/DD/YYYY`, `YYYY-MM-DD`, `Mon DD, YYYY`, `Month DD, YYYY`, `DD Month
//! YYYY`), which is narrower: an answer in another form scores 0 here.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

/// What an OOLONG answer is (`answer_type`, `ANSWER_TYPE.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerKind {
    /// A label (`ANSWER_TYPE.LABEL`).
    Label,
    /// `more common than` / `less common than` / `same frequency as`, or before/after's
    /// `more common` / `less common` / `the same frequency` (`ANSWER_TYPE.COMPARISON`).
    Comparison,
    /// A count (`ANSWER_TYPE.NUMERIC`).
    Numeric,
    /// A user id (`ANSWER_TYPE.USER`).
    User,
    /// A date, kept as `YYYY-MM-DD` (`ANSWER_TYPE.DATE`).
    Date,
    /// `Month YYYY` (`ANSWER_TYPE.MONTH_YEAR`).
    MonthYear,
}

impl AnswerKind {
    /// The kind of a released record's `answer_type` (`ANSWER_TYPE.NUMERIC`, …);
    /// `None` for a type OOLONG does not have.
    pub fn from_answer_type(text: &str) -> Option<Self> {
        Some(match text.trim().trim_start_matches("ANSWER_TYPE.") {
            "LABEL" => Self::Label,
            "COMPARISON" => Self::Comparison,
            "NUMERIC" => Self::Numeric,
            "USER" => Self::User,
            "DATE" => Self::Date,
            "MONTH_YEAR" => Self::MonthYear,
            _ => return None,
        })
    }

    /// The answer as OOLONG's question asks it to be written (`Label: …`, `Answer: …`,
    /// `User: …`, `Date: MM/DD/YYYY`).
    pub fn written(self, gold: &str) -> String {
        match self {
            Self::Label => format!("Label: {gold}"),
            Self::User => format!("User: {gold}"),
            Self::Date => match NaiveDate::parse_from_str(gold, "%Y-%m-%d") {
                Ok(day) => format!("Date: {}", day.format("%m/%d/%Y")),
                Err(_) => format!("Date: {gold}"),
            },
            Self::Comparison | Self::Numeric | Self::MonthYear => format!("Answer: {gold}"),
        }
    }
}

/// The comparison phrases OOLONG matches inside the gold phrase.
const PHRASES: [&str; 3] = ["more common", "less common", "same frequency"];

/// `synth_attempt_answer_parse`: the part of `answer` OOLONG compares with the gold.
pub fn attempt_parse(answer: &str) -> String {
    if !answer.contains(':') {
        if answer.chars().count() < 20 {
            return answer.to_owned();
        }
        return answer
            .split_whitespace()
            .last()
            .unwrap_or_default()
            .to_owned();
    }
    let candidate: String = answer
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .trim()
        .chars()
        .filter(|c| !matches!(c, '*' | '[' | ']'))
        .collect();
    if candidate.chars().count() < 20 {
        return candidate;
    }
    PHRASES
        .into_iter()
        .find(|phrase| candidate.contains(phrase))
        .map_or(candidate, str::to_owned)
}

/// `synth_process_response`'s score of `answer` against `gold` of `kind`, in [0, 1].
pub fn score(gold: &str, kind: AnswerKind, answer: &str) -> f64 {
    let got = attempt_parse(answer);
    if got == gold {
        return 1.0;
    }
    if PHRASES.contains(&got.as_str()) {
        return f64::from(u8::from(gold.contains(got.as_str())));
    }
    match kind {
        AnswerKind::Numeric => match (python_int(&got), python_int(gold)) {
            // 0.75 multiplied in, not `powf`: the same score on every platform.
            (Some(got), Some(gold)) => (0..got.abs_diff(gold).min(4096)).fold(1.0, |s, _| s * 0.75),
            _ => 0.0,
        },
        AnswerKind::Date => match (read_date(&got), NaiveDate::parse_from_str(gold, "%Y-%m-%d")) {
            (Some(got), Ok(gold)) => f64::from(u8::from(got == gold)),
            _ => 0.0,
        },
        AnswerKind::Label | AnswerKind::Comparison | AnswerKind::User | AnswerKind::MonthYear => {
            0.0
        }
    }
}

/// Python's `int(text)` for decimal text: surrounding whitespace, a sign, digits
/// (underscores between them).
fn python_int(text: &str) -> Option<i64> {
    let text = text.trim();
    let (sign, digits) = match text.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, text.strip_prefix('+').unwrap_or(text)),
    };
    let valid = !digits.is_empty()
        && !digits.starts_with('_')
        && !digits.ends_with('_')
        && !digits.contains("__")
        && digits.chars().all(|c| c.is_ascii_digit() || c == '_');
    if !valid {
        return None;
    }
    digits
        .replace('_', "")
        .parse::<i64>()
        .ok()
        .map(|n| sign * n)
}

/// A date in one of the forms models write.
pub(crate) fn read_date(text: &str) -> Option<NaiveDate> {
    const FORMS: [&str; 10] = [
        "%m/%d/%Y",
        "%Y-%m-%d",
        "%b %d, %Y",
        "%B %d, %Y",
        "%b %d %Y",
        "%B %d %Y",
        "%d %B %Y",
        "%d %b %Y",
        "%m-%d-%Y",
        "%Y/%m/%d",
    ];
    let text = text.trim();
    FORMS
        .iter()
        .find_map(|form| NaiveDate::parse_from_str(text, form).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scores computed by hand from OOLONG's two functions.
    #[test]
    fn scores_match_oolongs_functions_by_hand() {
        use AnswerKind::*;
        // Labels: exact after the last colon, case counts.
        assert_eq!(score("entity", Label, "Label: entity"), 1.0);
        assert_eq!(score("entity", Label, "Label: **[entity]**"), 1.0);
        assert_eq!(score("entity", Label, "entity"), 1.0);
        assert_eq!(score("entity", Label, "Label: Entity"), 0.0);
        assert_eq!(score("entity", Label, "Label: entity."), 0.0);
        // No colon and 20 characters or more: the last word is compared.
        assert_eq!(
            score(
                "description and abstract concept",
                Label,
                "description and abstract concept"
            ),
            0.0
        );
        assert_eq!(
            score("location", Label, "I think the answer is location"),
            1.0
        );
        // Counts: 0.75 per unit of error.
        assert_eq!(score("12", Numeric, "Answer: 12"), 1.0);
        assert_eq!(score("12", Numeric, "Answer: 10"), 0.5625);
        assert_eq!(score("12", Numeric, "Answer: 15"), 0.421875);
        assert_eq!(score("12", Numeric, " 13 "), 0.75);
        assert_eq!(score("12", Numeric, "Answer: twelve"), 0.0);
        assert_eq!(score("12", Numeric, "Answer: 12."), 0.0);
        // Comparisons: the phrase, also inside a longer answer.
        assert_eq!(
            score("more common than", Comparison, "Answer: more common than"),
            1.0
        );
        assert_eq!(
            score(
                "less common than",
                Comparison,
                "Answer: human being is less common than location"
            ),
            1.0
        );
        assert_eq!(
            score(
                "more common than",
                Comparison,
                "Answer: entity is less common than location"
            ),
            0.0
        );
        assert_eq!(
            score(
                "the same frequency",
                Comparison,
                "Answer: entity is the same frequency before 2023-01-02"
            ),
            1.0
        );
        // Users and months: exact.
        assert_eq!(score("48213", User, "User: 48213"), 1.0);
        assert_eq!(score("48213", User, "User: 48214"), 0.0);
        assert_eq!(
            score("October 2022", MonthYear, "Answer: October 2022"),
            1.0
        );
        assert_eq!(
            score("October 2022", MonthYear, "Answer: october 2022"),
            0.0
        );
        // Dates: read as dates.
        assert_eq!(score("2023-05-07", Date, "Date: 05/07/2023"), 1.0);
        assert_eq!(score("2023-05-07", Date, "Date: May 7, 2023"), 1.0);
        assert_eq!(score("2023-05-07", Date, "Date: 05/08/2023"), 0.0);
        assert_eq!(score("2023-05-07", Date, "Date: soon"), 0.0);
    }

    #[test]
    fn answers_are_written_as_the_questions_ask() {
        assert_eq!(AnswerKind::Date.written("2024-01-09"), "Date: 01/09/2024");
        assert_eq!(AnswerKind::Label.written("entity"), "Label: entity");
        for kind in [
            AnswerKind::Label,
            AnswerKind::Numeric,
            AnswerKind::User,
            AnswerKind::Date,
            AnswerKind::MonthYear,
            AnswerKind::Comparison,
        ] {
            let gold = match kind {
                AnswerKind::Numeric | AnswerKind::User => "17",
                AnswerKind::Date => "2022-12-30",
                AnswerKind::MonthYear => "March 2024",
                AnswerKind::Comparison => "same frequency as",
                AnswerKind::Label => "human being",
            };
            assert_eq!(score(gold, kind, &kind.written(gold)), 1.0, "{kind:?}");
        }
        assert_eq!(
            AnswerKind::from_answer_type("ANSWER_TYPE.MONTH_YEAR"),
            Some(AnswerKind::MonthYear)
        );
        assert_eq!(AnswerKind::from_answer_type("ANSWER_TYPE.OTHER"), None);
    }
}

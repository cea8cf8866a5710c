//! `where` filters: conditions on a record's numeric fields, such as `bytes > 1000` or
//! `status >= 500 and bytes < 1024`, which a regular expression cannot say without
//! spelling out every number (a regex for "more than 1000" is a tangle of digit
//! classes that models rarely write right).
//!
//! A field is read where a record names it followed by `=` or `:` and a number:
//! `bytes=2003`, `bytes: 2003`, `"bytes": 2003`, `bytes="2003"` (the field's name case
//! ignored, its first mention in the record). A record that does not name the field, or
//! names it without a number, does not pass.

use regex::{Regex, RegexBuilder};

/// Conditions joined by `and`: a record passes when every one holds.
#[derive(Debug, Clone)]
pub struct Condition {
    clauses: Vec<Clause>,
}

/// One `FIELD OP NUMBER`.
#[derive(Debug, Clone)]
struct Clause {
    /// The field's name as written (`bytes`).
    field: String,
    op: Compare,
    value: f64,
    /// Finds the field's number in a record.
    reader: Regex,
}

/// How a field's number is compared with the clause's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compare {
    Greater,
    GreaterOrEqual,
    Less,
    LessOrEqual,
    Equal,
    NotEqual,
}

/// The operators, longest first so `>=` is not read as `>`.
const OPERATORS: [(&str, Compare); 7] = [
    (">=", Compare::GreaterOrEqual),
    ("<=", Compare::LessOrEqual),
    ("!=", Compare::NotEqual),
    ("==", Compare::Equal),
    (">", Compare::Greater),
    ("<", Compare::Less),
    ("=", Compare::Equal),
];

/// Longest condition a plan may hold, in bytes.
pub const MAX_CONDITION_BYTES: usize = 1_000;

const EXAMPLE: &str = "e.g. \"bytes > 1000\" or \"status >= 500 and bytes < 1024\"";

/// Why a `where` condition does not read; the message is for the model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConditionError {
    /// Longer than [`MAX_CONDITION_BYTES`].
    #[error("the condition is {bytes} bytes, over {MAX_CONDITION_BYTES}")]
    TooLong {
        /// Its length.
        bytes: usize,
    },
    /// No clause at all.
    #[error("the condition is empty: {EXAMPLE}")]
    Empty,
    /// A clause without an operator.
    #[error("`{clause}` has no comparison (>, >=, <, <=, =, !=): {EXAMPLE}")]
    NoComparison {
        /// The clause.
        clause: String,
    },
    /// What comes before the operator is not a field's name.
    #[error("`{clause}`: the field before `{symbol}` must be a name (letters, digits, _ . -): {EXAMPLE}")]
    NotAName {
        /// The clause.
        clause: String,
        /// Its operator.
        symbol: &'static str,
    },
    /// What comes after the operator is not a number.
    #[error("`{clause}`: `{number}` after `{symbol}` is not a number: {EXAMPLE}")]
    NotANumber {
        /// The clause.
        clause: String,
        /// What it compares with.
        number: String,
        /// Its operator.
        symbol: &'static str,
    },
    /// The field's reader, or the joiner of clauses, did not compile.
    #[error("`{clause}` cannot be searched for ({error})")]
    Unsearchable {
        /// The clause (or the whole condition).
        clause: String,
        /// What the compiler said (in the message, so not a source).
        error: regex::Error,
    },
}

impl Condition {
    /// Reads `text`: clauses `FIELD OP NUMBER` joined by `and` (or `&&`), with OP one
    /// of `>`, `>=`, `<`, `<=`, `=`, `==`, `!=`; or says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, ConditionError> {
        if text.len() > MAX_CONDITION_BYTES {
            return Err(ConditionError::TooLong { bytes: text.len() });
        }
        let clauses = split_clauses(text)?
            .into_iter()
            .map(parse_clause)
            .collect::<Result<Vec<_>, _>>()?;
        if clauses.is_empty() {
            return Err(ConditionError::Empty);
        }
        Ok(Self { clauses })
    }

    /// The field the first clause compares (`bytes` of `bytes > 2000 and status < 10`).
    pub fn field(&self) -> &str {
        self.clauses.first().map_or("", |clause| &clause.field)
    }

    /// True when every clause holds for `record`.
    pub fn holds_for(&self, record: &str) -> bool {
        self.clauses.iter().all(|clause| clause.holds_for(record))
    }
}

/// The clauses of `text`, split at `and` (any case, between spaces) and `&&`; empty
/// parts dropped.
fn split_clauses(text: &str) -> Result<Vec<&str>, ConditionError> {
    let joiner = Regex::new(r"(?i)\s+and\s+|&&").map_err(|error| ConditionError::Unsearchable {
        clause: text.to_owned(),
        error,
    })?;
    Ok(joiner
        .split(text)
        .map(str::trim)
        .filter(|clause| !clause.is_empty())
        .collect())
}

fn parse_clause(text: &str) -> Result<Clause, ConditionError> {
    let (at, symbol, op) = OPERATORS
        .iter()
        .filter_map(|(symbol, op)| text.find(symbol).map(|at| (at, *symbol, *op)))
        // The first operator in the text; at one place, the longest (listed first).
        .min_by_key(|(at, _, _)| *at)
        .ok_or_else(|| ConditionError::NoComparison {
            clause: text.to_owned(),
        })?;
    let field = text[..at].trim().trim_matches(|c| c == '"' || c == '\'');
    let number = text[at + symbol.len()..]
        .trim()
        .trim_matches(|c| c == '"' || c == '\'');
    if field.is_empty()
        || !field
            .chars()
            .all(|c| c.is_alphanumeric() || "_.-".contains(c))
    {
        return Err(ConditionError::NotAName {
            clause: text.to_owned(),
            symbol,
        });
    }
    let value: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| ConditionError::NotANumber {
            clause: text.to_owned(),
            number: number.to_owned(),
            symbol,
        })?;
    let reader = RegexBuilder::new(&format!(
        r#"(?:^|[^\w.-])"?{}"?\s*[=:]\s*"?(-?\d+(?:\.\d+)?)"#,
        regex::escape(field)
    ))
    .case_insensitive(true)
    .build()
    .map_err(|error| ConditionError::Unsearchable {
        clause: text.to_owned(),
        error,
    })?;
    Ok(Clause {
        field: field.to_owned(),
        op,
        value,
        reader,
    })
}

impl Clause {
    fn holds_for(&self, record: &str) -> bool {
        let Some(found) = self
            .reader
            .captures(record)
            .and_then(|c| c.get(1))
            .and_then(|m| m.as_str().parse::<f64>().ok())
        else {
            return false;
        };
        match self.op {
            Compare::Greater => found > self.value,
            Compare::GreaterOrEqual => found >= self.value,
            Compare::Less => found < self.value,
            Compare::LessOrEqual => found <= self.value,
            Compare::Equal => found == self.value,
            Compare::NotEqual => found != self.value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn holds(condition: &str, record: &str) -> bool {
        Condition::parse(condition)
            .expect("a valid condition")
            .holds_for(record)
    }

    #[test]
    fn the_first_clause_names_the_field() {
        let field = |text: &str| Condition::parse(text).expect("valid").field().to_owned();
        assert_eq!(field("bytes > 2000"), "bytes");
        assert_eq!(field("\"status\" >= 500 and bytes < 10"), "status");
    }

    #[test]
    fn a_field_is_read_in_every_key_value_form() {
        for record in [
            "user=ana host=web1 bytes=2003",
            "user: ana, bytes: 2003",
            r#"{"user": "ana", "bytes": 2003}"#,
            r#"{"user": "ana", "bytes": "2003"}"#,
            "BYTES = 2003",
        ] {
            assert!(holds("bytes > 2000", record), "{record}");
            assert!(!holds("bytes < 2000", record), "{record}");
        }
    }

    #[test]
    fn every_operator_compares_as_written() {
        let record = "status=500 bytes=1024";
        assert!(holds("status >= 500", record));
        assert!(!holds("status > 500", record));
        assert!(holds("status <= 500", record));
        assert!(!holds("status < 500", record));
        assert!(holds("status = 500", record));
        assert!(holds("status == 500", record));
        assert!(!holds("status != 500", record));
        assert!(holds("bytes>1000", record));
        assert!(holds("bytes > 1000.5", record));
    }

    #[test]
    fn clauses_joined_by_and_must_all_hold() {
        let record = "status=500 bytes=1024";
        assert!(holds("status >= 500 and bytes > 1000", record));
        assert!(holds("status >= 500 AND bytes > 1000", record));
        assert!(holds("status >= 500 && bytes > 1000", record));
        assert!(!holds("status >= 500 and bytes > 2000", record));
    }

    #[test]
    fn a_record_without_the_field_or_its_number_does_not_pass() {
        assert!(!holds("bytes > 2000", "user=ana host=web1"));
        assert!(!holds("bytes > 2000", "bytes=unknown"));
        // Another field that ends with the name is not the field.
        assert!(!holds("bytes > 2000", "birthbytes=2003"));
        assert!(holds("bytes > 2000", "birthbytes=1990 bytes=2003"));
    }

    #[test]
    fn bad_conditions_say_what_is_wrong() {
        let error = |text: &str| Condition::parse(text).expect_err(text).to_string();
        assert!(error("").contains("empty"));
        assert!(error("bytes after 2000").contains("no comparison"));
        assert!(error("bytes > two thousand").contains("is not a number"));
        assert!(error("> 2000").contains("must be a name"));
        assert!(error("the bytes > 2000").contains("must be a name"));
        assert!(error(&"a".repeat(2_000)).contains("over"));
    }

    proptest! {
        #[test]
        fn parsing_never_panics(text in ".{0,80}") {
            let _ = Condition::parse(&text);
        }

        #[test]
        fn a_comparison_agrees_with_the_numbers(field in "[a-z][a-z_]{0,8}", found in -5000i64..5000, bound in -5000i64..5000) {
            let record = format!("note-0=1 {field}={found} note-1=x");
            prop_assert_eq!(holds(&format!("{field} > {bound}"), &record), found > bound);
            prop_assert_eq!(holds(&format!("{field} <= {bound}"), &record), found <= bound);
            prop_assert_eq!(holds(&format!("{field} != {bound}"), &record), found != bound);
        }
    }
}

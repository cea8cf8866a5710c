//! The reductions over records: `group_by` (each record's key and number, read by two
//! patterns, aggregated per key) and `argmax` (the record with the largest number). A
//! record is a line of the results: an `extract` map of `^.*$` lists every line of the
//! kept pieces whole, an `ask` map's answer may list several. Values are read strictly —
//! a value pattern that captures `n/a` or `12 USD` is an error that names the values —
//! so a sum is never quietly short of the records it could not read; every error says
//! what in the plan's own patterns or values is wrong, from the records themselves.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::pattern::{compile, PatternError};
use crate::spec::Aggregate;

/// Values not numbers a refusal lists, at most.
const SHOWN_VALUES: usize = 5;

/// Characters of a record a refusal shows.
const SHOWN_CHARS: usize = 80;

/// Why records cannot be reduced; the message is for the model that wrote the plan.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecordError {
    /// A pattern of the reduction is not one rlm can use.
    #[error("`reduce.{field}`: {error}")]
    Pattern {
        /// `key` or `value`.
        field: &'static str,
        /// Why.
        #[source]
        error: PatternError,
    },
    /// There were no results to read records from.
    #[error("`{op}` has no records to read: the map gave no result (no piece was kept, or its pattern matched nothing); check the filter and the map against a few lines of the input")]
    NoRecords {
        /// The reduction.
        op: &'static str,
    },
    /// The key pattern matched no record.
    #[error("the key pattern {} of `group_by` matched none of the {records} records (the first: {}); write it as the records write their key, with the key in a group", quoted(.pattern), quoted(.first))]
    KeyMatchedNothing {
        /// The key pattern.
        pattern: String,
        /// How many records there were.
        records: usize,
        /// The first record, shortened.
        first: String,
    },
    /// The value pattern matched none of the records it was looked for in.
    #[error("the value pattern {} of `{op}` matched none of the {records} records{} (the first: {}); write it as the records write their number, with the number in a group", quoted(.pattern), if *.keyed { " that have a key" } else { "" }, quoted(.first))]
    ValueMatchedNothing {
        /// The reduction.
        op: &'static str,
        /// The value pattern.
        pattern: String,
        /// The records it was looked for in.
        records: usize,
        /// True when those were the records the key pattern matched.
        keyed: bool,
        /// The first of them, shortened.
        first: String,
    },
    /// No record holds a number (an `argmax` without a value pattern).
    #[error("`argmax` found no number in any of the {records} records (the first: {}); give a `value` pattern whose group is the number", quoted(.first))]
    NoNumber {
        /// How many records there were.
        records: usize,
        /// The first record, shortened.
        first: String,
    },
    /// The value pattern captured text that is not a number.
    #[error("`{op}` adds and compares numbers, but the value pattern {} captured {count} values that are not numbers: {}; put only the number in the pattern's group, e.g. {}", quoted(.pattern), listed(.values), quoted(r"(\d+(?:\.\d+)?)"))]
    NotNumbers {
        /// The reduction (`sum`, `min`, `max`, `argmax`).
        op: &'static str,
        /// The value pattern.
        pattern: String,
        /// How many values were not numbers.
        count: usize,
        /// The first of them, with the record (1-based) each came from.
        values: Vec<(usize, String)>,
    },
}

/// `text` as a JSON string, as the model writes it in a plan.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}"))
}

/// `"n/a" (record 4), "12 USD" (record 9)`.
fn listed(values: &[(usize, String)]) -> String {
    values
        .iter()
        .map(|(record, value)| format!("{} (record {record})", quoted(value)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `group_by`'s parts, as the plan gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupBy<'a> {
    /// The key pattern.
    pub key: &'a str,
    /// The value pattern.
    pub value: Option<&'a str>,
    /// The aggregation.
    pub agg: Aggregate,
    /// Groups kept, the largest first (all when `None`).
    pub k: Option<usize>,
}

/// The records of `results`: their lines, trimmed, blank ones left out.
fn records(results: &[String]) -> Vec<&str> {
    results
        .iter()
        .flat_map(|r| r.lines())
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect()
}

/// `text` cut to [`SHOWN_CHARS`] characters, for a refusal.
fn shown(text: &str) -> String {
    text.chars().take(SHOWN_CHARS).collect()
}

/// A reduction's pattern, compiled; `field` names it in the error.
fn pattern(field: &'static str, pattern: &str) -> Result<Regex, RecordError> {
    compile(pattern).map_err(|error| RecordError::Pattern { field, error })
}

/// What `regex` reads of `record`: its first group when it has groups (`None` when
/// that group took no part in the match), else the whole match; trimmed.
fn capture<'r>(regex: &Regex, record: &'r str) -> Option<&'r str> {
    let found = regex.captures(record)?;
    let part = if regex.captures_len() > 1 {
        found.get(1)?
    } else {
        found.get(0)?
    };
    Some(part.as_str().trim())
}

/// One group: its key as first written, how many records it holds, and the
/// aggregate of their values so far.
struct Group<'r> {
    key: &'r str,
    records: usize,
    value: f64,
    decimals: usize,
}

impl Group<'_> {
    /// What the group is ranked by: its count, or the aggregate of its values.
    fn figure(&self, agg: Aggregate) -> f64 {
        match agg {
            Aggregate::Count => self.records as f64,
            Aggregate::Sum | Aggregate::Min | Aggregate::Max => self.value,
        }
    }

    /// Adds a record and its number (`None` for a `count`, which needs none).
    fn add(&mut self, agg: Aggregate, number: Option<Number>) {
        self.records += 1;
        let Some(number) = number.filter(|_| agg != Aggregate::Count) else {
            return;
        };
        self.decimals = self.decimals.max(number.decimals);
        self.value = match agg {
            _ if self.records == 1 => number.value,
            Aggregate::Count | Aggregate::Sum => self.value + number.value,
            Aggregate::Min => self.value.min(number.value),
            Aggregate::Max => self.value.max(number.value),
        };
    }
}

/// Values that were not numbers: how many, and the first few with their record.
#[derive(Default)]
struct NotNumbers {
    count: usize,
    values: Vec<(usize, String)>,
}

impl NotNumbers {
    fn note(&mut self, record: usize, value: &str) {
        self.count += 1;
        if self.values.len() < SHOWN_VALUES {
            self.values.push((record + 1, shown(value)));
        }
    }

    /// The error when there were any.
    fn check(self, op: &'static str, pattern: &str) -> Result<(), RecordError> {
        if self.count == 0 {
            return Ok(());
        }
        Err(RecordError::NotNumbers {
            op,
            pattern: pattern.to_owned(),
            count: self.count,
            values: self.values,
        })
    }
}

/// Groups the records of `results` as `spec` says: one `key: aggregate` line a group,
/// the largest aggregate first, ties in the order first seen. A record without the key
/// (or, when there is a value pattern, without the value) is in no group.
pub fn group_by(spec: &GroupBy<'_>, results: &[String]) -> Result<String, RecordError> {
    let key = pattern("key", spec.key)?;
    let value = spec.value.map(|v| pattern("value", v)).transpose()?;
    let records = records(results);
    let Some(first) = records.first() else {
        return Err(RecordError::NoRecords { op: "group_by" });
    };
    let mut groups: Vec<Group<'_>> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut not_numbers = NotNumbers::default();
    let (mut keyed, mut first_keyed, mut valued) = (0, None, 0);
    for (i, record) in records.iter().enumerate() {
        let Some(name) = capture(&key, record).filter(|k| !k.is_empty()) else {
            continue;
        };
        keyed += 1;
        first_keyed.get_or_insert(*record);
        let number = match &value {
            None => None,
            Some(value) => {
                let Some(text) = capture(value, record) else {
                    continue;
                };
                valued += 1;
                match number_of(text) {
                    Some(number) => Some(number),
                    None if spec.agg == Aggregate::Count => None,
                    None => {
                        not_numbers.note(i, text);
                        continue;
                    }
                }
            }
        };
        let at = *index
            .entry(crate::reading::normalise(name))
            .or_insert_with(|| {
                groups.push(Group {
                    key: name,
                    records: 0,
                    value: 0.0,
                    decimals: 0,
                });
                groups.len() - 1
            });
        groups[at].add(spec.agg, number);
    }
    if keyed == 0 {
        return Err(RecordError::KeyMatchedNothing {
            pattern: spec.key.to_owned(),
            records: records.len(),
            first: shown(first),
        });
    }
    if let (Some(pattern), 0) = (spec.value, valued) {
        return Err(RecordError::ValueMatchedNothing {
            op: "group_by",
            pattern: pattern.to_owned(),
            records: keyed,
            keyed: true,
            first: shown(first_keyed.unwrap_or(first)),
        });
    }
    not_numbers.check(spec.agg.name(), spec.value.unwrap_or_default())?;
    // Stable: a tie keeps the order first seen.
    groups.sort_by(|a, b| b.figure(spec.agg).total_cmp(&a.figure(spec.agg)));
    let lines: Vec<String> = groups
        .iter()
        .take(spec.k.unwrap_or(usize::MAX))
        .map(|group| match spec.agg {
            Aggregate::Count => format!("{}: {}", group.key, group.records),
            _ => format!("{}: {}", group.key, decimal(group.value, group.decimals)),
        })
        .collect();
    Ok(lines.join("\n"))
}

/// `value` with `decimals` decimals (a whole number without a decimal point).
fn decimal(value: f64, decimals: usize) -> String {
    format!("{value:.decimals$}")
}

/// A value read from a record: the number, and the decimals it was written with (a
/// sum of `12.50` and `7.25` is shown `19.75`, not `19.750000000000004`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Number {
    value: f64,
    decimals: usize,
}

/// `text` as a number when that is all it is: a sign, a currency sign, digits with
/// optional thousands separators (`1,200`) and a decimal part; `None` for anything
/// else (`12 USD`, `n/a`).
fn number_of(text: &str) -> Option<Number> {
    static NUMBER: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r"^([+-]?)[$€£¥]?(\d{1,3}(?:,\d{3})+|\d*)(?:\.(\d+))?$").ok());
    let found = NUMBER.as_ref()?.captures(text.trim())?;
    let whole = found.get(2).map_or("", |m| m.as_str());
    let fraction = found.get(3).map_or("", |m| m.as_str());
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let digits = format!(
        "{}{}.{}",
        found.get(1).map_or("", |m| m.as_str()),
        if whole.is_empty() { "0" } else { whole }.replace(',', ""),
        if fraction.is_empty() { "0" } else { fraction },
    );
    Some(Number {
        value: digits.parse().ok()?,
        decimals: fraction.len(),
    })
}

/// The record of `results` with the largest number (`value`'s first group, or the
/// record's first number), as written; the first of a tie.
pub fn argmax(value: Option<&str>, results: &[String]) -> Result<String, RecordError> {
    let regex = value.map(|v| pattern("value", v)).transpose()?;
    let records = records(results);
    let Some(first) = records.first() else {
        return Err(RecordError::NoRecords { op: "argmax" });
    };
    let mut best: Option<(f64, &str)> = None;
    let mut not_numbers = NotNumbers::default();
    let mut valued = 0;
    for (i, record) in records.iter().enumerate() {
        let number = match &regex {
            None => crate::reading::first_number(record),
            Some(regex) => {
                let Some(text) = capture(regex, record) else {
                    continue;
                };
                let number = number_of(text).map(|n| n.value);
                if number.is_none() {
                    not_numbers.note(i, text);
                }
                number
            }
        };
        let Some(number) = number else {
            continue;
        };
        valued += 1;
        if best.is_none_or(|(most, _)| number > most) {
            best = Some((number, record));
        }
    }
    if let (Some(pattern), 0, 0) = (value, valued, not_numbers.count) {
        return Err(RecordError::ValueMatchedNothing {
            op: "argmax",
            pattern: pattern.to_owned(),
            records: records.len(),
            keyed: false,
            first: shown(first),
        });
    }
    not_numbers.check("argmax", value.unwrap_or_default())?;
    match best {
        Some((_, record)) => Ok(record.to_owned()),
        None => Err(RecordError::NoNumber {
            records: records.len(),
            first: shown(first),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        vec![text.to_owned()]
    }

    /// Orders of a shop as JSON lines.
    const ORDERS: &str = r#"{"customer": "Noor", "total": 12.50}
{"customer": "Ravi", "total": 40}
{"customer": "noor", "total": 7.25}
{"customer": "Kim", "total": 3}
{"customer": "Ravi", "total": 1,200}"#;

    const CUSTOMER: &str = r#""customer": "(\w+)""#;
    const TOTAL: &str = r#""total": ([\d.,]+)"#;

    /// An access log.
    const ACCESS: &str =
        "GET /index 200 512ms\nGET /cart 500 90ms\nPOST /cart 200 1,020ms\nGET /index 200 35ms\n";

    #[test]
    fn group_by_aggregates_each_key_the_largest_first() {
        let by_customer = |agg, k| GroupBy {
            key: CUSTOMER,
            value: Some(TOTAL),
            agg,
            k,
        };
        let cases: [(GroupBy<'_>, &str, &str); 8] = [
            // Keys are grouped with case and spacing ignored, shown as first written.
            (
                by_customer(Aggregate::Sum, None),
                ORDERS,
                "Ravi: 1240\nNoor: 19.75\nKim: 3",
            ),
            (
                by_customer(Aggregate::Count, None),
                ORDERS,
                "Noor: 2\nRavi: 2\nKim: 1",
            ),
            (
                by_customer(Aggregate::Min, None),
                ORDERS,
                "Ravi: 40\nNoor: 7.25\nKim: 3",
            ),
            (
                by_customer(Aggregate::Max, Some(2)),
                ORDERS,
                "Ravi: 1200\nNoor: 12.50",
            ),
            // A key with no group is the whole match; count needs no value.
            (
                GroupBy {
                    key: r"^(?:GET|POST) /\w+",
                    value: None,
                    agg: Aggregate::Count,
                    k: None,
                },
                ACCESS,
                "GET /index: 2\nGET /cart: 1\nPOST /cart: 1",
            ),
            // A count with a value counts only the records it matches.
            (
                GroupBy {
                    key: r"^\w+ (/\w+)",
                    value: Some(r" (5\d\d) "),
                    agg: Aggregate::Count,
                    k: None,
                },
                ACCESS,
                "/cart: 1",
            ),
            // Records without the key or the value are left out of the groups.
            (
                GroupBy {
                    key: r"^\w+ (/\w+)",
                    value: Some(r"([\d,]+)ms"),
                    agg: Aggregate::Sum,
                    k: Some(1),
                },
                "# a comment\nGET /index 200 512ms\nGET /cart 500\nPOST /cart 200 1,020ms\n",
                "/cart: 1020",
            ),
            // Prose, one record a line: who wrote the most words about what.
            (
                GroupBy {
                    key: r"^(\w+) wrote",
                    value: Some(r"(\d+) words"),
                    agg: Aggregate::Sum,
                    k: None,
                },
                "Ada wrote 120 words on gears.\nBo wrote 300 words on ink.\nAda wrote 200 words on steam.",
                "Ada: 320\nBo: 300",
            ),
        ];
        for (spec, text, want) in cases {
            assert_eq!(
                group_by(&spec, &lines(text)).as_deref(),
                Ok(want),
                "{spec:?}"
            );
        }
    }

    #[test]
    fn group_by_reads_the_records_of_every_result() {
        // An extract gives one result per record; an ask's answer may list several.
        let results = vec![
            "Ravi,40".to_owned(),
            "Noor,12\nRavi,5".to_owned(),
            String::new(),
        ];
        let spec = GroupBy {
            key: r"^(\w+),",
            value: Some(r",(\d+)$"),
            agg: Aggregate::Sum,
            k: None,
        };
        assert_eq!(
            group_by(&spec, &results).as_deref(),
            Ok("Ravi: 45\nNoor: 12")
        );
    }

    #[test]
    fn group_by_errors_name_what_in_the_plan_is_wrong() {
        let sum = |key, value| GroupBy {
            key,
            value: Some(value),
            agg: Aggregate::Sum,
            k: None,
        };
        let cases: [(GroupBy<'_>, Vec<String>, RecordError); 5] = [
            (
                sum(CUSTOMER, TOTAL),
                vec![],
                RecordError::NoRecords { op: "group_by" },
            ),
            (
                sum(r"client=(\w+)", TOTAL),
                lines(ORDERS),
                RecordError::KeyMatchedNothing {
                    pattern: r"client=(\w+)".into(),
                    records: 5,
                    first: r#"{"customer": "Noor", "total": 12.50}"#.into(),
                },
            ),
            (
                sum(CUSTOMER, r"amount=(\d+)"),
                lines(ORDERS),
                RecordError::ValueMatchedNothing {
                    op: "group_by",
                    pattern: r"amount=(\d+)".into(),
                    records: 5,
                    keyed: true,
                    first: r#"{"customer": "Noor", "total": 12.50}"#.into(),
                },
            ),
            // The value's group captured words: which ones, and from which record.
            (
                sum(r"^(\w+);", r";(.*)$"),
                lines("a;3\nb;n/a\nc;12 USD\na;4"),
                RecordError::NotNumbers {
                    op: "sum",
                    pattern: ";(.*)$".into(),
                    count: 2,
                    values: vec![(2, "n/a".into()), (3, "12 USD".into())],
                },
            ),
            (
                sum("(", TOTAL),
                lines(ORDERS),
                RecordError::Pattern {
                    field: "key",
                    error: compile("(").unwrap_err(),
                },
            ),
        ];
        for (spec, results, want) in cases {
            assert_eq!(group_by(&spec, &results), Err(want), "{spec:?}");
        }
    }

    #[test]
    fn not_numbers_are_listed_at_most_five_and_counted_all() {
        let text: String = (0..9).map(|i| format!("k;v{i}\n")).collect();
        let spec = GroupBy {
            key: "^(k);",
            value: Some(";(.*)$"),
            agg: Aggregate::Max,
            k: None,
        };
        let error = group_by(&spec, &lines(&text)).unwrap_err();
        let RecordError::NotNumbers { count, values, .. } = &error else {
            panic!("{error:?}");
        };
        assert_eq!((*count, values.len()), (9, SHOWN_VALUES));
        assert_eq!(
            error.to_string(),
            r#"`max` adds and compares numbers, but the value pattern ";(.*)$" captured 9 values that are not numbers: "v0" (record 1), "v1" (record 2), "v2" (record 3), "v3" (record 4), "v4" (record 5); put only the number in the pattern's group, e.g. "(\\d+(?:\\.\\d+)?)""#
        );
    }

    #[test]
    fn argmax_is_the_record_with_the_largest_number() {
        let cases: [(Option<&str>, &str, Result<&str, RecordError>); 5] = [
            (Some(r"(\d[\d,]*)ms"), ACCESS, Ok("POST /cart 200 1,020ms")),
            // Without a pattern: each record's first number; ties go to the first.
            (None, "b 7\na 9\nc 9\nd none", Ok("a 9")),
            (
                None,
                "no numbers\nhere",
                Err(RecordError::NoNumber {
                    records: 2,
                    first: "no numbers".into(),
                }),
            ),
            (
                Some(r"bytes=(\d+)"),
                ACCESS,
                Err(RecordError::ValueMatchedNothing {
                    op: "argmax",
                    pattern: r"bytes=(\d+)".into(),
                    records: 4,
                    keyed: false,
                    first: "GET /index 200 512ms".into(),
                }),
            ),
            (
                Some(r"^\w+ (\S+)"),
                "GET /a 1\nGET /b 2",
                Err(RecordError::NotNumbers {
                    op: "argmax",
                    pattern: r"^\w+ (\S+)".into(),
                    count: 2,
                    values: vec![(1, "/a".into()), (2, "/b".into())],
                }),
            ),
        ];
        for (value, text, want) in cases {
            assert_eq!(
                argmax(value, &lines(text)),
                want.map(str::to_owned),
                "{value:?}"
            );
        }
        assert_eq!(
            argmax(None, &[]),
            Err(RecordError::NoRecords { op: "argmax" })
        );
    }

    #[test]
    fn values_are_numbers_as_records_write_them() {
        for (text, want) in [
            ("12", Some(12.0)),
            ("-3.5", Some(-3.5)),
            ("+4", Some(4.0)),
            ("1,200", Some(1200.0)),
            ("1,234,567.89", Some(1_234_567.89)),
            ("$12.50", Some(12.5)),
            ("-€3", Some(-3.0)),
            (" 7 ", Some(7.0)),
            (".5", Some(0.5)),
            ("12 USD", None),
            ("n/a", None),
            ("1,2", None),
            ("12,3456", None),
            ("", None),
            ("1.2.3", None),
            ("--1", None),
        ] {
            assert_eq!(number_of(text).map(|n| n.value), want, "{text:?}");
        }
        assert_eq!(number_of("12.50").map(|n| n.decimals), Some(2));
    }

    proptest::proptest! {
        #[test]
        fn a_number_written_with_separators_reads_back(
            whole in 0u64..10_000_000_000,
            cents in proptest::option::of(0u32..100),
            negative in proptest::bool::ANY,
        ) {
            // 1234567 → "1,234,567"
            let digits = whole.to_string();
            let mut grouped = String::new();
            for (i, c) in digits.chars().enumerate() {
                if i > 0 && (digits.len() - i) % 3 == 0 {
                    grouped.push(',');
                }
                grouped.push(c);
            }
            let sign = if negative { "-" } else { "" };
            let text = match cents {
                Some(c) => format!("{sign}{grouped}.{c:02}"),
                None => format!("{sign}{grouped}"),
            };
            let want = (whole as f64 + f64::from(cents.unwrap_or(0)) / 100.0)
                * if negative { -1.0 } else { 1.0 };
            let read = number_of(&text).expect("a number");
            proptest::prop_assert!((read.value - want).abs() < 1e-6, "{text}");
            proptest::prop_assert_eq!(read.decimals, if cents.is_some() { 2 } else { 0 });
            // The same digits without separators read the same.
            let plain = number_of(&text.replace(',', "")).expect("a number");
            proptest::prop_assert_eq!(plain.value, read.value);
        }

        #[test]
        fn reading_a_value_never_panics(text in "\\PC{0,40}") {
            let _ = number_of(&text);
        }

        #[test]
        fn each_group_s_sum_is_the_sum_of_its_records(
            rows in proptest::collection::vec((0usize..6, 0u32..1000), 1..200),
        ) {
            let text: String = rows.iter().map(|(k, n)| format!("k{k};{n}\n")).collect();
            let spec = GroupBy { key: "^(k\\d);", value: Some(";(\\d+)$"), agg: Aggregate::Sum, k: None };
            let grouped = group_by(&spec, &lines(&text)).expect("grouped");
            let mut listed = 0;
            for line in grouped.lines() {
                let (key, sum) = line.split_once(": ").expect("key: sum");
                let want: u32 = rows
                    .iter()
                    .filter(|(k, _)| format!("k{k}") == key)
                    .map(|(_, n)| n)
                    .sum();
                proptest::prop_assert_eq!(sum, want.to_string());
                listed += 1;
            }
            let keys: std::collections::HashSet<usize> = rows.iter().map(|(k, _)| *k).collect();
            proptest::prop_assert_eq!(listed, keys.len());
        }
    }

    #[test]
    fn errors_read_as_the_plan_is_written() {
        let key = RecordError::KeyMatchedNothing {
            pattern: r"client=(\w+)".into(),
            records: 5,
            first: "a=\"b\"".into(),
        };
        assert_eq!(
            key.to_string(),
            r#"the key pattern "client=(\\w+)" of `group_by` matched none of the 5 records (the first: "a=\"b\""); write it as the records write their key, with the key in a group"#
        );
    }
}

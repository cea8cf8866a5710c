//! What a plan says, as the model writes it (JSON) and as the python, js and tools
//! helpers build it: what to read, how to cut it into pieces, which pieces to keep,
//! what to ask of each, and how to reduce the answers to one.
//!
//! ```json
//! {"input": "context",
//!  "split": {"by": "chars", "size": 8000},
//!  "filter": {"regex": "ERROR"},
//!  "map": {"ask": "How many failed payments does this piece list? Answer with a number."},
//!  "reduce": {"op": "sum"}}
//! ```

use serde::{Deserialize, Serialize};

use crate::error::PlanError;

/// A plan: split the input, keep some pieces, map each, reduce the answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// The variable the plan reads (`context` unless said).
    #[serde(default = "context")]
    pub input: String,
    /// How the input is cut into pieces ([`Split::default`], lines, when absent: small
    /// models often leave it out and write only the map and the reduction).
    #[serde(default)]
    pub split: Split,
    /// Which pieces are kept (all when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Filter>,
    /// What each kept piece becomes.
    pub map: Map,
    /// How the pieces' results become one.
    pub reduce: Reduce,
}

fn context() -> String {
    "context".to_owned()
}

/// How to cut the input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Split {
    /// The unit.
    pub by: SplitBy,
    /// Pieces of at most this many units (characters, lines, tokens); for `regex`, the
    /// records that start at each match are grouped up to this many characters (one
    /// record a piece when absent). Absent for `chars` and `tokens`: as large as the
    /// sub-model's window allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Units each piece repeats from the end of the one before (`chars`, `lines`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub overlap: u64,
    /// For `regex`: a record starts at each line this matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
}

impl Default for Split {
    /// Whole lines, as many a piece as the sub-model's window allows: a `count` or
    /// `extract` map reads them all the same, and an `ask` map gets the largest pieces
    /// that fit.
    fn default() -> Self {
        Self {
            by: SplitBy::Lines,
            size: None,
            overlap: 0,
            pattern: None,
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The unit a split counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitBy {
    /// Characters; a piece ends at a line end when one is near.
    Chars,
    /// Whole lines.
    Lines,
    /// Tokens, as the sub-model's estimate counts them.
    Tokens,
    /// Records that start at lines matching `pattern`.
    Regex,
    /// The items of a JSON list, `size` items a piece (one when absent).
    Records,
}

/// Which pieces are kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Filter {
    /// Pieces with a match (case-insensitive); no model call.
    Regex(String),
    /// Pieces the sub-model answers yes about (one call a piece).
    Ask(String),
    /// Pieces with a record whose numeric fields meet a condition such as
    /// `bytes > 1000` ([`crate::condition`]); no model call.
    Where(String),
}

/// What each kept piece becomes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "snake_case",
    deny_unknown_fields,
    try_from = "serde_json::Value"
)]
pub enum Map {
    /// The sub-model's answer to this instruction about the piece.
    Ask(String),
    /// How many times the pattern matches in the piece (case-insensitive); no call.
    Count(String),
    /// The pattern's matches in the piece, one per line (the first group when it has
    /// one); no call.
    Extract(String),
    /// A nested run (`sub_rlm`) on the piece with this query.
    SubRlm(String),
    /// The external agent on the piece with this task.
    Agent(String),
    /// A plan over the piece (its `input` is the piece).
    Plan(Box<Plan>),
    /// `{"ask": …, "schema": …}`: the sub-model's answer held to a JSON Schema; the
    /// piece's result is the JSON of the value (a reply that does not match fails the
    /// piece, naming the mismatch).
    #[serde(untagged)]
    AskShaped {
        /// The instruction.
        ask: String,
        /// The JSON Schema of the answer.
        schema: serde_json::Value,
    },
}

/// [`Map`] as written without a schema: the form its derived reading takes.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum PlainMap {
    Ask(String),
    Count(String),
    Extract(String),
    SubRlm(String),
    Agent(String),
    Plan(Box<Plan>),
}

/// Why a `map` does not read, as serde reports it within the plan's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MapError(String);

impl TryFrom<serde_json::Value> for Map {
    type Error = MapError;

    /// `{"ask": …, "schema": …}` as [`Map::AskShaped`], anything else as the plain
    /// forms read it (with their messages).
    fn try_from(value: serde_json::Value) -> Result<Self, MapError> {
        if let Some(object) = value.as_object() {
            if Map::is_shaped_ask(object) {
                let ask = match &object["ask"] {
                    serde_json::Value::String(ask) => ask.clone(),
                    other => {
                        return Err(MapError(format!("`map.ask` must be a string, not {other}")))
                    }
                };
                return Ok(Self::AskShaped {
                    ask,
                    schema: object["schema"].clone(),
                });
            }
        }
        let plain: PlainMap = serde_json::from_value(value).map_err(|e| MapError(e.to_string()))?;
        Ok(match plain {
            PlainMap::Ask(text) => Self::Ask(text),
            PlainMap::Count(text) => Self::Count(text),
            PlainMap::Extract(text) => Self::Extract(text),
            PlainMap::SubRlm(text) => Self::SubRlm(text),
            PlainMap::Agent(text) => Self::Agent(text),
            PlainMap::Plan(plan) => Self::Plan(plan),
        })
    }
}

impl Map {
    /// True for the object `{"ask": …, "schema": …}`: the one map form of two keys, read
    /// as [`Map::AskShaped`]. Checks that count a map's keys use it to let this form pass.
    pub fn is_shaped_ask(object: &serde_json::Map<String, serde_json::Value>) -> bool {
        object.len() == 2 && object.contains_key("ask") && object.contains_key("schema")
    }

    /// True when mapping a piece asks a model or an agent.
    pub fn calls_a_model(&self) -> bool {
        !matches!(self, Self::Count(_) | Self::Extract(_))
    }
}

/// How the pieces' results become one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Reduce {
    /// The numbers of the results added up.
    Sum,
    /// How many results say yes (or are non-empty and not "no"/"none"/"0").
    Count,
    /// The smallest number.
    Min,
    /// The largest number.
    Max,
    /// The results in order, joined by `separator` (a blank line unless said).
    Concat {
        /// Between two results.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        separator: Option<String>,
    },
    /// The most frequent result (case and spacing ignored); ties go to the first.
    Vote,
    /// Every distinct item of the results (items: lines, or comma-separated), in the
    /// order first seen.
    Union,
    /// The `k` most frequent items with their counts.
    TopK {
        /// How many.
        k: usize,
    },
    /// How many pairs of results are equal: n(n−1)/2 for each distinct item seen n
    /// times, summed — the pairs of records that share a value (a self-join's count),
    /// with an `extract` map giving one item per record.
    Pairs,
    /// The distinct items, joined by `separator` (", " unless said).
    Join {
        /// Between two items.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        separator: Option<String>,
    },
    /// How many distinct items the results hold (items as `union` reads them, case and
    /// spacing ignored).
    CountDistinct,
    /// The record with the largest number, as written (the first of a tie): a record is
    /// a line of the results, its number the `value` pattern's first group, or the
    /// record's first number when there is no pattern ([`crate::group`]).
    Argmax {
        /// Where the number is in a record.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
    },
    /// The records (lines of the results) grouped by the `key` pattern's first group,
    /// each group's `value`s aggregated: one `key: aggregate` line a group, the largest
    /// first ([`crate::group`]).
    GroupBy {
        /// What a record's group is: its first group, or the whole match.
        key: String,
        /// Where a record's number is (needed by `sum`, `min` and `max`; with `count`,
        /// only the records it matches are counted).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        /// How a group's records become one number.
        agg: Aggregate,
        /// Only the `k` first groups (all when absent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        k: Option<usize>,
    },
    /// The sub-model combines the results with this instruction, as many per call as
    /// fit its window, in rounds until one is left.
    Ask {
        /// What to do with the results.
        instruction: String,
    },
}

/// How `group_by` makes one number of a group's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregate {
    /// How many records the group holds.
    Count,
    /// Their values added up.
    Sum,
    /// The smallest value.
    Min,
    /// The largest value.
    Max,
}

impl Aggregate {
    /// Its name in a plan.
    pub fn name(self) -> &'static str {
        match self {
            Self::Count => "count",
            Self::Sum => "sum",
            Self::Min => "min",
            Self::Max => "max",
        }
    }
}

impl Plan {
    /// Parses a plan from JSON, with errors that say where.
    pub fn from_json(text: &str) -> Result<Self, PlanError> {
        let plan: Self = serde_json::from_str(text).map_err(|e| PlanError::Json(e.to_string()))?;
        plan.check_shape(0)?;
        Ok(plan)
    }

    /// Checks what JSON cannot: sizes, patterns, combinations, nesting (at most
    /// [`crate::MAX_NESTING`] nested plans below `depth`). Says what is wrong and how
    /// to write it.
    pub fn check_shape(&self, depth: u32) -> Result<(), PlanError> {
        if self.input.trim().is_empty() {
            return Err(PlanError::Shape(
                "`input` is empty: name a variable, e.g. \"context\"".into(),
            ));
        }
        self.split.check()?;
        if let Some(filter) = &self.filter {
            filter.check()?;
        }
        self.map.check_before(depth, Some(&self.reduce))?;
        self.reduce.check()
    }
}

impl Split {
    /// Checks the size, overlap and pattern go together.
    pub fn check(&self) -> Result<(), PlanError> {
        if self.size == Some(0) {
            return Err(PlanError::Shape(
                "`split.size` is 0: give a positive size or leave it out".into(),
            ));
        }
        if let Some(size) = self.size {
            if self.overlap >= size {
                return Err(PlanError::Shape(format!(
                    "`split.overlap` ({}) must be smaller than `split.size` ({size})",
                    self.overlap
                )));
            }
        }
        match (self.by, &self.pattern) {
            (SplitBy::Regex, None) => {
                return Err(PlanError::Shape(
                    "`split.by` is \"regex\" but there is no `split.pattern` (the start of a record, e.g. \"^\\\\d{4}-\\\\d{2}-\\\\d{2}\")".into(),
                ))
            }
            (SplitBy::Regex, Some(pattern)) => crate::pattern::compile(pattern)
                .map(|_| ())
                .map_err(|e| PlanError::Shape(format!("`split.pattern`: {e}")))?,
            (_, Some(_)) => {
                return Err(PlanError::Shape(
                    "`split.pattern` only goes with `\"by\": \"regex\"`".into(),
                ))
            }
            (_, None) => {}
        }
        if self.overlap > 0 && !matches!(self.by, SplitBy::Chars | SplitBy::Lines) {
            return Err(PlanError::Shape(
                "`split.overlap` works with `chars` and `lines` only".into(),
            ));
        }
        Ok(())
    }
}

impl Filter {
    /// Checks the pattern compiles and the question is not empty.
    pub fn check(&self) -> Result<(), PlanError> {
        match self {
            Self::Regex(p) => crate::pattern::compile(p)
                .map(|_| ())
                .map_err(|e| PlanError::Shape(format!("`filter.regex`: {e}"))),
            Self::Ask(q) if q.trim().is_empty() => {
                Err(PlanError::Shape("`filter.ask` is empty".into()))
            }
            Self::Ask(_) => Ok(()),
            Self::Where(condition) => crate::condition::Condition::parse(condition)
                .map(|_| ())
                .map_err(|e| PlanError::Shape(format!("`filter.where`: {e}"))),
        }
    }
}

impl Map {
    /// Checks the pattern or instruction, and a nested plan (at most
    /// [`crate::MAX_NESTING`] deep below `depth`).
    pub fn check(&self, depth: u32) -> Result<(), PlanError> {
        self.check_before(depth, None)
    }

    /// [`Map::check`] for a map whose results `reduce` will reduce: a refusal's advice
    /// leads with what that reduction needs.
    pub fn check_before(&self, depth: u32, reduce: Option<&Reduce>) -> Result<(), PlanError> {
        match self {
            Self::Count(p) => crate::pattern::compile(p)
                .map(|_| ())
                .map_err(|e| PlanError::Shape(format!("`map`: {e}"))),
            Self::Extract(p) => {
                let regex = crate::pattern::compile(p)
                    .map_err(|e| PlanError::Shape(format!("`map`: {e}")))?;
                if regex.captures_len() == 1 && regex::escape(p) == *p {
                    return Err(PlanError::Shape(literal_extract(p, reduce)));
                }
                Ok(())
            }
            Self::Ask(text)
            | Self::SubRlm(text)
            | Self::Agent(text)
            | Self::AskShaped { ask: text, .. }
                if text.trim().is_empty() =>
            {
                Err(PlanError::Shape("the `map` instruction is empty".into()))
            }
            Self::AskShaped { schema, .. } if !schema.is_object() => Err(PlanError::Shape(
                "`map.schema` must be a JSON Schema object, such as {\"type\": \"integer\"}".into(),
            )),
            Self::Plan(inner) => {
                if depth >= crate::MAX_NESTING {
                    return Err(PlanError::Shape(format!(
                        "plans nest at most {} deep",
                        crate::MAX_NESTING
                    )));
                }
                inner.check_shape(depth + 1)
            }
            _ => Ok(()),
        }
    }
}

/// Why an `extract` of plain text with no group is refused: every match would be the
/// text itself (an extract of `user` ranked by `top_k` answers "user (593)"). Two ways
/// out are named, the one `reduce` needs first: a model given a list tends to take its
/// first item, so the way that suits the plan's own reduction leads.
fn literal_extract(pattern: &str, reduce: Option<&Reduce>) -> String {
    let key = pattern.trim_end_matches('=');
    let json = |text: &str| serde_json::to_string(text).unwrap_or_default();
    let group = format!(
        "to list what follows it, put that part in a group, e.g. {{\"extract\": {}}}",
        json(&format!("{key}=(\\w+)"))
    );
    let count = format!("to count it use {{\"count\": {}}}", json(pattern));
    let ranks_values = matches!(
        reduce,
        Some(
            Reduce::TopK { .. }
                | Reduce::Union
                | Reduce::CountDistinct
                | Reduce::Pairs
                | Reduce::Vote
                | Reduce::Join { .. }
                | Reduce::Concat { .. }
        )
    );
    let (first, second) = if ranks_values {
        (group, count)
    } else {
        (count, group)
    };
    format!(
        "`map.extract` {} has no group and matches only its own text, so every result would be that text: {first}; {second}",
        json(pattern)
    )
}

impl Reduce {
    /// Checks `k`, the instruction, and the patterns of the record reductions.
    pub fn check(&self) -> Result<(), PlanError> {
        match self {
            Self::TopK { k: 0 } => Err(PlanError::Shape("`reduce.k` must be at least 1".into())),
            Self::Ask { instruction } if instruction.trim().is_empty() => {
                Err(PlanError::Shape("`reduce.instruction` is empty".into()))
            }
            Self::Argmax { value } => check_pattern("reduce.value", value.as_deref()),
            Self::GroupBy { key, value, agg, k } => {
                if *k == Some(0) {
                    return Err(PlanError::Shape(
                        "`reduce.k` must be at least 1, or left out for every group".into(),
                    ));
                }
                check_pattern("reduce.key", Some(key))?;
                check_pattern("reduce.value", value.as_deref())?;
                if value.is_none() && *agg != Aggregate::Count {
                    return Err(PlanError::Shape(format!(
                        "`group_by` with \"agg\": \"{}\" needs a `value` pattern that reads each record's number in its first group, e.g. \"value\": \"(\\\\d+(?:\\\\.\\\\d+)?)\\\\s*ms\"; \"agg\": \"count\" needs none",
                        agg.name()
                    )));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// Checks a reduction's pattern compiles (`None`: there is none); `field` names it.
fn check_pattern(field: &str, pattern: Option<&str>) -> Result<(), PlanError> {
    match pattern {
        Some(p) if p.trim().is_empty() => Err(PlanError::Shape(format!("`{field}` is empty"))),
        Some(p) => crate::pattern::compile(p)
            .map(|_| ())
            .map_err(|e| PlanError::Shape(format!("`{field}`: {e}"))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_without_a_split_cuts_its_input_in_lines() {
        let plan: Plan =
            serde_json::from_str(r#"{"map": {"count": "error"}, "reduce": {"op": "sum"}}"#)
                .unwrap();
        assert_eq!(plan.input, "context");
        assert_eq!(plan.split, Split::default());
        assert_eq!(plan.split.by, SplitBy::Lines);
        assert_eq!(plan.split.size, None);
        plan.check_shape(0).unwrap();
    }

    #[test]
    fn the_documented_plan_parses() {
        let plan = Plan::from_json(
            r#"{"split": {"by": "chars", "size": 8000},
                "filter": {"regex": "ERROR"},
                "map": {"ask": "How many failed payments? Answer with a number."},
                "reduce": {"op": "sum"}}"#,
        )
        .unwrap();
        assert_eq!(plan.input, "context");
        assert_eq!(plan.split.size, Some(8000));
        assert_eq!(plan.filter, Some(Filter::Regex("ERROR".into())));
        assert_eq!(plan.reduce, Reduce::Sum);
        let again: Plan = serde_json::from_str(&serde_json::to_string(&plan).unwrap()).unwrap();
        assert_eq!(again, plan);
    }

    #[test]
    fn an_extract_of_plain_text_with_no_group_is_refused_with_the_group_to_write() {
        let error = Map::Extract("user".into())
            .check(0)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("`map.extract` \"user\" has no group")
                && error.contains("{\"count\": \"user\"}")
                && error.contains("{\"extract\": \"user=(\\\\w+)\"}"),
            "{error}"
        );
        assert!(Map::Extract("bytes=".into())
            .check(0)
            .unwrap_err()
            .to_string()
            .contains("\"bytes=(\\\\w+)\""));
        // A group, or a pattern that matches varying text, lists what varies.
        for pattern in ["user=(\\w+)", "id=\\d+", "ERROR.*"] {
            Map::Extract(pattern.into()).check(0).unwrap();
        }
    }

    #[test]
    fn the_literal_extract_refusal_leads_with_what_the_reduction_needs() {
        let refusal = |reduce: Reduce| {
            Map::Extract("user".into())
                .check_before(0, Some(&reduce))
                .unwrap_err()
                .to_string()
        };
        let group = "put that part in a group";
        let count = "to count it use";
        for reduce in [
            Reduce::TopK { k: 1 },
            Reduce::Union,
            Reduce::Pairs,
            Reduce::Vote,
        ] {
            let error = refusal(reduce.clone());
            let (g, c) = (error.find(group).unwrap(), error.find(count).unwrap());
            assert!(g < c, "{reduce:?}: {error}");
        }
        for reduce in [Reduce::Sum, Reduce::Count] {
            let error = refusal(reduce.clone());
            let (g, c) = (error.find(group).unwrap(), error.find(count).unwrap());
            assert!(c < g, "{reduce:?}: {error}");
        }
        // A whole plan checks its map with its own reduction.
        let plan = Plan::from_json(
            r#"{"split": {"by": "lines"}, "map": {"extract": "user"}, "reduce": {"op": "top_k", "k": 1}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(plan.find(group) < plan.find(count), "{plan}");
    }

    #[test]
    fn a_where_filter_is_checked_as_a_condition() {
        let plan = Plan::from_json(
            r#"{"split": {"by": "lines"}, "filter": {"where": "bytes > 2000"}, "map": {"extract": "host=(\\w+)"}, "reduce": {"op": "pairs"}}"#,
        )
        .unwrap();
        assert_eq!(plan.filter, Some(Filter::Where("bytes > 2000".into())));
        let error = Plan::from_json(
            r#"{"split": {"by": "lines"}, "filter": {"where": "bytes after 2000"}, "map": {"count": "x"}, "reduce": {"op": "sum"}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("`filter.where`") && error.contains("no comparison"),
            "{error}"
        );
    }

    #[test]
    fn every_reduction_and_map_has_its_json_form() {
        for (json, reduce) in [
            (r#"{"op": "top_k", "k": 3}"#, Reduce::TopK { k: 3 }),
            (r#"{"op": "pairs"}"#, Reduce::Pairs),
            (r#"{"op": "concat"}"#, Reduce::Concat { separator: None }),
            (
                r#"{"op": "ask", "instruction": "merge"}"#,
                Reduce::Ask {
                    instruction: "merge".into(),
                },
            ),
        ] {
            assert_eq!(serde_json::from_str::<Reduce>(json).unwrap(), reduce);
        }
        let nested: Map = serde_json::from_str(
            r#"{"plan": {"split": {"by": "lines", "size": 10}, "map": {"count": "x"}, "reduce": {"op": "sum"}}}"#,
        )
        .unwrap();
        assert!(matches!(nested, Map::Plan(_)));
        let shaped: Map =
            serde_json::from_str(r#"{"ask": "How many?", "schema": {"type": "integer"}}"#).unwrap();
        assert_eq!(
            shaped,
            Map::AskShaped {
                ask: "How many?".into(),
                schema: serde_json::json!({"type": "integer"}),
            }
        );
        assert!(shaped.calls_a_model());
        assert_eq!(
            serde_json::to_value(&shaped).unwrap(),
            serde_json::json!({"ask": "How many?", "schema": {"type": "integer"}})
        );
        assert_eq!(
            serde_json::to_value(Map::Ask("q".into())).unwrap(),
            serde_json::json!({"ask": "q"})
        );
        assert!(!Map::Count("x".into()).calls_a_model());
        assert!(Map::SubRlm("q".into()).calls_a_model());
    }

    #[test]
    fn bad_plans_say_what_to_fix() {
        let cases = [
            (
                r#"{"split": {"by": "regex"}, "map": {"ask": "q"}, "reduce": {"op": "sum"}}"#,
                "split.pattern",
            ),
            (
                r#"{"split": {"by": "chars", "size": 10, "overlap": 10}, "map": {"ask": "q"}, "reduce": {"op": "sum"}}"#,
                "overlap",
            ),
            (
                r#"{"split": {"by": "chars"}, "map": {"count": "("}, "reduce": {"op": "sum"}}"#,
                "`map`",
            ),
            (
                r#"{"split": {"by": "chars"}, "map": {"ask": " "}, "reduce": {"op": "sum"}}"#,
                "empty",
            ),
            (
                r#"{"split": {"by": "chars"}, "map": {"ask": "q"}, "reduce": {"op": "top_k", "k": 0}}"#,
                "reduce.k",
            ),
            (
                r#"{"split": {"by": "chars"}, "map": {"ask": "q"}, "reduce": {"op": "median"}}"#,
                "unknown variant",
            ),
            (
                r#"{"split": {"by": "chars"}, "map": {"ask": "q"}, "reduce": {"op": "sum"}, "extra": 1}"#,
                "unknown field",
            ),
            (
                r#"{"split": {"by": "chars"}, "map": {"ask": "q", "schema": "int"}, "reduce": {"op": "sum"}}"#,
                "`map.schema` must be a JSON Schema object",
            ),
            (
                r#"{"split": {"by": "chars"}, "map": {"ask": 3, "schema": {}}, "reduce": {"op": "sum"}}"#,
                "`map.ask` must be a string",
            ),
            (
                r#"{"split": {"by": "chars"}, "map": {"ask": "q", "count": "x"}, "reduce": {"op": "sum"}}"#,
                "map",
            ),
        ];
        for (json, says) in cases {
            let error = Plan::from_json(json).unwrap_err().to_string();
            assert!(error.contains(says), "{json}: {error}");
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let mut json = r#"{"split": {"by": "lines", "size": 2}, "map": {"count": "x"}, "reduce": {"op": "sum"}}"#.to_owned();
        for _ in 0..=crate::MAX_NESTING {
            json = format!(
                r#"{{"split": {{"by": "lines", "size": 2}}, "map": {{"plan": {json}}}, "reduce": {{"op": "sum"}}}}"#
            );
        }
        let error = Plan::from_json(&json).unwrap_err().to_string();
        assert!(error.contains("nest at most"), "{error}");
    }

    #[test]
    fn the_record_reductions_have_their_json_forms() {
        for (json, reduce) in [
            (r#"{"op": "count_distinct"}"#, Reduce::CountDistinct),
            (r#"{"op": "argmax"}"#, Reduce::Argmax { value: None }),
            (
                r#"{"op": "argmax", "value": "(\\d+) ms"}"#,
                Reduce::Argmax {
                    value: Some(r"(\d+) ms".into()),
                },
            ),
            (
                r#"{"op": "group_by", "key": "host=(\\S+)", "agg": "count"}"#,
                Reduce::GroupBy {
                    key: r"host=(\S+)".into(),
                    value: None,
                    agg: Aggregate::Count,
                    k: None,
                },
            ),
            (
                r#"{"op": "group_by", "key": "^(\\w+),", "value": ",(\\d+)$", "agg": "sum", "k": 3}"#,
                Reduce::GroupBy {
                    key: r"^(\w+),".into(),
                    value: Some(r",(\d+)$".into()),
                    agg: Aggregate::Sum,
                    k: Some(3),
                },
            ),
        ] {
            let parsed: Reduce = serde_json::from_str(json).unwrap();
            assert_eq!(parsed, reduce, "{json}");
            parsed.check().unwrap();
            let again: Reduce =
                serde_json::from_str(&serde_json::to_string(&parsed).unwrap()).unwrap();
            assert_eq!(again, reduce);
        }
    }

    #[test]
    fn bad_record_reductions_say_what_to_fix() {
        let plan =
            |reduce: &str| format!(r#"{{"map": {{"extract": "^.*$"}}, "reduce": {reduce}}}"#);
        for (reduce, says) in [
            (
                r#"{"op": "group_by", "key": "(\\w+)", "agg": "sum"}"#,
                r#"`group_by` with "agg": "sum" needs a `value` pattern"#,
            ),
            (
                r#"{"op": "group_by", "key": "(\\w+)", "agg": "max"}"#,
                r#""agg": "count" needs none"#,
            ),
            (
                r#"{"op": "group_by", "key": "(", "agg": "count"}"#,
                "`reduce.key`: `(` is not a regular expression",
            ),
            (
                r#"{"op": "group_by", "key": " ", "agg": "count"}"#,
                "`reduce.key` is empty",
            ),
            (
                r#"{"op": "group_by", "key": "(\\w+)", "value": "[", "agg": "min"}"#,
                "`reduce.value`: `[` is not a regular expression",
            ),
            (
                r#"{"op": "group_by", "key": "(\\w+)", "agg": "count", "k": 0}"#,
                "`reduce.k` must be at least 1, or left out",
            ),
            (
                r#"{"op": "group_by", "key": "(\\w+)", "agg": "mean"}"#,
                "unknown variant `mean`, expected one of `count`, `sum`, `min`, `max`",
            ),
            (
                r#"{"op": "group_by", "value": "(\\d+)", "agg": "sum"}"#,
                "missing field `key`",
            ),
            (r#"{"op": "argmax", "value": "("}"#, "`reduce.value`:"),
        ] {
            let error = Plan::from_json(&plan(reduce)).unwrap_err().to_string();
            assert!(error.contains(says), "{reduce}: {error}");
        }
    }
}

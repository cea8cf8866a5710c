//! The micro-tools: their names, what the model is told about them, and their
//! arguments, parsed strictly.
//!
//! A call names a tool and gives arguments as JSON. An unknown tool, arguments that are
//! not a JSON object, a missing or unknown argument or one of the wrong type is an error
//! the model reads, naming the tool and the argument — never a default.

use std::fmt;
use std::str::FromStr;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::lenient_json::lenient_json;
use rlm_env::ToolSpec;

/// Characters `ctx_slice` returns at most, whatever is asked.
pub const SLICE_MAX_CHARS: u64 = 2_000;
/// Matching lines `ctx_grep` returns at most.
pub const GREP_MAX_LINES: usize = 20;
/// Characters `ctx_summarize` returns at the maximum depth (no sub-call is made).
pub const SUMMARY_FALLBACK_CHARS: u64 = 2_000;

/// One micro-tool (serialised by the name the model calls it by).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MicroTool {
    /// `ctx_length(variable)`: its size in characters and lines.
    #[serde(rename = "ctx_length")]
    Length,
    /// `ctx_slice(variable, start, end)`: characters `start..end`, at most 2000.
    #[serde(rename = "ctx_slice")]
    Slice,
    /// `ctx_grep(variable, pattern)`: matching lines, case-insensitive, at most 20.
    #[serde(rename = "ctx_grep")]
    Grep,
    /// `ctx_summarize(variable, instruction)`: a sub-model's summary.
    #[serde(rename = "ctx_summarize")]
    Summarize,
    /// `ctx_map_reduce(variable, split, filter, map, reduce)`: a combinator plan run by
    /// the orchestrator over the whole variable (docs/plans.md).
    #[serde(rename = "ctx_map_reduce")]
    MapReduce,
    /// `ctx_split(variable, by, size, overlap, pattern)`: the variable's pieces, stored
    /// by reference as a new variable.
    #[serde(rename = "ctx_split")]
    Split,
    /// `ctx_filter(pieces, regex | ask)`: the pieces kept, as a new variable.
    #[serde(rename = "ctx_filter")]
    Filter,
    /// `ctx_map(pieces, ask | count | extract | sub_rlm)`: each piece's result, as a
    /// new variable.
    #[serde(rename = "ctx_map")]
    Map,
    /// `ctx_reduce(results, op)`: the results made one answer.
    #[serde(rename = "ctx_reduce")]
    Reduce,
    /// `final_answer(answer)`: ends the run.
    #[serde(rename = "final_answer")]
    FinalAnswer,
}

/// The reductions a plan names in `reduce.op` (the plan crate's `Reduce`), offered in
/// the schemas of `ctx_map_reduce` and `ctx_reduce`.
pub const REDUCE_OPS: [&str; 14] = [
    "sum",
    "count",
    "min",
    "max",
    "concat",
    "vote",
    "union",
    "count_distinct",
    "join",
    "top_k",
    "pairs",
    "argmax",
    "group_by",
    "ask",
];

/// The aggregations of a `group_by` reduction (the plan crate's `Aggregate`).
pub const GROUP_AGGREGATES: [&str; 4] = ["count", "sum", "min", "max"];

/// What `ctx_map_reduce`'s `reduce` part may be, as its schema describes it.
const REDUCE_PART: &str = "how results become one: {\"op\": \"sum\"|\"count\"|\"min\"|\"max\"|\"concat\"|\"vote\"|\"union\"|\"count_distinct\" (how many distinct items)|\"join\"|\"top_k\" (with \"k\")|\"pairs\" (pairs of equal items)|\"ask\" (with \"instruction\")}; over lines (map {\"extract\": \"^.*$\"} keeps each line whole): {\"op\": \"argmax\", \"value\": P} (the line with the largest number) or {\"op\": \"group_by\", \"key\": P, \"value\": P, \"agg\": \"count\"|\"sum\"|\"min\"|\"max\", \"k\": N} (one `key: figure` line per key, the largest first; P's first group is the key or the number)";

/// What `ctx_map_reduce`'s `map` part may be, as its schema describes it.
const MAP_PART: &str = "what each piece becomes: {\"ask\": instruction} (the sub-model), {\"ask\": instruction, \"schema\": S} (the sub-model's answer held to the JSON Schema S, e.g. {\"type\": \"integer\"} for a number or {\"type\": \"array\", \"items\": {\"type\": \"string\"}} for a list of labels; an answer that does not match is an error), {\"count\": P} or {\"extract\": P} (no model), {\"sub_rlm\": query}";

/// What `schema` does, in `ctx_map`'s schema.
const SCHEMA_ARG: &str = "optional, with ask only: a JSON Schema the sub-model's answer is held to, e.g. {\"type\": \"integer\"} for a number or {\"type\": \"array\", \"items\": {\"type\": \"string\"}} for a list of labels; each result is then the answer's JSON, and an answer that does not match is an error";

/// `ctx_reduce`'s description.
const REDUCE_STEP: &str = "Makes the results one answer: sum, count, min, max, concat, vote, union (distinct items), count_distinct (how many distinct items), join, top_k (with k), pairs (how many pairs of items are equal), argmax (the line with the largest number; value: a pattern whose first group is the number), group_by (lines grouped by the first group of the key pattern, each group's numbers read by the value pattern and made one by agg: count, sum, min or max; the largest group first, k of them), or ask (with instruction: the helper model combines them). No model but for ask. Examples: {\"results\": \"results-…\", \"op\": \"sum\"}; over CSV lines `2024-05-01,kiosk-3,4.50`, {\"results\": \"results-…\", \"op\": \"group_by\", \"key\": \"^[^,]*,([^,]+),\", \"value\": \",([\\\\d.]+)$\", \"agg\": \"sum\"} gives each kiosk's total.";

impl MicroTool {
    /// The tools `--env plan` offers: the model's one action is a plan.
    pub const PLAN: [MicroTool; 3] = [Self::Length, Self::MapReduce, Self::FinalAnswer];

    /// Every tool, in the order they are offered.
    pub const ALL: [MicroTool; 10] = [
        Self::Length,
        Self::Grep,
        Self::Slice,
        Self::Summarize,
        Self::MapReduce,
        Self::Split,
        Self::Filter,
        Self::Map,
        Self::Reduce,
        Self::FinalAnswer,
    ];

    /// True for the step-by-step combinators (`ctx_split`, `ctx_filter`, `ctx_map`,
    /// `ctx_reduce`).
    pub fn is_step(self) -> bool {
        matches!(self, Self::Split | Self::Filter | Self::Map | Self::Reduce)
    }

    /// The name the model calls it by.
    pub fn name(self) -> &'static str {
        match self {
            Self::Length => "ctx_length",
            Self::Slice => "ctx_slice",
            Self::Grep => "ctx_grep",
            Self::Summarize => "ctx_summarize",
            Self::MapReduce => "ctx_map_reduce",
            Self::Split => "ctx_split",
            Self::Filter => "ctx_filter",
            Self::Map => "ctx_map",
            Self::Reduce => "ctx_reduce",
            Self::FinalAnswer => "final_answer",
        }
    }

    /// Its description and JSON Schema, as sent to the provider.
    pub fn spec(self) -> ToolSpec {
        let variable = json!({
            "type": "string",
            "description": "`context` (the task's context) or the key of a stored variable",
        });
        let (description, properties, required): (&str, Value, Vec<&str>) = match self {
            Self::Length => (
                "The size of a variable: characters and lines. Cheap: call it first.",
                json!({ "variable": variable }),
                vec!["variable"],
            ),
            Self::Grep => (
                "Lines of a variable matching a regular expression (case-insensitive), with their line numbers and character offsets; at most 20; when none matches, the few lines that share the most words with the pattern. Cheapest way to find what matters.",
                json!({
                    "variable": variable,
                    "pattern": {"type": "string", "description": "words from the task, or a regular expression, to search for"},
                }),
                vec!["variable", "pattern"],
            ),
            Self::Slice => (
                "Characters start..end of a variable (at most 2000 are returned). Use the offsets ctx_grep gives to read around a match.",
                json!({
                    "variable": variable,
                    "start": {"type": "integer", "minimum": 0, "description": "first character (from 0)"},
                    "end": {"type": "integer", "minimum": 0, "description": "character after the last one"},
                }),
                vec!["variable", "start", "end"],
            ),
            Self::Summarize => (
                "A sub-model answers your instruction about a variable (a variable too large for one call is read by a nested run with these tools). The most expensive tool: use it when grep and slice are not enough.",
                json!({
                    "variable": variable,
                    "instruction": {"type": "string", "description": "what the sub-model must find or answer, in words from the task"},
                }),
                vec!["variable", "instruction"],
            ),
            Self::MapReduce => (
                "Counts, sums or lists over a whole variable: it is cut into pieces, each piece asked (or counted) on its own, and the results reduced to one answer. Priced first: refused with the figures if over budget. Example: split {\"by\": \"chars\", \"size\": 20000}, map {\"ask\": \"How many failed payments are listed? Answer with a number.\"}, reduce {\"op\": \"sum\"}. An ask map may add \"schema\", a JSON Schema each answer is held to (e.g. {\"type\": \"integer\"}).",
                json!({
                    "variable": {
                        "type": "string",
                        "description": "`context` (the task's context; also when left out) or the key of a stored variable",
                    },
                    "split": {"type": "object", "description": "how to cut it: {\"by\": \"chars\"|\"lines\"|\"tokens\"|\"regex\", \"size\": N, \"pattern\": P (regex: a record starts at each matching line)}; left out: lines, the largest pieces the helper model takes", "properties": {"by": {"type": "string", "enum": ["chars", "lines", "tokens", "regex"]}, "size": {"type": "integer", "minimum": 1}, "pattern": {"type": "string"}}, "required": ["by"]},
                    "filter": {"description": "optional, which pieces to keep: {\"regex\": P} or {\"where\": \"latency_ms > 250\"} (a number field's condition; with count or extract, both choose which lines they read) or {\"ask\": a yes/no question}", "anyOf": [one_key("regex"), one_key("where"), one_key("ask")]},
                    "map": {"description": MAP_PART, "anyOf": [one_key("ask"), one_key("count"), one_key("extract"), one_key("sub_rlm"), shaped_ask()]},
                    "reduce": {"type": "object", "description": REDUCE_PART, "properties": {"op": {"type": "string", "enum": REDUCE_OPS}, "k": {"type": "integer", "minimum": 1}, "separator": {"type": "string"}, "instruction": {"type": "string"}, "key": {"type": "string"}, "value": {"type": "string"}, "agg": {"type": "string", "enum": GROUP_AGGREGATES}}, "required": ["op"], "additionalProperties": false},
                }),
                vec!["map", "reduce"],
            ),
            Self::Split => (
                "Cuts a variable into pieces, stored as a new variable (by reference: nothing is copied) that ctx_filter and ctx_map take. Example: {\"variable\": \"context\", \"by\": \"lines\", \"size\": 200} gives pieces of 200 lines; leave out size for the largest piece the helper model takes.",
                json!({
                    "variable": variable,
                    "by": {"type": "string", "enum": ["chars", "lines", "tokens", "regex", "records"], "description": "the unit: chars, lines, tokens; regex (a record starts at each line matching `pattern`); records (the items of a JSON list)"},
                    "size": {"type": "integer", "minimum": 1, "description": "units a piece (optional)"},
                    "overlap": {"type": "integer", "minimum": 0, "description": "units each piece repeats from the one before (chars, lines; optional)"},
                    "pattern": {"type": "string", "description": "for by=regex: where each record starts, e.g. ^\\d{4}-\\d{2}-\\d{2}"},
                }),
                vec!["variable", "by"],
            ),
            Self::Filter => (
                "Keeps the pieces that match a regular expression or a condition on a number field such as \"latency_ms > 250\" (no model; a later count or extract then reads only the lines that pass) or that the helper model answers yes about; a new pieces variable. Example: {\"pieces\": \"pieces-…\", \"regex\": \"payment\"}.",
                json!({
                    "pieces": {"type": "string", "description": "the pieces variable ctx_split or ctx_filter returned"},
                    "regex": {"type": "string", "description": "keep the pieces this matches (case-insensitive)"},
                    "where": {"type": "string", "description": "or: keep the lines whose number fields meet this, e.g. \"latency_ms > 250\" or \"status >= 500 and bytes < 1024\""},
                    "ask": {"type": "string", "description": "or: a yes/no question about a piece"},
                }),
                vec!["pieces"],
            ),
            Self::Map => (
                "Turns every piece into a result, in parallel, priced first (refused with the figures if over budget); a new results variable. Give one of: ask (the helper model answers about each piece; with schema, its answer is held to that JSON Schema), count or extract (a pattern's matches, no model), sub_rlm (a nested run). Example: {\"pieces\": \"pieces-…\", \"count\": \"ERROR\"}.",
                json!({
                    "pieces": {"type": "string", "description": "the pieces variable"},
                    "ask": {"type": "string", "description": "a short, exact question a piece alone answers, e.g. How many failed payments are listed? Answer with a number."},
                    "count": {"type": "string", "description": "a regular expression: its matches in each piece are counted"},
                    "extract": {"type": "string", "description": "a regular expression: its matches in each piece are listed (the first group when it has one)"},
                    "sub_rlm": {"type": "string", "description": "a query for a nested run on each piece"},
                    "schema": {"type": "object", "description": SCHEMA_ARG},
                }),
                vec!["pieces"],
            ),
            Self::Reduce => (
                REDUCE_STEP,
                json!({
                    "results": {"type": "string", "description": "the results variable ctx_map returned (or any list variable)"},
                    "op": {"type": "string", "enum": REDUCE_OPS},
                    "k": {"type": "integer", "minimum": 1, "description": "for top_k and group_by: how many to keep"},
                    "separator": {"type": "string", "description": "for concat and join"},
                    "instruction": {"type": "string", "description": "for ask: how to combine the results"},
                    "key": {"type": "string", "description": "for group_by: a regular expression whose first group is a line's key"},
                    "value": {"type": "string", "description": "for group_by (sum, min, max) and argmax: a regular expression whose first group is a line's number"},
                    "agg": {"type": "string", "enum": GROUP_AGGREGATES, "description": "for group_by: what each group's lines become"},
                }),
                vec!["results", "op"],
            ),
            Self::FinalAnswer => (
                "Ends the task with your answer.",
                json!({ "answer": {"type": "string", "description": "the final answer"} }),
                vec!["answer"],
            ),
        };
        ToolSpec {
            name: self.name().to_owned(),
            description: description.to_owned(),
            parameters: json!({
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            }),
        }
    }

    /// How the model calls it in the text protocol's documentation.
    pub fn signature(self) -> &'static str {
        match self {
            Self::Length => "ctx_length(variable)",
            Self::Slice => "ctx_slice(variable, start, end)",
            Self::Grep => "ctx_grep(variable, pattern)",
            Self::Summarize => "ctx_summarize(variable, instruction)",
            Self::MapReduce => "ctx_map_reduce(variable, split, filter, map, reduce)",
            Self::Split => "ctx_split(variable, by, size, overlap, pattern)",
            Self::Filter => "ctx_filter(pieces, regex | where | ask)",
            Self::Map => "ctx_map(pieces, ask [schema] | count | extract | sub_rlm)",
            Self::Reduce => "ctx_reduce(results, op, k, separator, instruction, key, value, agg)",
            Self::FinalAnswer => "final_answer(answer)",
        }
    }
}

impl fmt::Display for MicroTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not one of the tools.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tool `{name}`; the tools are ctx_length, ctx_grep, ctx_slice, ctx_summarize, ctx_map_reduce, ctx_split, ctx_filter, ctx_map, ctx_reduce and final_answer")]
pub struct UnknownTool {
    /// The name given.
    pub name: String,
}

impl FromStr for MicroTool {
    type Err = UnknownTool;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|tool| tool.name() == name.trim())
            .ok_or_else(|| UnknownTool {
                name: name.to_owned(),
            })
    }
}

/// The schema of an object with one string member, `key` (a plan's `filter` or `map`
/// form).
fn one_key(key: &str) -> Value {
    json!({"type": "object", "properties": {key: {"type": "string"}}, "required": [key], "additionalProperties": false})
}

/// The schema of `{"ask": …, "schema": …}`: an ask map whose answer is held to a JSON
/// Schema (any object: the schema is the model's own).
fn shaped_ask() -> Value {
    json!({"type": "object", "properties": {"ask": {"type": "string"}, "schema": {"type": "object"}}, "required": ["ask", "schema"], "additionalProperties": false})
}

/// `ctx_length`, and the first argument of every `ctx_*` tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariableArgs {
    /// `context` or a store key.
    pub variable: String,
}

/// `ctx_slice`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SliceArgs {
    /// `context` or a store key.
    pub variable: String,
    /// First character.
    pub start: u64,
    /// Character after the last one.
    pub end: u64,
}

/// `ctx_grep`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// `context` or a store key.
    pub variable: String,
    /// A regular expression, matched case-insensitively.
    pub pattern: String,
}

/// `ctx_summarize`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummarizeArgs {
    /// `context` or a store key.
    pub variable: String,
    /// What the summary must focus on.
    pub instruction: String,
}

/// `ctx_map_reduce`: the plan's parts, checked by the orchestrator. `variable` and
/// `split` may be left out — the task's context, in lines (the plan's own default,
/// `rlm_plan::Split::default`) — as small models do when a prompt's recipe shows only
/// the map and the reduction; refusing them for a missing `variable` only gets the
/// same call back.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapReduceArgs {
    /// `context` or a store key (`context` when left out).
    #[serde(default = "the_context")]
    pub variable: String,
    /// How to cut it (the plan's default when left out).
    #[serde(default)]
    pub split: Option<Value>,
    /// Which pieces to keep.
    #[serde(default)]
    pub filter: Option<Value>,
    /// What each piece becomes.
    pub map: Value,
    /// How the results become one.
    pub reduce: Value,
}

/// `ctx_map_reduce`'s variable when the call names none: the task's context.
fn the_context() -> String {
    "context".to_owned()
}

/// `final_answer`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinalAnswerArgs {
    /// The answer.
    pub answer: Value,
}

impl FinalAnswerArgs {
    /// The answer as text: a string as is, anything else as JSON.
    pub fn into_text(self) -> String {
        match self.answer {
            Value::String(text) => text,
            other => other.to_string(),
        }
    }
}

/// A call's arguments that do not fit its tool: an error result that names the tool
/// and the argument at fault, and shows a call that would work.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// The arguments are not JSON, even read leniently.
    #[error("invalid call of {tool}: its arguments are not valid JSON ({error}); give a JSON object such as {}", example(*tool))]
    NotJson {
        /// The tool called.
        tool: MicroTool,
        /// What the strict parser said (in the message, so not a source).
        error: serde_json::Error,
    },
    /// The arguments are JSON but not an object.
    #[error("invalid call of {tool}: its arguments must be a JSON object such as {}", example(*tool))]
    NotObject {
        /// The tool called.
        tool: MicroTool,
    },
    /// An argument is missing, unknown or of the wrong type.
    #[error("invalid call of {tool}: {error}; a call that works: {}", example(*tool))]
    Invalid {
        /// The tool called.
        tool: MicroTool,
        /// Which argument and why (in the message, so not a source).
        error: serde_json::Error,
    },
}

/// Parses a call's arguments (JSON text) for `tool`; the error names the tool and
/// the argument at fault.
pub fn parse_args<T: DeserializeOwned>(tool: MicroTool, arguments: &str) -> Result<T, ArgsError> {
    let value: Value = if arguments.trim().is_empty() {
        json!({})
    } else {
        match serde_json::from_str(arguments) {
            Ok(value) => value,
            // Small models write single quotes, raw line breaks, trailing commas.
            Err(error) => lenient_json(arguments).ok_or(ArgsError::NotJson { tool, error })?,
        }
    };
    let value = unwrap_encoded_object(value);
    if !value.is_object() {
        return Err(ArgsError::NotObject { tool });
    }
    serde_json::from_value(value).map_err(|error| ArgsError::Invalid { tool, error })
}

/// The object inside arguments encoded twice (a JSON string whose text is the object:
/// `"{\"variable\": \"context\"}"`, as some models and chat templates write them),
/// else the value as it is.
fn unwrap_encoded_object(value: Value) -> Value {
    let Value::String(text) = &value else {
        return value;
    };
    match serde_json::from_str::<Value>(text) {
        Ok(inner) if inner.is_object() => inner,
        _ => value,
    }
}

fn example(tool: MicroTool) -> &'static str {
    match tool {
        MicroTool::Length => r#"{"variable": "context"}"#,
        MicroTool::Slice => r#"{"variable": "context", "start": 0, "end": 2000}"#,
        MicroTool::Grep => r#"{"variable": "context", "pattern": "error"}"#,
        MicroTool::Summarize => r#"{"variable": "context", "instruction": "list the errors"}"#,
        MicroTool::MapReduce => {
            r#"{"variable": "context", "split": {"by": "chars", "size": 20000}, "map": {"count": "error"}, "reduce": {"op": "sum"}}"#
        }
        MicroTool::Split => r#"{"variable": "context", "by": "lines", "size": 200}"#,
        MicroTool::Filter => r#"{"pieces": "pieces-…", "regex": "error"}"#,
        MicroTool::Map => r#"{"pieces": "pieces-…", "count": "error"}"#,
        MicroTool::Reduce => r#"{"results": "results-…", "op": "sum"}"#,
        MicroTool::FinalAnswer => r#"{"answer": "..."}"#,
    }
}

/// Parses `--tools` (`ctx_grep,ctx_slice,final_answer`); `final_answer` is always
/// offered (a run must be able to end).
pub fn parse_tool_list(list: &str) -> Result<Vec<MicroTool>, UnknownTool> {
    let mut tools = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let tool: MicroTool = name.parse()?;
        if !tools.contains(&tool) {
            tools.push(tool);
        }
    }
    if !tools.contains(&MicroTool::FinalAnswer) {
        tools.push(MicroTool::FinalAnswer);
    }
    Ok(tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_reduce_without_variable_or_split_reads_the_context_in_lines() {
        let args: MapReduceArgs = parse_args(
            MicroTool::MapReduce,
            r#"{"filter": {"regex": "status=404"}, "map": {"count": "status=404"}, "reduce": {"op": "sum"}}"#,
        )
        .unwrap();
        assert_eq!(args.variable, "context");
        assert_eq!(args.split, None, "the plan's own default applies");
        // Only map and reduce are required by the schema the model is shown.
        assert_eq!(
            MicroTool::MapReduce.spec().parameters["required"],
            json!(["map", "reduce"])
        );
    }

    #[test]
    fn a_missing_argument_is_named_with_a_call_that_works() {
        let error = parse_args::<MapReduceArgs>(MicroTool::MapReduce, r#"{"map": {"count": "x"}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("invalid call of ctx_map_reduce: missing field `reduce`"),
            "{error}"
        );
        assert!(
            error.ends_with(&format!(
                "; a call that works: {}",
                example(MicroTool::MapReduce)
            )),
            "{error}"
        );
    }

    #[test]
    fn names_round_trip_and_specs_are_strict_schemas() {
        for tool in MicroTool::ALL {
            assert_eq!(tool.name().parse::<MicroTool>(), Ok(tool));
            let spec = tool.spec();
            assert_eq!(spec.name, tool.name());
            assert_eq!(spec.parameters["additionalProperties"], false);
            assert!(spec.parameters["required"].is_array());
        }
        let error = "ctx_read".parse::<MicroTool>().unwrap_err();
        assert!(error.to_string().contains("unknown tool `ctx_read`"));
    }

    #[test]
    fn bad_arguments_name_the_tool_and_the_argument() {
        let missing =
            parse_args::<GrepArgs>(MicroTool::Grep, r#"{"variable": "context"}"#).unwrap_err();
        let missing = missing.to_string();
        assert!(
            missing.contains("ctx_grep") && missing.contains("`pattern`"),
            "{missing}"
        );
        let unknown =
            parse_args::<VariableArgs>(MicroTool::Length, r#"{"variable": "c", "verbose": true}"#)
                .unwrap_err()
                .to_string();
        assert!(unknown.contains("`verbose`"), "{unknown}");
        let wrong = parse_args::<SliceArgs>(
            MicroTool::Slice,
            r#"{"variable": "c", "start": "zero", "end": 5}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(wrong.contains("invalid type"), "{wrong}");
        let not_json = parse_args::<VariableArgs>(MicroTool::Length, "{variable: context")
            .unwrap_err()
            .to_string();
        assert!(not_json.contains("not valid JSON"), "{not_json}");
        let not_object = parse_args::<VariableArgs>(MicroTool::Length, "[1]")
            .unwrap_err()
            .to_string();
        assert!(not_object.contains("must be a JSON object"), "{not_object}");
        let not_object = parse_args::<VariableArgs>(MicroTool::Length, r#""context""#)
            .unwrap_err()
            .to_string();
        assert!(not_object.contains("must be a JSON object"), "{not_object}");
        // Arguments encoded twice are read as the object they hold.
        assert_eq!(
            parse_args::<SliceArgs>(
                MicroTool::Slice,
                r#""{\"variable\": \"c\", \"start\": 1, \"end\": 9}""#
            )
            .unwrap(),
            SliceArgs {
                variable: "c".into(),
                start: 1,
                end: 9
            }
        );
        assert_eq!(
            parse_args::<SliceArgs>(
                MicroTool::Slice,
                r#"{"variable": "c", "start": 1, "end": 9}"#
            )
            .unwrap(),
            SliceArgs {
                variable: "c".into(),
                start: 1,
                end: 9
            }
        );
    }

    #[test]
    fn the_list_always_ends_with_final_answer() {
        assert_eq!(
            parse_tool_list("ctx_grep, ctx_slice,ctx_grep").unwrap(),
            [MicroTool::Grep, MicroTool::Slice, MicroTool::FinalAnswer]
        );
        assert!(parse_tool_list("ctx_grep,rm").is_err());
    }
}

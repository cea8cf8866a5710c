//! The combinator micro-tools, one step each (docs/plans.md): `ctx_split` cuts a
//! variable into pieces, `ctx_filter` keeps some, `ctx_map` turns each into a result,
//! `ctx_reduce` makes the results one answer. Each step's output is a store variable
//! the next names (pieces by reference, results as a list); the orchestrator runs the
//! steps ([`HostCall::PlanSplit`] and the rest), pricing any that calls a model
//! before it does. Arguments are flat — `{"pieces": …, "count": "ERROR"}` rather
//! than a nested plan — because small models write flat objects more reliably.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::catalog::{parse_args, ArgsError, MicroTool};
use rlm_env::{HostCall, SplitStepArgs};

/// Why a combinator call does not become a host call; the message is the error result
/// the model reads.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The arguments do not fit the tool.
    #[error(transparent)]
    Arguments(#[from] ArgsError),
    /// None of the options the tool takes one of was given.
    #[error("{tool} needs one of {options}")]
    NoOption {
        /// The tool called.
        tool: MicroTool,
        /// Its options, comma-separated.
        options: String,
    },
    /// Several of them were.
    #[error("{tool} takes one of {options}, not several: call it once for each")]
    SeveralOptions {
        /// The tool called.
        tool: MicroTool,
        /// Its options, comma-separated.
        options: String,
    },
    /// The variable named cannot be read as one text (the environment's error, as the
    /// model reads it).
    #[error(transparent)]
    Variable(Box<dyn std::error::Error + Send + Sync>),
    /// The variable is a context of several files.
    #[error("{tool} reads one text: `{variable}` holds several files; give the key of one stored variable")]
    SeveralFiles {
        /// The tool called.
        tool: MicroTool,
        /// The variable named.
        variable: String,
    },
    /// `schema` given without `ask`, or beside a map that asks no model for an answer.
    #[error("{tool}: `schema` goes with `ask` only (it holds the sub-model's answer to a JSON Schema); {instead}")]
    SchemaWithoutAsk {
        /// The tool called.
        tool: MicroTool,
        /// What to write instead.
        instead: String,
    },
    /// The tool is not a combinator.
    #[error("{tool} is not a combinator")]
    NotACombinator {
        /// The tool called.
        tool: MicroTool,
    },
}

/// `ctx_split`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitArgs {
    /// `context` or a store key.
    pub variable: String,
    /// `chars`, `lines`, `tokens`, `regex` or `records`.
    pub by: String,
    /// Units a piece.
    #[serde(default)]
    pub size: Option<u64>,
    /// Units repeated from the piece before.
    #[serde(default)]
    pub overlap: Option<u64>,
    /// For `regex`: a record starts at each line this matches.
    #[serde(default)]
    pub pattern: Option<String>,
}

/// `ctx_filter`: exactly one of `regex`, `where` and `ask`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterArgs {
    /// The pieces variable.
    pub pieces: String,
    /// Keep the pieces this matches.
    #[serde(default)]
    pub regex: Option<String>,
    /// Keep the pieces with a record that meets this condition (`latency_ms > 250`).
    #[serde(default, rename = "where")]
    pub condition: Option<String>,
    /// Keep the pieces the sub-model answers yes about.
    #[serde(default)]
    pub ask: Option<String>,
}

/// `ctx_map`: exactly one of `ask`, `count`, `extract`, `sub_rlm`; `schema` only
/// with `ask`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapArgs {
    /// The pieces variable.
    pub pieces: String,
    /// The sub-model's answer to this about each piece.
    #[serde(default)]
    pub ask: Option<String>,
    /// How many times this pattern matches in each piece (no model).
    #[serde(default)]
    pub count: Option<String>,
    /// This pattern's matches in each piece (no model).
    #[serde(default)]
    pub extract: Option<String>,
    /// A nested run on each piece with this query.
    #[serde(default)]
    pub sub_rlm: Option<String>,
    /// With `ask`: the JSON Schema the sub-model's answer is held to.
    #[serde(default)]
    pub schema: Option<Value>,
}

/// `ctx_reduce`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReduceArgs {
    /// The results variable (or any list variable).
    pub results: String,
    /// One of [`crate::catalog::REDUCE_OPS`].
    pub op: String,
    /// For `top_k` and `group_by`: how many to keep.
    #[serde(default)]
    pub k: Option<u64>,
    /// For `group_by`: the pattern whose first group is a record's key.
    #[serde(default)]
    pub key: Option<String>,
    /// For `group_by` and `argmax`: the pattern whose first group is a record's number.
    #[serde(default)]
    pub value: Option<String>,
    /// For `group_by`: `count`, `sum`, `min` or `max`.
    #[serde(default)]
    pub agg: Option<String>,
    /// For `concat` and `join`.
    #[serde(default)]
    pub separator: Option<String>,
    /// For `ask`: how the sub-model combines the results.
    #[serde(default)]
    pub instruction: Option<String>,
}

/// The one `{name: value}` of the options given, or an error naming them.
fn one_of(tool: MicroTool, options: &[(&str, &Option<String>)]) -> Result<Value, StepError> {
    let given: Vec<(&str, &String)> = options
        .iter()
        .filter_map(|(name, value)| value.as_ref().map(|v| (*name, v)))
        .collect();
    let names: Vec<&str> = options.iter().map(|(name, _)| *name).collect();
    let options = names.join(", ");
    match given.as_slice() {
        [(name, value)] => Ok(json!({ *name: value })),
        [] => Err(StepError::NoOption { tool, options }),
        _ => Err(StepError::SeveralOptions { tool, options }),
    }
}

/// Why `ctx_map`'s `schema` cannot go with the map given (no `ask`).
fn schema_without_ask(tool: MicroTool, args: &MapArgs) -> StepError {
    let other = [
        ("count", &args.count),
        ("extract", &args.extract),
        ("sub_rlm", &args.sub_rlm),
    ]
    .into_iter()
    .find_map(|(name, value)| value.as_ref().map(|_| name));
    let instead = match other {
        Some(name) => format!(
            "a {name} map takes none: leave `schema` out, or give `ask` in place of `{name}`"
        ),
        None => "give `ask` with it, such as {\"pieces\": \"pieces-…\", \"ask\": \"How many items are listed? Answer with a number.\", \"schema\": {\"type\": \"integer\"}}".to_owned(),
    };
    StepError::SchemaWithoutAsk { tool, instead }
}

/// A combinator call's arguments as the host call it becomes (`variable_key`: the
/// store key a variable's text is read from); the error's message is what the model
/// reads.
pub(crate) fn host_call(
    tool: MicroTool,
    arguments: &str,
    variable_key: impl Fn(&str) -> Result<String, StepError>,
) -> Result<HostCall, StepError> {
    match tool {
        MicroTool::Split => {
            let args: SplitArgs = parse_args(tool, arguments)?;
            let mut split = Map::new();
            split.insert("by".into(), json!(args.by));
            for (name, value) in [("size", args.size), ("overlap", args.overlap)] {
                if let Some(value) = value {
                    split.insert(name.into(), json!(value));
                }
            }
            if let Some(pattern) = args.pattern {
                split.insert("pattern".into(), json!(pattern));
            }
            Ok(HostCall::PlanSplit(SplitStepArgs {
                input: variable_key(&args.variable)?,
                split: Value::Object(split),
                text: None,
            }))
        }
        MicroTool::Filter => {
            let args: FilterArgs = parse_args(tool, arguments)?;
            let filter = one_of(
                tool,
                &[
                    ("regex", &args.regex),
                    ("where", &args.condition),
                    ("ask", &args.ask),
                ],
            )?;
            Ok(HostCall::PlanFilter {
                pieces: args.pieces,
                filter,
            })
        }
        MicroTool::Map => {
            let args: MapArgs = parse_args(tool, arguments)?;
            if args.schema.is_some() && args.ask.is_none() {
                return Err(schema_without_ask(tool, &args));
            }
            let mut map = one_of(
                tool,
                &[
                    ("ask", &args.ask),
                    ("count", &args.count),
                    ("extract", &args.extract),
                    ("sub_rlm", &args.sub_rlm),
                ],
            )?;
            if let Some(schema) = args.schema {
                map["schema"] = schema;
            }
            Ok(HostCall::PlanMap {
                pieces: args.pieces,
                map,
            })
        }
        MicroTool::Reduce => {
            let args: ReduceArgs = parse_args(tool, arguments)?;
            let mut reduce = Map::new();
            reduce.insert("op".into(), json!(args.op));
            if let Some(k) = args.k {
                reduce.insert("k".into(), json!(k));
            }
            for (name, value) in [("key", args.key), ("value", args.value), ("agg", args.agg)] {
                if let Some(value) = value {
                    reduce.insert(name.into(), json!(value));
                }
            }
            if let Some(separator) = args.separator {
                reduce.insert("separator".into(), json!(separator));
            }
            if let Some(instruction) = args.instruction {
                reduce.insert("instruction".into(), json!(instruction));
            }
            Ok(HostCall::PlanReduce {
                results: args.results,
                reduce: Value::Object(reduce),
            })
        }
        other => Err(StepError::NotACombinator { tool: other }),
    }
}

/// What the model reads after a step: the variable it made, its figures, and what to
/// call next.
pub(crate) fn describe(tool: MicroTool, reply: &Value) -> String {
    let text = |name: &str| reply[name].as_str().unwrap_or("?").to_owned();
    match tool {
        MicroTool::Split => format!(
            "{}: {} pieces ({} characters in all, {}–{} a piece). Next: ctx_map (or ctx_filter) with {{\"pieces\": \"{}\", …}}.",
            text("pieces"),
            reply["count"],
            reply["chars"]["total"],
            reply["chars"]["smallest"],
            reply["chars"]["largest"],
            text("pieces")
        ),
        MicroTool::Filter => format!(
            "{}: {} of {} pieces kept ({} model calls). Next: ctx_map with {{\"pieces\": \"{}\", …}}.",
            text("pieces"),
            reply["count"],
            reply["of"],
            reply["calls"],
            text("pieces")
        ),
        MicroTool::Map => {
            let first: Vec<String> = reply["first"]
                .as_array()
                .map(|items| items.iter().filter_map(|v| v.as_str()).map(str::to_owned).collect())
                .unwrap_or_default();
            let figures = format!(
                "{}: {} results of {} pieces ({} model calls); the first: {}.",
                text("results"),
                reply["count"],
                reply["pieces"],
                reply["calls"],
                first.join(" | "),
            );
            // The map a refusal named ran in place of one refused again: its note
            // gives the answer, said first.
            match reply["note"].as_str() {
                Some(note) => format!("{note}\n{figures}"),
                None => format!(
                    "{figures} Next: ctx_reduce with {{\"results\": \"{}\", \"op\": …}}.",
                    text("results")
                ),
            }
        }
        _ => format!(
            "{}\n(reduced from {} results)",
            text("answer"),
            reply["count"]
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tool: MicroTool, arguments: &str) -> Result<HostCall, StepError> {
        host_call(tool, arguments, |name| Ok(format!("key-of-{name}")))
    }

    #[test]
    fn flat_arguments_become_the_plan_parts() {
        assert_eq!(
            call(
                MicroTool::Split,
                r#"{"variable": "context", "by": "lines", "size": 50}"#
            )
            .unwrap(),
            HostCall::PlanSplit(SplitStepArgs {
                input: "key-of-context".into(),
                split: json!({"by": "lines", "size": 50}),
                text: None,
            })
        );
        assert_eq!(
            call(
                MicroTool::Map,
                r#"{"pieces": "pieces-1", "count": "ERROR"}"#
            )
            .unwrap(),
            HostCall::PlanMap {
                pieces: "pieces-1".into(),
                map: json!({"count": "ERROR"}),
            }
        );
        assert_eq!(
            call(
                MicroTool::Filter,
                r#"{"pieces": "pieces-1", "where": "latency_ms > 250"}"#
            )
            .unwrap(),
            HostCall::PlanFilter {
                pieces: "pieces-1".into(),
                filter: json!({"where": "latency_ms > 250"}),
            }
        );
        assert_eq!(
            call(
                MicroTool::Reduce,
                r#"{"results": "results-1", "op": "group_by", "key": "^([^,]+),", "value": ",(\\d+)$", "agg": "sum", "k": 2}"#
            )
            .unwrap(),
            HostCall::PlanReduce {
                results: "results-1".into(),
                reduce: json!({"op": "group_by", "key": "^([^,]+),", "value": ",(\\d+)$", "agg": "sum", "k": 2}),
            }
        );
        assert_eq!(
            call(
                MicroTool::Reduce,
                r#"{"results": "results-1", "op": "top_k", "k": 3}"#
            )
            .unwrap(),
            HostCall::PlanReduce {
                results: "results-1".into(),
                reduce: json!({"op": "top_k", "k": 3}),
            }
        );
    }

    #[test]
    fn a_schema_goes_with_ask_into_one_shaped_map() {
        assert_eq!(
            call(
                MicroTool::Map,
                r#"{"pieces": "pieces-1", "ask": "How many?", "schema": {"type": "integer"}}"#
            )
            .unwrap(),
            HostCall::PlanMap {
                pieces: "pieces-1".into(),
                map: json!({"ask": "How many?", "schema": {"type": "integer"}}),
            }
        );
        // A null schema is none.
        assert_eq!(
            call(
                MicroTool::Map,
                r#"{"pieces": "pieces-1", "ask": "How many?", "schema": null}"#
            )
            .unwrap(),
            HostCall::PlanMap {
                pieces: "pieces-1".into(),
                map: json!({"ask": "How many?"}),
            }
        );
        let alone = call(
            MicroTool::Map,
            r#"{"pieces": "p", "schema": {"type": "integer"}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            alone.starts_with("ctx_map: `schema` goes with `ask` only")
                && alone.contains("give `ask` with it"),
            "{alone}"
        );
        for other in ["count", "extract", "sub_rlm"] {
            let beside = call(
                MicroTool::Map,
                &format!(r#"{{"pieces": "p", "{other}": "x", "schema": {{"type": "integer"}}}}"#),
            )
            .unwrap_err()
            .to_string();
            assert!(
                beside.starts_with("ctx_map: `schema` goes with `ask` only")
                    && beside.contains(&format!("a {other} map takes none")),
                "{beside}"
            );
        }
    }

    #[test]
    fn one_option_exactly_and_the_error_names_them() {
        let none = call(MicroTool::Filter, r#"{"pieces": "p"}"#)
            .unwrap_err()
            .to_string();
        assert!(none.contains("needs one of regex, where, ask"), "{none}");
        let two = call(
            MicroTool::Map,
            r#"{"pieces": "p", "ask": "a", "count": "b"}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(two.contains("not several"), "{two}");
        let unknown = call(MicroTool::Map, r#"{"pieces": "p", "sum": "b"}"#)
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("unknown field `sum`"), "{unknown}");
    }
}

//! The host calls model code makes, as one type shared by every environment.
//!
//! An environment turns a helper call in the model's code (`llm_query(...)`,
//! `store.set(...)`, …) into a [`HostCall`] and hands it to the host;
//! the answer comes back as a [`HostReply`] or a [`HostError`]. On the wire (the Python
//! kernel's `host_call` message) a call is `{"method": "llm_query", "args": {...}}`,
//! exactly this enum's serde form, parsed strictly: an unknown method, a missing or
//! misspelt argument or an argument of the wrong type is an error the model sees, naming
//! it — never a default that silently changes what the call does.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Default `max_tokens` of `summarize`.
pub const SUMMARY_MAX_TOKENS: u64 = 500;

/// One call from model code to the orchestrator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "method",
    content = "args",
    rename_all = "snake_case",
    deny_unknown_fields
)]
pub enum HostCall {
    /// `llm_query(prompt, context=None, schema=None)`: one plain sub-model call;
    /// replies with text, or with the JSON value a `schema` asked for.
    LlmQuery(PromptArgs),
    /// `llm_query_parallel(prompts)`: several at once; replies with a list holding, in
    /// order, each answer's text or `{"error": message}`.
    LlmQueryParallel {
        /// The calls.
        prompts: Vec<PromptArgs>,
    },
    /// `summarize(var, max_tokens=500)`: a summary by the sub-model; replies with text.
    Summarize {
        /// What to summarise (text, or any JSON value).
        text: Value,
        /// Length of the summary.
        #[serde(default = "default_summary_tokens")]
        max_tokens: u64,
    },
    /// `sub_rlm(query, context=None)`: a nested RLM run; replies with its answer.
    SubRlm(SubRlmArgs),
    /// `sub_rlm_parallel([(query, context), …])`: several nested runs at once
    /// (`--max-parallel` at a time); replies with a list holding, in order, each
    /// answer or `{"error": message}`.
    SubRlmParallel {
        /// The nested runs.
        jobs: Vec<SubRlmArgs>,
    },
    /// `spawn_agent(task, refs=None)`: the external agent; replies with its answer or
    /// its error object.
    SpawnAgent(AgentJob),
    /// `spawn_agents([(task, refs), …])`: several agents at once; replies with a list of
    /// answers or error objects, in order.
    SpawnAgents {
        /// The agents to run.
        jobs: Vec<AgentJob>,
    },
    /// `map_reduce(plan)`: a combinator plan (docs/plans.md) the orchestrator prices,
    /// checks against the budgets and runs; replies with `{answer, pieces, kept, calls,
    /// results}` (`results`: the variable holding each piece's result).
    RunPlan(PlanArgs),
    /// `ctx_split(input, split)`: the plan's first step alone — the input cut into
    /// pieces, stored by reference (byte ranges of its text) as a new variable; replies
    /// with `{pieces, count, chars}` (`pieces`: that variable's key).
    PlanSplit(SplitStepArgs),
    /// `ctx_filter(pieces, filter)`: the pieces a regex, a `where` condition or a
    /// yes/no question keeps, as a new pieces variable; replies with
    /// `{pieces, count, of, calls}`.
    PlanFilter {
        /// The pieces variable (from `ctx_split` or `ctx_filter`).
        pieces: String,
        /// `{"regex": P}`, `{"where": "latency_ms > 250"}` or `{"ask": question}`.
        filter: Value,
    },
    /// `ctx_map(pieces, map)`: every piece mapped, priced and checked first; replies with
    /// `{results, count, calls}` (`results`: the variable holding each piece's result).
    PlanMap {
        /// The pieces variable.
        pieces: String,
        /// What each piece becomes, as a plan's `map`.
        map: Value,
    },
    /// `ctx_reduce(results, reduce)`: a results variable (or any JSON list) reduced to
    /// one answer; replies with `{answer, count}`.
    PlanReduce {
        /// The results variable, or any list variable.
        results: String,
        /// How, as a plan's `reduce`.
        reduce: Value,
    },
    /// `store.set(key, value)`: replies with the variable's reference.
    StoreSet {
        /// The variable's key.
        key: String,
        /// Its value.
        value: Value,
    },
    /// `store.set(key, context)` of a lazy context: `key` becomes another reference to
    /// the file the `file` variable `from` refers to (nothing is copied); replies with
    /// the new variable's reference.
    StoreSetRef {
        /// The new variable's key.
        key: String,
        /// The `file` variable whose file it refers to.
        from: String,
    },
    /// `store.get(key)` where the environment cannot read files (`js`): replies with
    /// the value.
    StoreGet {
        /// The variable's key.
        key: String,
    },
    /// `store.ref(key)` (and Python's `store.get`, which then reads the file itself):
    /// replies with the reference and the file's absolute `path`.
    StoreRef {
        /// The variable's key.
        key: String,
    },
    /// `store.list()`: replies with every reference.
    StoreList {},
    /// `store.delete(key)`: replies with `null`.
    StoreDelete {
        /// The variable's key.
        key: String,
    },
}

fn default_summary_tokens() -> u64 {
    SUMMARY_MAX_TOKENS
}

/// The arguments of one plain sub-model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptArgs {
    /// The prompt.
    pub prompt: String,
    /// Context appended to the prompt (text as is, anything else as JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// When the prompt does not fit the sub-model's window: split the context, ask
    /// piece by piece and combine the answers, instead of refusing the call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub split: bool,
    /// A JSON Schema the answer must match (`llm_query(…, schema=…)`): the answer is
    /// then the parsed JSON value, not text; a reply that does not match is an error
    /// naming the mismatch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
}

/// The question of the worked example every environment's prompt shows for a plan
/// (`map: {"ask": …}`): one text, so that the prompts and the tools' descriptions
/// show the same example.
pub const PLAN_EXAMPLE_ASK: &str = "How many failed payments are listed? Answer with a number.";

/// The arguments of `map_reduce`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanArgs {
    /// The plan, as JSON; its `input` names a store variable unless `text` is given.
    pub plan: Value,
    /// The input itself, when it is a value of the REPL rather than a store variable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// The arguments of `ctx_split`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitStepArgs {
    /// The variable to cut (`context` unless said), or a name for `text`.
    pub input: String,
    /// How, as a plan's `split`.
    pub split: Value,
    /// The input itself, when it is a value of the REPL rather than a store variable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// The arguments of `sub_rlm`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubRlmArgs {
    /// The nested run's task.
    pub query: String,
    /// Its context (stored as a variable and passed by reference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// Or an existing variable as its context, passed by reference without a copy
    /// (the micro-tools' `ctx_summarize` over a variable too large for one call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_key: Option<String>,
}

/// One external agent to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentJob {
    /// The agent's task.
    pub task: String,
    /// Keys of the variables its prompt names by file path.
    #[serde(default)]
    pub refs: Vec<String>,
}

impl HostCall {
    /// Reads a call from its wire parts. A malformed call is a [`HostError::RespondToModel`]
    /// that names the method and the argument at fault.
    pub fn parse(method: &str, args: Value) -> Result<Self, HostError> {
        let args = match args {
            Value::Null => Value::Object(serde_json::Map::new()),
            other => other,
        };
        let wire = serde_json::json!({ "method": method, "args": args });
        serde_json::from_value(wire).map_err(|error| {
            HostError::RespondToModel(format!("invalid call of {method}: {error}"))
        })
    }

    /// The helper's name as model code knows it (`llm_query`, `store_set`, …).
    pub fn method(&self) -> &'static str {
        match self {
            Self::LlmQuery(_) => "llm_query",
            Self::LlmQueryParallel { .. } => "llm_query_parallel",
            Self::Summarize { .. } => "summarize",
            Self::SubRlm(_) => "sub_rlm",
            Self::SubRlmParallel { .. } => "sub_rlm_parallel",
            Self::SpawnAgent(_) => "spawn_agent",
            Self::SpawnAgents { .. } => "spawn_agents",
            Self::RunPlan(_) => "run_plan",
            Self::PlanSplit(_) => "plan_split",
            Self::PlanFilter { .. } => "plan_filter",
            Self::PlanMap { .. } => "plan_map",
            Self::PlanReduce { .. } => "plan_reduce",
            Self::StoreSet { .. } => "store_set",
            Self::StoreSetRef { .. } => "store_set_ref",
            Self::StoreGet { .. } => "store_get",
            Self::StoreRef { .. } => "store_ref",
            Self::StoreList {} => "store_list",
            Self::StoreDelete { .. } => "store_delete",
        }
    }
}

/// What a host call gives back to model code: any JSON value (text, a list of answers,
/// a reference, `null`).
pub type HostReply = Value;

/// Why a host call gave no reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Shown to the model as an exception in its code; the run goes on. The message
    /// says what to do (split the context, the budget is spent, name the argument…).
    #[error("{0}")]
    RespondToModel(String),
    /// Something the model cannot fix broke (a store task panicked, the host is gone):
    /// the call fails in the model's code and the run ends with this error.
    #[error("{0}")]
    Fatal(String),
}

impl HostError {
    /// The text model code sees as the exception's message.
    pub fn message_for_model(&self) -> String {
        match self {
            Self::RespondToModel(message) => message.clone(),
            Self::Fatal(message) => format!("the run is ending: {message}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_parse_from_their_wire_form() {
        assert_eq!(
            HostCall::parse("llm_query", json!({"prompt": "hi"})).unwrap(),
            HostCall::LlmQuery(PromptArgs {
                prompt: "hi".into(),
                context: None,
                split: false,
                schema: None,
            })
        );
        assert_eq!(
            HostCall::parse("store_list", Value::Null).unwrap(),
            HostCall::StoreList {}
        );
        assert_eq!(
            HostCall::parse("summarize", json!({"text": "t"})).unwrap(),
            HostCall::Summarize {
                text: json!("t"),
                max_tokens: SUMMARY_MAX_TOKENS
            }
        );
        assert_eq!(
            HostCall::parse("spawn_agents", json!({"jobs": [{"task": "a"}]})).unwrap(),
            HostCall::SpawnAgents {
                jobs: vec![AgentJob {
                    task: "a".into(),
                    refs: vec![]
                }]
            }
        );
    }

    #[test]
    fn a_malformed_call_names_what_is_wrong() {
        let message = |method: &str, args: Value| match HostCall::parse(method, args) {
            Err(HostError::RespondToModel(message)) => message,
            other => panic!("{other:?}"),
        };
        let missing = message("llm_query", json!({}));
        assert!(
            missing.contains("llm_query") && missing.contains("`prompt`"),
            "{missing}"
        );
        let unknown = message("sub_rlm", json!({"query": "q", "contxt": "typo"}));
        assert!(unknown.contains("`contxt`"), "{unknown}");
        let wrong_type = message("store_delete", json!({"key": 7}));
        assert!(wrong_type.contains("invalid type"), "{wrong_type}");
        let nested = message("llm_query_parallel", json!({"prompts": [{"text": "x"}]}));
        assert!(nested.contains("`text`"), "{nested}");
        let method = message("rm_rf", json!({}));
        assert!(method.contains("rm_rf"), "{method}");
    }

    #[test]
    fn calls_round_trip_and_name_their_method() {
        let calls = [
            HostCall::LlmQuery(PromptArgs {
                prompt: "p".into(),
                context: Some(json!([1, 2])),
                split: true,
                schema: Some(json!({"type": "integer"})),
            }),
            HostCall::SubRlm(SubRlmArgs {
                query: "q".into(),
                context: None,
                context_key: Some("run-1-context".into()),
            }),
            HostCall::SpawnAgent(AgentJob {
                task: "t".into(),
                refs: vec!["chunk-1".into()],
            }),
            HostCall::StoreSet {
                key: "k".into(),
                value: json!({"a": 1}),
            },
            HostCall::StoreSetRef {
                key: "k2".into(),
                from: "run-1-context".into(),
            },
            HostCall::StoreRef { key: "k".into() },
            HostCall::StoreDelete { key: "k".into() },
            HostCall::StoreList {},
        ];
        for call in calls {
            let wire = serde_json::to_value(&call).unwrap();
            assert_eq!(wire["method"], call.method());
            let back = HostCall::parse(call.method(), wire["args"].clone()).unwrap();
            assert_eq!(back, call);
        }
    }
}

//! The `tools` environment: no code runs; the model calls a few bounded micro-tools
//! through the provider's tool calling — for small local models that cannot write
//! reliable code, and for users who allow no code execution at all.
//!
//! `ctx_length`, `ctx_grep`, `ctx_slice` and `ctx_summarize` work on `context` (the
//! latest context slot; `context_<i>` names earlier ones) and on any variable of the
//! store by key, reading the variable through the store's text reader and keeping only
//! what they return (`read`; each tool in `run`, whose errors the model is told).
//! `ctx_summarize` is a sub-model call at depth+1: the variable itself when it fits in
//! one call, else a nested run given the variable by reference (which works through it
//! with these same tools); at the maximum depth, its first 2000 characters.
//! A grep that matches nothing shows the few lines that share the most words with its
//! pattern (`nearest`). `final_answer` ends the run. Guards: an unknown tool or a bad argument is an error
//! result naming it (`catalog`); the same call with the same arguments a third time is
//! not run again — the result says it repeats an earlier one and gives that result;
//! `--tools` limits what is offered; under `--env plan` an answer before any plan has
//! given a result is refused once, and under `--env tools` one right after a failed plan
//! (`plan_gate`). No process is started.
//!
//! Models without native tool calling write calls as text (`text_protocol`).

mod catalog;
mod combinators;
mod lenient_json;
mod nearest;
mod plan_gate;
mod prompt;
mod read;
mod run;
mod text_protocol;

use std::collections::HashMap;
use std::sync::Arc;

pub use catalog::{
    parse_tool_list, MicroTool, UnknownTool, GREP_MAX_LINES, REDUCE_OPS, SLICE_MAX_CHARS,
    SUMMARY_FALLBACK_CHARS,
};
pub use text_protocol::{
    parse_calls as parse_text_calls, read_calls as read_text_calls,
    reply_schema as text_reply_schema, QuotedCall, TextCalls, PROTOCOL as TEXT_PROTOCOL,
};

use rlm_context_store::Store;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use self::catalog::{parse_args, FinalAnswerArgs};
use self::prompt::system_prompt;
use rlm_env::Host;
use rlm_env::PromptFeatures;
use rlm_env::{
    ContextSource, EnvConfig, EnvError, EnvKind, Environment, EnvironmentFactory, HistoryEntry,
    Started, ToolBox, ToolOutcome,
};
use rlm_env::{ToolCall, ToolSpec};

/// The same call with the same arguments is answered from memory from this time on.
const REPEAT_LIMIT: u32 = 3;

/// How the model's tool calls travel (`--tool-protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolProtocol {
    /// The provider's own tool calling (OpenAI `tools`/`tool_calls`, Anthropic
    /// `tool_use`/`tool_result`).
    #[default]
    Native,
    /// Calls written as text in the reply, results sent back as text
    /// ([`TEXT_PROTOCOL`]): for the `cli` provider and endpoints without tool calling.
    Text,
}

impl ToolProtocol {
    /// The name used on the command line and in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Text => "text",
        }
    }
}

/// Which tools are offered.
#[derive(Debug, Clone)]
pub struct ToolsOptions {
    /// `--tools`: the micro-tools offered (`final_answer` always is).
    pub tools: Vec<MicroTool>,
    /// `--env plan`: the model's one action is a plan (`ctx_map_reduce`), with the
    /// size of the context to plan by and the final answer.
    pub plan_only: bool,
}

impl Default for ToolsOptions {
    fn default() -> Self {
        Self {
            tools: MicroTool::ALL.to_vec(),
            plan_only: false,
        }
    }
}

impl ToolsOptions {
    /// The options of `--env plan`.
    pub fn plan() -> Self {
        Self {
            tools: MicroTool::PLAN.to_vec(),
            plan_only: true,
        }
    }

    fn kind(&self) -> EnvKind {
        if self.plan_only {
            EnvKind::Plan
        } else {
            EnvKind::Tools
        }
    }
}

/// Starts [`ToolsEnv`]s.
#[derive(Debug, Clone, Default)]
pub struct ToolsFactory {
    options: ToolsOptions,
}

impl ToolsFactory {
    /// A factory offering `options.tools`.
    pub fn new(options: ToolsOptions) -> Self {
        Self { options }
    }
}

#[async_trait::async_trait]
impl EnvironmentFactory for ToolsFactory {
    fn kind(&self) -> EnvKind {
        self.options.kind()
    }

    async fn start(&self, config: EnvConfig, host: Arc<dyn Host>) -> Result<Started, EnvError> {
        Ok(Started::Tools(Box::new(ToolsEnv::start(
            config,
            host,
            self.options.clone(),
        )?)))
    }
}

/// What the micro-tools work on (see the module docs).
pub struct ToolsEnv {
    config: EnvConfig,
    host: Arc<dyn Host>,
    store: Arc<Store>,
    tools: Vec<MicroTool>,
    /// `--env plan`: plans are the model's action.
    plan_only: bool,
    /// Context slots: the initial context, then one per later query that brought one.
    slots: Vec<ContextSource>,
    history: Vec<HistoryEntry>,
    /// Calls seen: (tool, canonical arguments) → how many times, and the result of the
    /// last one that ran (a call that timed out, then ran, must not be shown as the
    /// timeout on every repeat).
    seen: HashMap<(String, String), (u32, ToolOutcome)>,
    /// Whether an answer now would be a guess ([`plan_gate`]).
    gate: plan_gate::PlanGate,
}

impl ToolsEnv {
    /// Opens the store the tools read; no process is started.
    pub fn start(
        config: EnvConfig,
        host: Arc<dyn Host>,
        options: ToolsOptions,
    ) -> Result<Self, EnvError> {
        let store = Store::open(&config.data_dir).map_err(|e| EnvError::Start {
            env: EnvKind::Tools,
            command: "the micro-tools".to_owned(),
            message: format!("cannot open the store: {e}"),
        })?;
        Ok(Self {
            slots: config.context.iter().cloned().collect(),
            history: config.history.clone(),
            config,
            host,
            store: Arc::new(store),
            plan_only: options.plan_only,
            tools: options.tools,
            seen: HashMap::new(),
            gate: plan_gate::PlanGate::default(),
        })
    }
}

/// The answer in the arguments of a `final_answer` call (`None` when they do not
/// hold one), read as leniently as any call's.
pub fn final_answer_of(arguments: &str) -> Option<String> {
    parse_args::<FinalAnswerArgs>(MicroTool::FinalAnswer, arguments)
        .ok()
        .map(FinalAnswerArgs::into_text)
}

/// The key under which a call is remembered: its tool and its arguments with keys in
/// order (so `{"a":1,"b":2}` and `{"b":2,"a":1}` are the same call).
fn call_key(call: &ToolCall) -> (String, String) {
    let arguments = serde_json::from_str::<Value>(&call.arguments)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| call.arguments.trim().to_owned());
    (call.name.trim().to_owned(), arguments)
}

#[async_trait::async_trait]
impl Environment for ToolsEnv {
    fn kind(&self) -> EnvKind {
        if self.plan_only {
            EnvKind::Plan
        } else {
            EnvKind::Tools
        }
    }

    fn system_prompt(&self, features: PromptFeatures) -> String {
        if self.plan_only {
            prompt::plan_system_prompt(features)
        } else {
            system_prompt(features, &self.tools)
        }
    }

    async fn push_history(&mut self, entry: HistoryEntry) -> Result<(), EnvError> {
        self.history.push(entry);
        Ok(())
    }

    async fn next_query(
        &mut self,
        query: &str,
        context: Option<ContextSource>,
    ) -> Result<(), EnvError> {
        self.config.query = query.to_owned();
        self.slots.extend(context);
        Ok(())
    }

    async fn shutdown(&mut self) {}
}

#[async_trait::async_trait]
impl ToolBox for ToolsEnv {
    fn tools(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec()).collect()
    }

    /// With calls written as text, a reply is one call object of an offered tool:
    /// servers that constrain output then hold a small model to a valid call (under
    /// `--env plan` a valid plan).
    fn response_schema(&self) -> Option<Value> {
        Some(text_protocol::reply_schema(&self.tools))
    }

    /// Under `--env plan`, an answer before any plan has given a result or right after
    /// a failed plan; under `--env tools`, one right after a failed plan; once a run.
    fn refuse_answer(&mut self) -> Option<String> {
        if self.plan_only {
            self.gate.refuse_guess()
        } else {
            self.gate.refuse_after_failed_plan()
        }
    }

    async fn call_tool(&mut self, call: &ToolCall) -> Result<ToolOutcome, EnvError> {
        let tool = match call.name.parse::<MicroTool>() {
            Ok(tool) if self.tools.contains(&tool) => tool,
            Ok(tool) => {
                let offered: Vec<&str> = self.tools.iter().map(|t| t.name()).collect();
                return Ok(ToolOutcome::error(format!(
                    "the tool `{tool}` is not offered in this run (--tools); use one of: {}",
                    offered.join(", ")
                )));
            }
            Err(unknown) => return Ok(ToolOutcome::error(unknown.to_string())),
        };
        let key = call_key(call);
        let count = self.seen.get(&key).map_or(0, |(count, _)| *count) + 1;
        if let Some((seen, earlier)) = self.seen.get_mut(&key) {
            *seen = count;
            if count >= REPEAT_LIMIT {
                return Ok(ToolOutcome {
                    content: format!(
                        "This call repeats an earlier call with the same arguments ({count} times now), so it was not run again. Its result was:\n{}\nTry another tool or other arguments, or answer.",
                        earlier.content
                    ),
                    is_error: earlier.is_error,
                    final_answer: None,
                    repeated: true,
                });
            }
        }
        let outcome =
            self.run(tool, &call.arguments)
                .await
                .map_err(|error| EnvError::HostFatal {
                    env: EnvKind::Tools,
                    message: error.to_string(),
                })?;
        match tool {
            MicroTool::MapReduce => self.gate.saw_plan(&outcome),
            // A plan built from the step tools ends in ctx_reduce: its result is a
            // plan's result (a refused plan rebuilt from the steps must not have its
            // answer refused as a guess).
            MicroTool::Reduce if !outcome.is_error => self.gate.saw_plan(&outcome),
            _ => {}
        }
        self.seen.insert(key, (count, outcome.clone()));
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlm_context_store::SetOptions;
    use rlm_env::ContextShape;
    use rlm_env::{HostCall, HostError};
    use serde_json::json;
    use std::time::Duration;

    /// Answers llm_query with the prompt and the context's length.
    struct EchoHost;

    #[async_trait::async_trait]
    impl Host for EchoHost {
        async fn call(&self, call: HostCall) -> Result<Value, HostError> {
            match call {
                HostCall::LlmQuery(args) => Ok(json!(format!(
                    "{} over {} chars",
                    args.prompt,
                    args.context
                        .and_then(|c| c.as_str().map(|s| s.chars().count()))
                        .unwrap_or(0)
                ))),
                HostCall::SubRlm(args) => Ok(json!(format!(
                    "nested run over {} for {}",
                    args.context_key.unwrap_or_default(),
                    args.query
                ))),
                other => Err(HostError::RespondToModel(format!("no {}", other.method()))),
            }
        }
    }

    fn env_with(text: &str, depth: u32, tools: Vec<MicroTool>) -> (tempfile::TempDir, ToolsEnv) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .set("ctx", json!(text), SetOptions::default())
            .unwrap();
        store
            .set(
                "notes",
                json!({"items": ["alpha", "beta"]}),
                SetOptions::default(),
            )
            .unwrap();
        let config = EnvConfig {
            data_dir: dir.path().to_owned(),
            context: Some(ContextSource {
                shape: ContextShape::Single,
                files: vec![store.path_of("ctx").unwrap()],
                keys: vec!["ctx".into()],
                chunk_chars: 100,
                chars: None,
                max_char: None,
                referenced: Vec::new(),
            }),
            query: "q".into(),
            history: Vec::new(),
            exec_timeout: Duration::from_secs(5),
            depth,
            max_depth: 2,
            sub_context_chars: 1000,
            lazy_above: None,
        };
        let env = ToolsEnv::start(
            config,
            Arc::new(EchoHost),
            ToolsOptions {
                tools,
                plan_only: false,
            },
        )
        .unwrap();
        (dir, env)
    }

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: arguments.to_string(),
        }
    }

    #[tokio::test]
    async fn each_tool_answers_within_its_bounds() {
        let text = format!(
            "{}\nthe NEEDLE is here\n{}",
            "x".repeat(5000),
            "y".repeat(5000)
        );
        let (_dir, mut env) = env_with(&text, 0, MicroTool::ALL.to_vec());
        let length = env
            .call_tool(&call("ctx_length", json!({"variable": "context"})))
            .await
            .unwrap();
        assert_eq!(
            length.content,
            "context: 10020 characters, 3 lines (10020 bytes)"
        );
        let grep = env
            .call_tool(&call(
                "ctx_grep",
                json!({"variable": "context", "pattern": "needle"}),
            ))
            .await
            .unwrap();
        assert!(
            grep.content
                .starts_with("1 line of context matches \"needle\""),
            "{}",
            grep.content
        );
        assert!(
            grep.content
                .contains("offset 5001 (line 2): the NEEDLE is here"),
            "{}",
            grep.content
        );
        let slice = env
            .call_tool(&call(
                "ctx_slice",
                json!({"variable": "context", "start": 5001, "end": 9000}),
            ))
            .await
            .unwrap();
        assert!(
            slice.content.starts_with(
                "context[5001:7001] (the first 2000 of the 3999 characters asked for):"
            ),
            "{}",
            slice.content
        );
        assert!(slice.content.contains("\nthe NEEDLE is here\n"));
        // A range past the end shows what there is, and says no more was cut off.
        let tail = env
            .call_tool(&call(
                "ctx_slice",
                json!({"variable": "context", "start": 9000, "end": 20000}),
            ))
            .await
            .unwrap();
        assert!(
            tail.content.starts_with("context[9000:10020]:\n"),
            "{}",
            tail.content
        );
        let summary = env
            .call_tool(&call(
                "ctx_summarize",
                json!({"variable": "notes", "instruction": "list the items"}),
            ))
            .await
            .unwrap();
        assert!(
            summary.content.contains("list the items over"),
            "{}",
            summary.content
        );
        let done = env
            .call_tool(&call("final_answer", json!({"answer": "here"})))
            .await
            .unwrap();
        assert_eq!(done.final_answer.as_deref(), Some("here"));
    }

    #[tokio::test]
    async fn a_grep_for_a_comparison_that_finds_nothing_names_the_where_filter() {
        // A comparison written as a pattern matches no text: the grep says which filter
        // compares, from the pattern alone (the run's task is never read).
        let (_dir, mut env) = env_with(
            "GET /index.html status=200 bytes=2004\n",
            0,
            MicroTool::ALL.to_vec(),
        );
        env.config.query = "How many requests sent more than 2000 bytes (bytes > 2000)?".into();
        let grepped = env
            .call_tool(&call(
                "ctx_grep",
                json!({"variable": "context", "pattern": "bytes > 2000"}),
            ))
            .await
            .unwrap();
        assert!(
            grepped.content.starts_with(
                r#"no line of context matches "bytes > 2000": a pattern matches text"#
            ) && grepped
                .content
                .contains(r#"the filter {"where": "bytes > 2000"} of ctx_map_reduce"#)
                && !grepped.content.contains("task"),
            "{}",
            grepped.content
        );
        // A grep of the field's text is only its lines, whatever the task says.
        let text_of_the_field = env
            .call_tool(&call(
                "ctx_grep",
                json!({"variable": "context", "pattern": "bytes=2004"}),
            ))
            .await
            .unwrap();
        assert!(
            text_of_the_field
                .content
                .starts_with("1 line of context matches")
                && !text_of_the_field.content.contains("ctx_map_reduce"),
            "{}",
            text_of_the_field.content
        );
        // Without ctx_map_reduce there is no filter to name.
        let (_dir, mut env) = env_with(
            "GET /index.html status=200 bytes=2004\n",
            0,
            vec![MicroTool::Grep, MicroTool::FinalAnswer],
        );
        let grepped = env
            .call_tool(&call(
                "ctx_grep",
                json!({"variable": "context", "pattern": "bytes > 2000"}),
            ))
            .await
            .unwrap();
        assert!(
            !grepped.content.contains("ctx_map_reduce"),
            "{}",
            grepped.content
        );
    }

    #[tokio::test]
    async fn a_grep_that_matches_nothing_shows_the_lines_sharing_the_most_words() {
        let (_dir, mut env) = env_with(
            "Intro.\nOne of the spare rotation codes for north-gate-05 is: 123\nThe end.\n",
            0,
            MicroTool::ALL.to_vec(),
        );
        let grepped = env
            .call_tool(&call(
                "ctx_grep",
                json!({"variable": "context", "pattern": "spare rotation code for north-gate-05"}),
            ))
            .await
            .unwrap();
        assert!(!grepped.is_error);
        assert_eq!(
            grepped.content,
            "no line of context matches \"spare rotation code for north-gate-05\"\nThe line that shares the most words with the pattern (case and plurals folded):\noffset 7 (line 2): One of the spare rotation codes for north-gate-05 is: 123"
        );
    }

    #[tokio::test]
    async fn a_variable_too_large_for_one_call_is_summarized_by_a_nested_run() {
        // sub_context_chars is 1000: `notes` fits, `context` (6000 characters) does not.
        let (_dir, mut env) = env_with(&"x".repeat(6_000), 0, MicroTool::ALL.to_vec());
        let small = env
            .call_tool(&call(
                "ctx_summarize",
                json!({"variable": "notes", "instruction": "list the items"}),
            ))
            .await
            .unwrap();
        assert!(
            small
                .content
                .starts_with("summary of notes:\nlist the items over"),
            "{}",
            small.content
        );
        let large = env
            .call_tool(&call(
                "ctx_summarize",
                json!({"variable": "context", "instruction": "find the code"}),
            ))
            .await
            .unwrap();
        assert_eq!(
            large.content,
            "summary of context (by a nested run over all of it):\nnested run over ctx for find the code"
        );
    }

    #[tokio::test]
    async fn bad_calls_are_errors_that_name_what_is_wrong() {
        let (_dir, mut env) = env_with("text", 0, MicroTool::ALL.to_vec());
        let unknown = env.call_tool(&call("ctx_delete", json!({}))).await.unwrap();
        assert!(unknown.is_error && unknown.content.contains("unknown tool `ctx_delete`"));
        let missing = env
            .call_tool(&call("ctx_grep", json!({"variable": "context"})))
            .await
            .unwrap();
        assert!(
            missing.is_error && missing.content.contains("`pattern`"),
            "{}",
            missing.content
        );
        let regex = env
            .call_tool(&call(
                "ctx_grep",
                json!({"variable": "context", "pattern": "(unclosed"}),
            ))
            .await
            .unwrap();
        assert!(
            regex.is_error && regex.content.contains("not a valid regular expression"),
            "{}",
            regex.content
        );
        let variable = env
            .call_tool(&call("ctx_length", json!({"variable": "nope"})))
            .await
            .unwrap();
        assert!(variable.is_error && variable.content.contains("no variable named \"nope\""));
        let backwards = env
            .call_tool(&call(
                "ctx_slice",
                json!({"variable": "context", "start": 5, "end": 1}),
            ))
            .await
            .unwrap();
        // An end before the start is a length (a slip models make).
        assert!(
            !backwards.is_error
                && backwards
                    .content
                    .starts_with("context[5:5] (end 1 is before start 5: read as a length)"),
            "{}",
            backwards.content
        );
        let empty = env
            .call_tool(&call(
                "ctx_slice",
                json!({"variable": "context", "start": 2, "end": 2}),
            ))
            .await
            .unwrap();
        assert!(empty.is_error, "{}", empty.content);
        assert!(
            empty.content.contains(
                "the range 2..2 is empty: end must be after start (for example end = 502)"
            ),
            "{}",
            empty.content
        );
        let beyond = env
            .call_tool(&call(
                "ctx_slice",
                json!({"variable": "context", "start": 100, "end": 200}),
            ))
            .await
            .unwrap();
        assert_eq!(beyond.content, "context[100:100] is empty: the variable is shorter than that (ctx_length tells its size)");
    }

    #[tokio::test]
    async fn a_third_identical_call_is_answered_from_memory() {
        let (_dir, mut env) = env_with("one\ntwo", 0, MicroTool::ALL.to_vec());
        let first = env
            .call_tool(&call("ctx_length", json!({"variable": "context"})))
            .await
            .unwrap();
        let second = env
            .call_tool(&call("ctx_length", json!({"variable": "context"})))
            .await
            .unwrap();
        assert_eq!(first, second);
        let third = env
            .call_tool(&call("ctx_length", json!({"variable": "context"})))
            .await
            .unwrap();
        assert!(
            third.content.starts_with(
                "This call repeats an earlier call with the same arguments (3 times now)"
            ),
            "{}",
            third.content
        );
        assert!(third.content.contains(&first.content));
    }

    #[tokio::test]
    async fn a_repeat_is_answered_with_the_last_result_that_ran() {
        let (_dir, mut env) = env_with("one\ntwo", 0, MicroTool::ALL.to_vec());
        let length = || call("ctx_length", json!({"variable": "later"}));
        let missing = env.call_tool(&length()).await.unwrap();
        assert!(missing.is_error, "{}", missing.content);
        // The variable appears between the first and the second call.
        let store = Store::open(&env.config.data_dir).unwrap();
        store
            .set("later", json!("abc"), SetOptions::default())
            .unwrap();
        let found = env.call_tool(&length()).await.unwrap();
        assert!(!found.is_error, "{}", found.content);
        let third = env.call_tool(&length()).await.unwrap();
        assert!(third.content.contains(&found.content), "{}", third.content);
        assert!(!third.is_error);
    }

    #[tokio::test]
    async fn the_allow_list_and_the_depth_hold() {
        let (_dir, mut env) = env_with(
            "short text",
            2,
            vec![MicroTool::Summarize, MicroTool::FinalAnswer],
        );
        let names: Vec<String> = env.tools().into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["ctx_summarize", "final_answer"]);
        let grep = env
            .call_tool(&call(
                "ctx_grep",
                json!({"variable": "context", "pattern": "x"}),
            ))
            .await
            .unwrap();
        assert!(
            grep.is_error && grep.content.contains("not offered"),
            "{}",
            grep.content
        );
        let summary = env
            .call_tool(&call(
                "ctx_summarize",
                json!({"variable": "context", "instruction": "x"}),
            ))
            .await
            .unwrap();
        assert!(
            summary.content.contains("maximum depth") && summary.content.ends_with("short text"),
            "{}",
            summary.content
        );
    }
}

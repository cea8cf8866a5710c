//! The `tools` environment: no code runs; the model calls a few bounded micro-tools
//! through the provider's tool calling — for small local models that cannot write
//! reliable code, and for users who allow no code execution at all.
//!
//! `ctx_length`, `ctx_grep`, `ctx_slice` and `ctx_summarize` work on `context` (the
//! latest context slot; `context_<i>` names earlier ones) and on any variable of the
//! store by key, reading the variable file as a stream and keeping only what they
//! return ([`read`]). `ctx_summarize` is a sub-model call at depth+1: the variable itself
//! when it fits in one call, else a nested run given the variable by reference (which
//! works through it with these same tools); at the maximum depth, its first 2000
//! characters. `final_answer` ends the run. Guards: an unknown tool or a bad
//! argument is an error result naming it ([`catalog`]); the same call with the same
//! arguments a third time is not run again — the result says it repeats an earlier one
//! and gives that result; `--tools` limits what is offered. No process is started.
//!
//! Models without native tool calling write calls as text ([`text_protocol`]).

mod catalog;
mod read;
mod text_protocol;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

pub use catalog::{
    parse_tool_list, MicroTool, UnknownTool, GREP_MAX_LINES, SLICE_MAX_CHARS,
    SUMMARY_FALLBACK_CHARS,
};
pub use text_protocol::{parse_calls as parse_text_calls, PROTOCOL as TEXT_PROTOCOL};

use regex::RegexBuilder;
use rlm_context_store::Store;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use self::catalog::{
    parse_args, FinalAnswerArgs, GrepArgs, SliceArgs, SummarizeArgs, VariableArgs,
};
use self::read::{grep, head, measure, render_hit, slice, Source};
use rlm_env::PromptFeatures;
use rlm_env::{
    ContextSource, EnvConfig, EnvError, EnvKind, Environment, EnvironmentFactory, HistoryEntry,
    Started, ToolBox, ToolOutcome,
};
use rlm_env::{Host, HostCall, HostError, PromptArgs, SubRlmArgs};
use rlm_env::{ToolCall, ToolSpec};

/// The same call with the same arguments is answered from memory from this time on.
const REPEAT_LIMIT: u32 = 3;

/// The system prompt of the micro-tools: what each does, and the delegation rules of
/// the design they come from (cheapest first: grep, slice, then summarize). Short on
/// purpose: the models this environment is for are small.
pub(crate) fn system_prompt(features: PromptFeatures, tools: &[MicroTool]) -> String {
    let mut text = String::from(
        "You answer a task about a context that is far too large to read at once. The context is NOT in this conversation: you read it with tools, and each tool's result comes back in the next message.\n\nTools:\n",
    );
    for tool in tools {
        let _ = writeln!(text, "- {}: {}", tool.signature(), tool.spec().description);
    }
    text.push_str("\nRules:\n- `variable` is `context` (the task's context) or the key of a stored variable.\n");
    let offers = |tool| tools.contains(&tool);
    if offers(MicroTool::Grep) {
        text.push_str("- Cheapest first: ctx_grep to find the lines that matter (it gives line numbers and character offsets)");
        if offers(MicroTool::Slice) {
            text.push_str(", then ctx_slice to read around an offset");
        }
        if offers(MicroTool::Summarize) {
            text.push_str(", and ctx_summarize only when grep and slice are not enough");
        }
        text.push_str(".\n");
    }
    if offers(MicroTool::Summarize) {
        let _ = writeln!(
            text,
            "- ctx_summarize hands a variable of up to about {} characters to a sub-model, and a larger one to a nested run that reads it with these tools.",
            features.sub_context_chars
        );
    }
    text.push_str(
        "- Never repeat a call with the same arguments: read the result you already have.\n",
    );
    text.push_str("- When you know the answer, call final_answer(answer) alone, or write FINAL(…) on its own line with the answer inside the parentheses.\n");
    if features.text_tool_protocol {
        text.push('\n');
        text.push_str(text_protocol::PROTOCOL);
    }
    text
}

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
}

impl Default for ToolsOptions {
    fn default() -> Self {
        Self {
            tools: MicroTool::ALL.to_vec(),
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
        EnvKind::Tools
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
    /// Context slots: the initial context, then one per later query that brought one.
    slots: Vec<ContextSource>,
    history: Vec<HistoryEntry>,
    /// Calls seen: (tool, canonical arguments) → how many times, and the first result.
    seen: HashMap<(String, String), (u32, ToolOutcome)>,
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
            tools: options.tools,
            seen: HashMap::new(),
        })
    }

    /// The variable a tool names: `context`, `context_<i>`, or a store key.
    fn source(&self, variable: &str) -> Result<Source, String> {
        let variable = variable.trim();
        let slot = match variable {
            "context" => self.slots.last(),
            name => name
                .strip_prefix("context_")
                .and_then(|i| i.parse::<usize>().ok())
                .and_then(|i| self.slots.get(i)),
        };
        if let Some(slot) = slot {
            return Ok(Source::Files(slot.files.clone()));
        }
        if variable == "context" {
            return Err("there is no context in this run".to_owned());
        }
        if self.store.has(variable) {
            Ok(Source::Key(variable.to_owned()))
        } else {
            Err(format!(
                "no variable named {variable:?}. The task's context is the variable \"context\": call again with \"variable\": \"context\" (or the key of a stored variable)"
            ))
        }
    }

    /// The one store variable that holds `variable`, when there is one (a context slot
    /// of a single file whose key is known, or a store key): what a nested run can be
    /// given by reference.
    fn key_of(&self, variable: &str, source: &Source) -> Option<String> {
        match source {
            Source::Key(key) => Some(key.clone()),
            Source::Files(files) => {
                let slot = match variable.trim() {
                    "context" => self.slots.last(),
                    name => name
                        .strip_prefix("context_")
                        .and_then(|i| i.parse::<usize>().ok())
                        .and_then(|i| self.slots.get(i)),
                }?;
                (files.len() == 1 && slot.keys.len() == 1).then(|| slot.keys[0].clone())
            }
        }
    }

    /// Store reads, off the async threads.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Store) -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || work(&store))
            .await
            .map_err(|e| format!("reading the variable failed: {e}"))?
    }

    /// Runs one call (no repeat check).
    async fn run(&mut self, tool: MicroTool, arguments: &str) -> Result<ToolOutcome, HostError> {
        let outcome = match tool {
            MicroTool::Length => self.length(arguments).await,
            MicroTool::Grep => self.grep(arguments).await,
            MicroTool::Slice => self.slice(arguments).await,
            MicroTool::Summarize => return self.summarize(arguments).await,
            MicroTool::FinalAnswer => {
                return Ok(match parse_args::<FinalAnswerArgs>(tool, arguments) {
                    Ok(args) => ToolOutcome {
                        content: "Answer recorded.".to_owned(),
                        is_error: false,
                        final_answer: Some(args.into_text()),
                    },
                    Err(message) => ToolOutcome::error(message),
                })
            }
        };
        Ok(match outcome {
            Ok(content) => ToolOutcome::result(content),
            Err(message) => ToolOutcome::error(message),
        })
    }

    async fn length(&self, arguments: &str) -> Result<String, String> {
        let args: VariableArgs = parse_args(MicroTool::Length, arguments)?;
        let source = self.source(&args.variable)?;
        let m = self.blocking(move |store| measure(store, &source)).await?;
        Ok(format!(
            "{}: {} characters, {} line{} ({} bytes)",
            args.variable,
            m.chars,
            m.lines,
            if m.lines == 1 { "" } else { "s" },
            m.bytes
        ))
    }

    async fn grep(&self, arguments: &str) -> Result<String, String> {
        let args: GrepArgs = parse_args(MicroTool::Grep, arguments)?;
        let regex = RegexBuilder::new(&args.pattern)
            .case_insensitive(true)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| {
                format!(
                    "ctx_grep: the pattern {:?} is not a valid regular expression: {e}",
                    args.pattern
                )
            })?;
        let source = self.source(&args.variable)?;
        let (hits, total) = self
            .blocking(move |store| grep(store, &source, &regex, GREP_MAX_LINES))
            .await?;
        if hits.is_empty() {
            return Ok(format!(
                "no line of {} matches {:?}",
                args.variable, args.pattern
            ));
        }
        let mut text = format!(
            "{total} {} of {} {} {:?}{}:",
            if total == 1 { "line" } else { "lines" },
            args.variable,
            if total == 1 { "matches" } else { "match" },
            args.pattern,
            if total > hits.len() as u64 {
                format!("; the first {} are shown", hits.len())
            } else {
                String::new()
            }
        );
        for hit in &hits {
            text.push('\n');
            text.push_str(&render_hit(hit));
        }
        Ok(text)
    }

    async fn slice(&self, arguments: &str) -> Result<String, String> {
        let args: SliceArgs = parse_args(MicroTool::Slice, arguments)?;
        if args.end <= args.start {
            return Err(format!(
                "ctx_slice: the range {}..{} is empty: end must be after start (for example end = {})",
                args.start,
                args.end,
                args.start.saturating_add(500)
            ));
        }
        let end = args.end.min(args.start.saturating_add(SLICE_MAX_CHARS));
        let source = self.source(&args.variable)?;
        let start = args.start;
        let text = self
            .blocking(move |store| slice(store, &source, start, end))
            .await?;
        let shown = text.chars().count() as u64;
        let mut header = format!("{}[{}:{}]", args.variable, start, start + shown);
        if args.end - args.start > SLICE_MAX_CHARS {
            header.push_str(&format!(
                " (cut to {SLICE_MAX_CHARS} characters; ask for the next range with start={})",
                start + shown
            ));
        }
        if shown == 0 {
            header.push_str(
                " is empty: the variable is shorter than that (ctx_length tells its size)",
            );
            return Ok(header);
        }
        Ok(format!("{header}:\n{text}"))
    }

    async fn summarize(&self, arguments: &str) -> Result<ToolOutcome, HostError> {
        let args: SummarizeArgs = match parse_args(MicroTool::Summarize, arguments) {
            Ok(args) => args,
            Err(message) => return Ok(ToolOutcome::error(message)),
        };
        let source = match self.source(&args.variable) {
            Ok(source) => source,
            Err(message) => return Ok(ToolOutcome::error(message)),
        };
        if self.config.depth >= self.config.max_depth {
            let read = self
                .blocking(move |store| head(store, &source, SUMMARY_FALLBACK_CHARS))
                .await;
            return Ok(match read {
                Ok((text, _)) => ToolOutcome::result(format!(
                    "(at the maximum depth no sub-model is asked) the first {SUMMARY_FALLBACK_CHARS} characters of {}:\n{text}",
                    args.variable
                )),
                Err(message) => ToolOutcome::error(message),
            });
        }
        let budget = (self.config.sub_context_chars as u64)
            .saturating_sub(args.instruction.chars().count() as u64 + 64);
        let key = self.key_of(&args.variable, &source);
        let read = self
            .blocking(move |store| head(store, &source, budget))
            .await;
        let (text, cut) = match read {
            Ok(read) => read,
            Err(message) => return Ok(ToolOutcome::error(message)),
        };
        // Too large for one call: a nested run one level deeper works through the whole
        // variable with these same tools, given it by reference.
        let (call, note) = match (cut, key) {
            (true, Some(key)) => (
                HostCall::SubRlm(SubRlmArgs {
                    query: args.instruction.clone(),
                    context: None,
                    context_key: Some(key),
                }),
                " (by a nested run over all of it)".to_owned(),
            ),
            (true, None) => (
                HostCall::LlmQuery(PromptArgs {
                    prompt: args.instruction.clone(),
                    context: Some(Value::String(text)),
                }),
                format!(" (of its first {budget} characters: it is longer)"),
            ),
            (false, _) => (
                HostCall::LlmQuery(PromptArgs {
                    prompt: args.instruction.clone(),
                    context: Some(Value::String(text)),
                }),
                String::new(),
            ),
        };
        match self.host.call(call).await {
            Ok(answer) => {
                let answer = match answer {
                    Value::String(text) => text,
                    other => other.to_string(),
                };
                Ok(ToolOutcome::result(format!(
                    "summary of {}{note}:\n{answer}",
                    args.variable
                )))
            }
            Err(HostError::RespondToModel(message)) => Ok(ToolOutcome::error(format!(
                "ctx_summarize failed: {message}"
            ))),
            Err(fatal @ HostError::Fatal(_)) => Err(fatal),
        }
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
        EnvKind::Tools
    }

    fn system_prompt(&self, features: PromptFeatures) -> String {
        system_prompt(features, &self.tools)
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
        self.seen
            .entry(key)
            .or_insert_with(|| (count, outcome.clone()));
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlm_context_store::SetOptions;
    use rlm_env::ContextShape;
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
        let env = ToolsEnv::start(config, Arc::new(EchoHost), ToolsOptions { tools }).unwrap();
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
            slice
                .content
                .starts_with("context[5001:7001] (cut to 2000 characters"),
            "{}",
            slice.content
        );
        assert!(slice.content.contains("\nthe NEEDLE is here\n"));
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
        assert!(backwards.is_error);
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

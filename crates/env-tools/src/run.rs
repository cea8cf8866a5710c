//! Running one micro-tool call: the variable it names, its read off the async
//! threads, and the text the model gets back.
//!
//! Everything that goes wrong here is told to the model as an error result
//! ([`ToolError`]) and the run goes on; only a fatal host error from `ctx_summarize`'s
//! sub-model call ends it ([`HostError::Fatal`]).

use regex::{Regex, RegexBuilder};
use rlm_context_store::{Store, StoreError};
use serde_json::{json, Value};
use std::sync::Arc;

use crate::catalog::{
    parse_args, ArgsError, FinalAnswerArgs, GrepArgs, MapReduceArgs, MicroTool, SliceArgs,
    SummarizeArgs, VariableArgs, GREP_MAX_LINES, SLICE_MAX_CHARS, SUMMARY_FALLBACK_CHARS,
};
use crate::combinators::StepError;
use crate::read::{found_lines, grep, Source};
use crate::ToolsEnv;
use rlm_env::{HostCall, HostError, PlanArgs, PromptArgs, SubRlmArgs, ToolOutcome};

/// Why a call could not be answered: the model is told, the run goes on.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not fit the tool.
    #[error(transparent)]
    Arguments(#[from] ArgsError),
    /// `context` was named in a run without one.
    #[error("there is no context in this run")]
    NoContext,
    /// The variable named is neither a context slot nor a stored key.
    #[error("no variable named {variable:?}. The task's context is the variable \"context\": call again with \"variable\": \"context\" (or the key of a stored variable)")]
    NoVariable {
        /// The name the model gave.
        variable: String,
    },
    /// `ctx_grep`'s pattern does not compile.
    #[error("ctx_grep: the pattern {pattern:?} is not a valid regular expression: {error}")]
    Pattern {
        /// The pattern the model gave.
        pattern: String,
        /// What the regex parser said (in the message, so not a source).
        error: regex::Error,
    },
    /// `ctx_slice` was asked for an empty or backwards range.
    #[error("ctx_slice: the range {start}..{end} is empty: end must be after start (for example end = {})", start.saturating_add(500))]
    EmptyRange {
        /// The first character asked for.
        start: u64,
        /// The end asked for.
        end: u64,
    },
    /// The store could not read the variable (it went away, its file is damaged, or
    /// the file it refers to changed: the store's message says what to do).
    #[error(transparent)]
    Read(#[from] StoreError),
    /// The blocking task that read the variable panicked or was cancelled.
    #[error("reading the variable failed: {error}")]
    Interrupted {
        /// What the runtime said (in the message, so not a source).
        error: tokio::task::JoinError,
    },
}

impl ToolsEnv {
    /// The variable a tool names: `context`, `context_<i>`, or a store key.
    fn source(&self, variable: &str) -> Result<Source, ToolError> {
        let variable = variable.trim();
        if let Some(slot) = self.slot(variable) {
            return Ok(Source::Files(slot.files.clone()));
        }
        if variable == "context" {
            return Err(ToolError::NoContext);
        }
        if self.store.has(variable) {
            Ok(Source::Key(variable.to_owned()))
        } else {
            Err(ToolError::NoVariable {
                variable: variable.to_owned(),
            })
        }
    }

    /// The context slot `variable` names (`context`: the latest; `context_<i>`).
    fn slot(&self, variable: &str) -> Option<&rlm_env::ContextSource> {
        match variable.trim() {
            "context" => self.slots.last(),
            name => name
                .strip_prefix("context_")
                .and_then(|i| i.parse::<usize>().ok())
                .and_then(|i| self.slots.get(i)),
        }
    }

    /// The one store variable that holds `variable`, when there is one (a context slot
    /// of a single file whose key is known, or a store key): what a nested run can be
    /// given by reference.
    fn key_of(&self, variable: &str, source: &Source) -> Option<String> {
        match source {
            Source::Key(key) => Some(key.clone()),
            Source::Files(files) => {
                let slot = self.slot(variable)?;
                (files.len() == 1 && slot.keys.len() == 1).then(|| slot.keys[0].clone())
            }
        }
    }

    /// Reads the text of `source` with `work`, off the async threads.
    async fn read<T: Send + 'static>(
        &self,
        source: Source,
        work: impl FnOnce(&rlm_context_store::TextReader<'_>) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, ToolError> {
        let store: Arc<Store> = Arc::clone(&self.store);
        let read = tokio::task::spawn_blocking(move || work(&source.reader(&store)?))
            .await
            .map_err(|error| ToolError::Interrupted { error })?;
        Ok(read?)
    }

    /// Runs one call (no repeat check).
    pub(crate) async fn run(
        &mut self,
        tool: MicroTool,
        arguments: &str,
    ) -> Result<ToolOutcome, HostError> {
        let outcome = match tool {
            MicroTool::Length => self.length(arguments).await,
            MicroTool::Grep => self.grep(arguments).await,
            MicroTool::Slice => self.slice(arguments).await,
            MicroTool::Summarize => return self.summarize(arguments).await,
            MicroTool::MapReduce => return self.map_reduce(arguments).await,
            MicroTool::Split | MicroTool::Filter | MicroTool::Map | MicroTool::Reduce => {
                return self.step(tool, arguments).await
            }
            MicroTool::FinalAnswer => {
                return Ok(match parse_args::<FinalAnswerArgs>(tool, arguments) {
                    Ok(args) => ToolOutcome {
                        content: "Answer recorded.".to_owned(),
                        is_error: false,
                        final_answer: Some(args.into_text()),
                        repeated: false,
                    },
                    Err(error) => ToolOutcome::error(error.to_string()),
                })
            }
        };
        Ok(match outcome {
            Ok(content) => ToolOutcome::result(content),
            Err(error) => ToolOutcome::error(error.to_string()),
        })
    }

    async fn length(&self, arguments: &str) -> Result<String, ToolError> {
        let args: VariableArgs = parse_args(MicroTool::Length, arguments)?;
        let source = self.source(&args.variable)?;
        let m = self.read(source, |text| text.measure()).await?;
        Ok(format!(
            "{}: {} characters, {} line{} ({} bytes)",
            args.variable,
            m.chars,
            m.lines,
            if m.lines == 1 { "" } else { "s" },
            m.bytes
        ))
    }

    async fn grep(&self, arguments: &str) -> Result<String, ToolError> {
        let args: GrepArgs = parse_args(MicroTool::Grep, arguments)?;
        let regex = compile(&args.pattern)?;
        let source = self.source(&args.variable)?;
        let (hits, count) = self
            .read(source, move |text| grep(text, &regex, GREP_MAX_LINES))
            .await?;
        if hits.is_empty() {
            // A second pass, only when nothing matched: the lines nearest the pattern.
            let pattern = args.pattern.clone();
            let near = self
                .read(self.source(&args.variable)?, move |text| {
                    crate::nearest::nearest(text, &pattern)
                })
                .await?;
            return Ok(format!(
                "no line of {} matches {:?}{}{}",
                args.variable,
                args.pattern,
                self.condition_instead_of_pattern(&args.pattern),
                crate::nearest::note(&near),
            ));
        }
        Ok(found_lines(&args.variable, &args.pattern, &hits, count))
    }

    async fn slice(&self, arguments: &str) -> Result<String, ToolError> {
        let args: SliceArgs = parse_args(MicroTool::Slice, arguments)?;
        // An end before the start is read as a length: `start: 2300, end: 345` asks
        // for the 345 characters after a grep's offset (a slip models make, and no
        // other reading of it is a range).
        let as_length = args.end > 0 && args.end < args.start;
        let asked_end = if as_length {
            args.start.saturating_add(args.end)
        } else {
            args.end
        };
        if asked_end <= args.start {
            return Err(ToolError::EmptyRange {
                start: args.start,
                end: args.end,
            });
        }
        let end = asked_end.min(args.start.saturating_add(SLICE_MAX_CHARS));
        let source = self.source(&args.variable)?;
        let start = args.start;
        let text = self
            .read(source, move |text| text.slice(start, end))
            .await?;
        let shown = text.chars().count() as u64;
        let mut header = format!("{}[{}:{}]", args.variable, start, start + shown);
        if as_length {
            header.push_str(&format!(
                " (end {} is before start {start}: read as a length)",
                args.end
            ));
        }
        // Said as a fact, not as a next step: worded "ask for the next range with
        // start=…", the note led small models to page through the whole context
        // 2 000 characters a call after a grep had shown them what they looked for.
        // (A variable that ends sooner says so in the header's own range.)
        if asked_end - args.start > SLICE_MAX_CHARS && shown == SLICE_MAX_CHARS {
            header.push_str(&format!(
                " (the first {SLICE_MAX_CHARS} of the {} characters asked for)",
                asked_end - args.start
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
            Err(error) => return Ok(ToolOutcome::error(error.to_string())),
        };
        let source = match self.source(&args.variable) {
            Ok(source) => source,
            Err(error) => return Ok(ToolOutcome::error(error.to_string())),
        };
        if self.config.depth >= self.config.max_depth {
            let read = self
                .read(source, |text| text.head(SUMMARY_FALLBACK_CHARS))
                .await;
            return Ok(match read {
                Ok((text, _)) => ToolOutcome::result(format!(
                    "(at the maximum depth no sub-model is asked) the first {SUMMARY_FALLBACK_CHARS} characters of {}:\n{text}",
                    args.variable
                )),
                Err(error) => ToolOutcome::error(error.to_string()),
            });
        }
        let budget = (self.config.sub_context_chars as u64)
            .saturating_sub(args.instruction.chars().count() as u64 + 64);
        let key = self.key_of(&args.variable, &source);
        let (text, cut) = match self.read(source, move |text| text.head(budget)).await {
            Ok(read) => read,
            Err(error) => return Ok(ToolOutcome::error(error.to_string())),
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
                    // Past the sub-model's window: summarised piece by piece.
                    split: true,
                    schema: None,
                }),
                format!(" (of its first {budget} characters: it is longer)"),
            ),
            (false, _) => (
                HostCall::LlmQuery(PromptArgs {
                    prompt: args.instruction.clone(),
                    context: Some(Value::String(text)),
                    // Past the sub-model's window: summarised piece by piece.
                    split: true,
                    schema: None,
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

    /// What to write instead of a grep pattern that is a comparison of a number field
    /// (`bytes > 1000`), which no line holds as text: the `where` filter that keeps
    /// those records — when `ctx_map_reduce` is offered. Empty otherwise. It reads the
    /// pattern alone: a comparison written as a regex (in `ctx_grep` or in a plan's
    /// `regex` filter) finds nothing, and the model is told which filter compares.
    fn condition_instead_of_pattern(&self, pattern: &str) -> String {
        if !self.tools.contains(&MicroTool::MapReduce)
            || rlm_plan::condition::Condition::parse(pattern).is_err()
        {
            return String::new();
        }
        format!(
            ": a pattern matches text, it does not compare numbers; {}",
            kept_by_where(pattern.trim())
        )
    }

    /// `ctx_map_reduce`: the plan goes to the orchestrator, over the variable's key.
    async fn map_reduce(&self, arguments: &str) -> Result<ToolOutcome, HostError> {
        let args: MapReduceArgs = match parse_args(MicroTool::MapReduce, arguments) {
            Ok(args) => args,
            Err(error) => return Ok(ToolOutcome::error(error.to_string())),
        };
        let source = match self.source(&args.variable) {
            Ok(source) => source,
            Err(error) => return Ok(ToolOutcome::error(error.to_string())),
        };
        let Some(key) = self.key_of(&args.variable, &source) else {
            return Ok(ToolOutcome::error(format!(
                "ctx_map_reduce reads one text: `{}` holds several files; give the key of one stored variable",
                args.variable
            )));
        };
        // A regex filter that is a comparison (`bytes > 1000`) keeps no piece: no line
        // holds that text. Said when the plan kept none.
        let comparison_note = args
            .filter
            .as_ref()
            .and_then(|filter| filter.get("regex"))
            .and_then(Value::as_str)
            .map(|pattern| {
                (
                    pattern.to_owned(),
                    self.condition_instead_of_pattern(pattern),
                )
            })
            .filter(|(_, note)| !note.is_empty());
        let mut plan = json!({"input": key, "map": args.map, "reduce": args.reduce});
        for (part, value) in [("split", args.split), ("filter", args.filter)] {
            if let Some(value) = value.filter(|v| !v.is_null()) {
                plan[part] = value;
            }
        }
        match self
            .host
            .call(HostCall::RunPlan(PlanArgs { plan, text: None }))
            .await
        {
            Ok(reply) => {
                if let (Some((pattern, note)), Some(0)) = (&comparison_note, reply["kept"].as_u64())
                {
                    return Ok(ToolOutcome::error(format!(
                        "ctx_map_reduce kept no piece: no line matches the filter {{\"regex\": {}}}{note}",
                        serde_json::to_string(pattern).unwrap_or_default()
                    )));
                }
                let answer = match &reply["answer"] {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                Ok(ToolOutcome::result(format!(
                    "{answer}\n(plan: {} pieces, {} kept, {} calls; each piece's result is in the variable {})",
                    reply["pieces"],
                    reply["kept"],
                    reply["calls"],
                    reply["results"].as_str().unwrap_or("?")
                )))
            }
            Err(HostError::RespondToModel(message)) => Ok(ToolOutcome::error(format!(
                "ctx_map_reduce failed: {message}"
            ))),
            Err(fatal @ HostError::Fatal(_)) => Err(fatal),
        }
    }
}

/// The clause that names the `where` filter of `ctx_map_reduce` keeping the records whose
/// field meets `condition` (`bytes > 1000`).
fn kept_by_where(condition: &str) -> String {
    let condition = serde_json::to_string(condition).unwrap_or_default();
    format!(
        "the records whose field meets {condition} are kept by the filter {{\"where\": {condition}}} of ctx_map_reduce"
    )
}

impl ToolsEnv {
    /// A combinator step: its host call, and what the model reads of the variable it
    /// made (or of why it was refused).
    async fn step(&self, tool: MicroTool, arguments: &str) -> Result<ToolOutcome, HostError> {
        let key_of = |variable: &str| {
            let source = self
                .source(variable)
                .map_err(|e| StepError::Variable(Box::new(e)))?;
            self.key_of(variable, &source)
                .ok_or_else(|| StepError::SeveralFiles {
                    tool,
                    variable: variable.to_owned(),
                })
        };
        let call = match crate::combinators::host_call(tool, arguments, key_of) {
            Ok(call) => call,
            Err(error) => return Ok(ToolOutcome::error(error.to_string())),
        };
        match self.host.call(call).await {
            Ok(reply) => Ok(ToolOutcome::result(crate::combinators::describe(
                tool, &reply,
            ))),
            Err(HostError::RespondToModel(message)) => {
                Ok(ToolOutcome::error(format!("{tool} failed: {message}")))
            }
            Err(fatal @ HostError::Fatal(_)) => Err(fatal),
        }
    }
}

/// `ctx_grep`'s pattern, matched case-insensitively, its compiled size bounded.
fn compile(pattern: &str) -> Result<Regex, ToolError> {
    RegexBuilder::new(pattern)
        .case_insensitive(true)
        .size_limit(1 << 20)
        .build()
        .map_err(|error| ToolError::Pattern {
            pattern: pattern.to_owned(),
            error,
        })
}

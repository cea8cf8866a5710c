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
        let (hits, total) = self
            .read(source, move |text| grep(text, &regex, GREP_MAX_LINES))
            .await?;
        if hits.is_empty() {
            if let Some(found) = self.grep_keys_listed(&args).await? {
                return Ok(found);
            }
            return Ok(format!(
                "no line of {} matches {:?}{}{}",
                args.variable,
                args.pattern,
                self.condition_instead_of_pattern(&args.pattern),
                alternation_instead_of_list(&args.pattern, &self.config.query)
            ) + &misspelt_keys_note(&args.pattern, &self.config.query)
                + &task_keys_note(&args.pattern, &self.config.query));
        }
        let mut text = found_lines(&args.variable, &args.pattern, &hits, total);
        text.push_str(&self.task_condition_note(&args.pattern));
        text.push_str(&misspelt_keys_note(&args.pattern, &self.config.query));
        // Lines that name none of the task's keys are not the ones to find (s19d-seed22
        // `sniah` item 3: a phrase of the preview grepped, its line sliced until forced).
        let task_keys = keys_named(&self.config.query);
        let names_a_key = hits.iter().any(|hit| {
            let line = hit.text.to_lowercase();
            task_keys
                .iter()
                .any(|key| line.contains(&key.to_lowercase()))
        });
        if !names_a_key {
            text.push_str(&task_keys_note(&args.pattern, &self.config.query));
        }
        Ok(text)
    }

    /// A grep of a list of the keys the task names (`keen-walrus-89, ivory-yak-55 and
    /// nimble-heron-52`) that found no line, as no line holds the whole list: the keys
    /// joined by `|` grepped in its place, when that finds lines. The local model sent
    /// the task's list four times, told each time to join it by `|`, and was forced on
    /// the keys' last digits (docs/eval.md, s19c-seed21 `multi-needle` item 1).
    async fn grep_keys_listed(&self, args: &GrepArgs) -> Result<Option<String>, ToolError> {
        let Some(alternation) = task_keys_alternation(&args.pattern, &self.config.query) else {
            return Ok(None);
        };
        let regex = compile(&alternation)?;
        let source = self.source(&args.variable)?;
        let (hits, total) = self
            .read(source, move |text| grep(text, &regex, GREP_MAX_LINES))
            .await?;
        if hits.is_empty() {
            return Ok(None);
        }
        // The keys first: the loop reads a grep's result as found lines unless it
        // starts "no line" (s20-seed23 `multi-needle` item 3: all four keys found this
        // way, never told so, sliced and grepped again until forced).
        Ok(Some(format!(
            "the keys {:?} lists, joined by |, were grepped in its place (no line of {} holds the list whole: a line matches a pattern only holding all of it, in that order): {}{}",
            args.pattern,
            args.variable,
            found_lines(&args.variable, &alternation, &hits, total),
            misspelt_keys_note(&args.pattern, &self.config.query)
        )))
    }

    async fn slice(&self, arguments: &str) -> Result<String, ToolError> {
        let args: SliceArgs = parse_args(MicroTool::Slice, arguments)?;
        // An end before the start is read as a length: the local model asked
        // `start: 2300, end: 345` twice for the 345 characters after a grep's offset
        // (docs/eval.md, after-echo, `multi-needle` item 1).
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
        if asked_end - args.start > SLICE_MAX_CHARS {
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
            Err(error) => return Ok(ToolOutcome::error(error.to_string())),
        };
        if let Some(refusal) = self.plan_instead_of_summary(&args.instruction) {
            return Ok(ToolOutcome::error(refusal));
        }
        if let Some(refusal) = self.grep_lines_instead_of_summary(&args.instruction) {
            return Ok(ToolOutcome::error(refusal));
        }
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
                }),
                format!(" (of its first {budget} characters: it is longer)"),
            ),
            (false, _) => (
                HostCall::LlmQuery(PromptArgs {
                    prompt: args.instruction.clone(),
                    context: Some(Value::String(text)),
                    // Past the sub-model's window: summarised piece by piece.
                    split: true,
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
    /// (`year > 2000`), which no line holds as text: the `where` filter that keeps those
    /// records, and the plan the task's words name, where there is one — when
    /// `ctx_map_reduce` is offered. Empty otherwise. The local model grepped "year >
    /// 2000" for the pairs of people born after 2000, found no line, and answered 0
    /// (docs/eval.md, after-tools-4 `pairs` items 1 and 2); under `--env plan` it wrote
    /// the same comparison as a plan's `{"regex": …}` filter, which kept no piece, and
    /// answered a guess (final-seed12 `pairs` items 0–3).
    fn condition_instead_of_pattern(&self, pattern: &str) -> String {
        if !self.tools.contains(&MicroTool::MapReduce)
            || rlm_plan::condition::Condition::parse(pattern).is_err()
        {
            return String::new();
        }
        let mut text = format!(
            ": a pattern matches text, it does not compare numbers; {}",
            kept_by_where(pattern.trim())
        );
        if let Some(plan) = rlm_plan::task_fit::exact_plan_for_task(&self.config.query) {
            text.push_str(&format!(
                ". {}",
                exact_plan_sentence(&rlm_plan::task_fit::parts_of(&plan))
            ));
        }
        text
    }

    /// What to write instead of a grep pattern on the field of the comparison the task
    /// states (`year=2000` for "born after 2000 (year > 2000)"): text matches, not the
    /// records the comparison keeps — when `ctx_map_reduce` is offered and the task's
    /// own exact plan filters by that comparison. Empty otherwise. The local model
    /// grepped `year=2000`, found 14 lines, and spent the run mapping the grep's
    /// heading as a pieces variable (docs/eval.md, after-literal `pairs` item 3).
    fn task_condition_note(&self, pattern: &str) -> String {
        if !self.tools.contains(&MicroTool::MapReduce) {
            return String::new();
        }
        let Some(plan) = rlm_plan::task_fit::exact_plan_for_task(&self.config.query) else {
            return String::new();
        };
        let Some(rlm_plan::Filter::Where(condition)) = &plan.filter else {
            return String::new();
        };
        let field = rlm_plan::condition::Condition::parse(condition)
            .map(|c| c.field().to_lowercase())
            .unwrap_or_default();
        if field.is_empty() || !pattern.to_lowercase().contains(&field) {
            return String::new();
        }
        format!(
            "\nThese lines match the text of the pattern, not the comparison the task asks for; {}. {}.",
            kept_by_where(condition),
            exact_plan_sentence(&rlm_plan::task_fit::parts_of(&plan))
        )
    }

    /// Why `ctx_summarize` should not answer `instruction`: it asks what a summary
    /// guesses and a plan computes — how many times a `key=value` occurs (the local
    /// model asked it so and was told "1 line" of 36, docs/eval.md after-tools-3), which
    /// value is the most frequent, a sum — when `ctx_map_reduce` is offered. The plan
    /// named is the one the run's task asks for where its words name one (the most
    /// frequent label, the pairs sharing a city…), else the count of the question's
    /// `key=value` ([`rlm_plan::task_fit::exact_plan_for_question`]).
    fn plan_instead_of_summary(&self, instruction: &str) -> Option<String> {
        if !self.tools.contains(&MicroTool::MapReduce) {
            return None;
        }
        let plan = rlm_plan::task_fit::exact_plan_for_question(instruction, &self.config.query)?;
        Some(format!(
            "ctx_summarize does not count: a summary of the text guesses how many, or which is the most. {}",
            exact_plan_sentence(&plan)
        ))
    }

    /// A summary asked about keys (`hollow-gecko-55`) that an earlier `ctx_grep` of
    /// the run already found, each on a line of its own: those lines, which are exact
    /// where a summary is a model's reading. `None` when the instruction names no such
    /// key or a grep did not find every one. The local model grepped the four keys of a
    /// `multi-needle` task, got the four lines with their numbers, then asked
    /// `ctx_summarize` the task's question and answered its misreading (docs/eval.md,
    /// after-echo, `multi-needle` item 1).
    fn grep_lines_instead_of_summary(&self, instruction: &str) -> Option<String> {
        let keys = keys_named(instruction);
        if keys.is_empty() {
            return None;
        }
        // The hit lines of every grep that ran (a repeated call is not stored again),
        // sorted: `seen` is a map, and the same run must give the same text.
        let mut found: Vec<&str> = self
            .seen
            .iter()
            .filter(|((tool, _), (_, outcome))| {
                tool.as_str() == MicroTool::Grep.name() && !outcome.is_error
            })
            .flat_map(|(_, (_, outcome))| outcome.content.lines().skip(1))
            .collect();
        found.sort_unstable();
        let mut lines: Vec<&str> = Vec::with_capacity(keys.len());
        for key in &keys {
            let key = key.to_lowercase();
            let line = found
                .iter()
                .find(|line| line.to_lowercase().contains(&key))?;
            if !lines.contains(line) {
                lines.push(line);
            }
        }
        Some(format!(
            "ctx_summarize asks a model to read the text, and it may misread it. Your ctx_grep already found the lines that name {}; they are the text itself:\n{}\nRead the answer in them and call final_answer with it.",
            keys.join(", "),
            lines.join("\n")
        ))
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
        // A regex filter that is a comparison (`year > 2000`) keeps no piece: no line
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
                // The orchestrator ran the plan a refusal named in place of one refused
                // again ([`rlm_plan::task_fit::Refusal::exact`]): said first.
                let note = reply["note"]
                    .as_str()
                    .map_or(String::new(), |note| format!("{note}\n"));
                Ok(ToolOutcome::result(format!(
                    "{note}{answer}\n(plan: {} pieces, {} kept, {} calls; each piece's result is in the variable {})",
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
/// field meets `condition` (`year > 2000`): one wording for a grep pattern that is such
/// a comparison and for one that only names its field.
fn kept_by_where(condition: &str) -> String {
    let condition = serde_json::to_string(condition).unwrap_or_default();
    format!(
        "the records whose field meets {condition} are kept by the filter {{\"where\": {condition}}} of ctx_map_reduce"
    )
}

/// The sentence that names the plan answering the task exactly, given its parts as
/// [`rlm_plan::task_fit::parts_of`] writes them: one wording wherever a tool's error
/// points to it.
fn exact_plan_sentence(parts: &str) -> String {
    format!("Answer the task exactly with ctx_map_reduce, {parts} (no model call)")
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

/// What to write instead of a grep pattern that lists several things (`eager-yak-46,
/// olive-quokka-48, keen-stoat-32` or `a and b`), which a line matches only holding all
/// of them in that order: the alternation that matches a line with any one. Empty when
/// the pattern is no such list. The local model grepped the four keys of a
/// `multi-needle` task joined by commas, three times, and found no line (docs/eval.md,
/// after-echo, `multi-needle` item 0); and joined by spaces, five times, until forced
/// (s18-seed14 `multi-needle` item 4): a pattern of words that names two keys or more
/// ([`keys_named`]) is the list of those keys. A key the task names with a letter or
/// two more or less is written as the task writes it ([`task_spelling`]).
fn alternation_instead_of_list(pattern: &str, task: &str) -> String {
    let Some(parts) = listed(pattern, task) else {
        return String::new();
    };
    let alternation = serde_json::to_string(&parts.join("|")).unwrap_or_default();
    format!(
        ": the pattern is a list, and a line matches it only holding all of it in that order. For the lines with any one of them, grep one pattern joined by |: {alternation}"
    )
}

/// The things a grep pattern lists — split on commas and "and", or the keys it names
/// when an item holds a space — each key written as the task writes it; `None` for a
/// pattern of fewer than two or one that already joins them by `|`.
fn listed<'a>(pattern: &'a str, task: &'a str) -> Option<Vec<&'a str>> {
    if pattern.contains('|') {
        return None;
    }
    let mut parts: Vec<&str> = pattern
        .split(',')
        .flat_map(|part| part.split(" and "))
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .collect();
    if parts.iter().any(|part| part.contains(char::is_whitespace)) {
        parts = keys_named(pattern);
    }
    if parts.len() < 2 {
        return None;
    }
    let task_keys = keys_named(task);
    Some(
        parts
            .into_iter()
            .map(|part| task_spelling(part, &task_keys).unwrap_or(part))
            .collect(),
    )
}

/// The alternation of a grep pattern that lists only keys the task names (each as the
/// task writes it): what the list was meant to find ([`ToolsEnv::grep_keys_listed`]).
fn task_keys_alternation(pattern: &str, task: &str) -> Option<String> {
    let parts = listed(pattern, task)?;
    let task_keys = keys_named(task);
    let all_keys = parts
        .iter()
        .all(|part| task_keys.iter().any(|key| key.eq_ignore_ascii_case(part)));
    all_keys.then(|| parts.join("|"))
}

/// Edits (letters added, dropped or changed) within which a key of a pattern is read
/// as a misspelling of a key the task names.
const MISSPELLING_EDITS: usize = 2;

/// The key of `task_keys` that `key` misspells — one a letter or two away, not the
/// same — when there is one. The local model grepped `gently-raven-88` for the task's
/// `gentle-raven-88`, found the other three keys' lines, and sliced around them until
/// forced (docs/eval.md, s18b-seed15 `multi-needle` item 4).
fn task_spelling<'t>(key: &str, task_keys: &[&'t str]) -> Option<&'t str> {
    if task_keys.contains(&key) {
        return None;
    }
    task_keys
        .iter()
        .copied()
        .filter(|task_key| strsim::levenshtein(key, task_key) <= MISSPELLING_EDITS)
        .min_by_key(|task_key| strsim::levenshtein(key, task_key))
}

/// A note naming the keys of a grep `pattern` that misspell keys the task names, each
/// with the task's spelling; empty when there is none.
fn misspelt_keys_note(pattern: &str, task: &str) -> String {
    let task_keys = keys_named(task);
    let fixes: Vec<String> = keys_named(pattern)
        .into_iter()
        .filter_map(|key| Some(format!("{} (not {key})", task_spelling(key, &task_keys)?)))
        .collect();
    if fixes.is_empty() {
        return String::new();
    }
    format!(
        "\nThe task names {}: grep each key as the task writes it.",
        fixes.join(", ")
    )
}

/// After a grep that found nothing, or only lines that name no key of the task, the
/// keys the task names (`cobalt-lynx-35`), when the pattern holds none of them and is
/// not a misspelling of one: the lines to look for are the ones that name them. The
/// local model grepped the task's phrase "special magic numbers" (the lines say
/// "number") five times and was forced (docs/eval.md, s18c-seed16 `multi-needle` item
/// 4). Empty otherwise.
fn task_keys_note(pattern: &str, task: &str) -> String {
    let task_keys = keys_named(task);
    let pattern_lower = pattern.to_lowercase();
    let names_one = task_keys
        .iter()
        .any(|key| pattern_lower.contains(&key.to_lowercase()));
    let misspells_one = keys_named(pattern)
        .into_iter()
        .any(|key| task_spelling(key, &task_keys).is_some());
    if task_keys.is_empty() || names_one || misspells_one {
        return String::new();
    }
    let alternation = serde_json::to_string(&task_keys.join("|")).unwrap_or_default();
    format!(
        "\nThe task names {}: the lines to find are the ones that name {}; grep {alternation}.",
        task_keys.join(", "),
        if task_keys.len() == 1 { "it" } else { "them" }
    )
}

/// The keys `text` names: its tokens of letters, digits, `-` and `_` that hold a `-`
/// or `_` and a digit (`eager-yak-46`, `order_17`), as a needle's key is written.
pub(crate) fn keys_named(text: &str) -> Vec<&str> {
    let mut keys: Vec<&str> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
        .map(|token| token.trim_matches(['-', '_']))
        .filter(|token| {
            token.len() >= 3
                && token.contains(['-', '_'])
                && token.contains(|c: char| c.is_ascii_digit())
        })
        .collect();
    let mut seen = std::collections::HashSet::new();
    keys.retain(|key| seen.insert(*key));
    keys
}

//! The RLM loop (docs/loop.md): ask the model, run what it asked for, feed the real
//! output back, until it gives a final answer or the iterations or budget run out.
//!
//! What the model asks for is code in fenced blocks (`code_turn`) or, under
//! `--env tools`, calls of the environment's tools (`tool_turn`); everything else —
//! budgets, the trace, the forced last answer — is the same for both.

mod answer_form;
mod bare_final;
mod code_turn;
mod compact;
mod context_literal;
mod deadline;
mod echoed_error;
mod exact_plan_ran;
mod fit;
mod forced;
mod pairing;
mod prose_answer;
mod selection;
mod shown_words;
mod sole_line;
mod task_plan;
mod task_word_found;
mod tool_turn;
mod unprinted_answer;
mod value_block;
mod word_as_code;

pub use compact::WindowTooSmall;
pub use fit::HistoryArchive;

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::accounting::{Accounting, Reservation};
use crate::context::ContextInfo;
use crate::env::tools::ToolProtocol;
use crate::env::{CodeRepl, EnvError, EnvMut, Environment, ToolBox};
use crate::events::{AnswerSource, CallPurpose, EventData, EventSink, FinalRecord};
use crate::host::{record_call, Model};
use crate::prompt::{self, Access, Budget, PromptFeatures, SessionState};
use crate::provider::{
    ChatMessage, ChatRequest, Completion, ProviderError, ResponseFormat, ToolSpec,
};

pub use crate::settings::{DEFAULT_MAX_ITERATIONS, DEFAULT_STATE_VARS};

/// Settings of the loop.
#[derive(Clone)]
pub struct LoopSettings {
    /// `--max-iterations`.
    pub max_iterations: u32,
    /// `--max-output-chars`.
    pub max_output_chars: usize,
    /// `--redact-ratio`.
    pub redact_ratio: f64,
    /// `--state-vars`.
    pub state_vars: usize,
    /// This run's depth.
    pub depth: u32,
    /// `--max-depth`.
    pub max_depth: u32,
    /// `--sub-context-chars` (mentioned in the system prompt).
    pub sub_context_chars: usize,
    /// `--output-schema`: SUBMIT payloads must validate.
    pub output_schema: Option<Arc<jsonschema::Validator>>,
    /// `--system-prompt`: replaces the built-in system prompt.
    pub system_prompt: Option<Arc<str>>,
    /// An external agent command is configured (the prompt advertises `spawn_agent`).
    pub agents: bool,
    /// How tool calls travel when the environment offers tools (`--tool-protocol`).
    pub tool_protocol: ToolProtocol,
}

impl std::fmt::Debug for LoopSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopSettings")
            .field("max_iterations", &self.max_iterations)
            .field("depth", &self.depth)
            .field("max_depth", &self.max_depth)
            .field("tool_protocol", &self.tool_protocol)
            .finish_non_exhaustive()
    }
}

/// How the loop ended.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopOutcome {
    /// The answer.
    pub answer: String,
    /// Where the answer came from.
    pub source: AnswerSource,
    /// True when the answer was forced (iterations or budget exhausted).
    pub forced: bool,
    /// Iterations that ran.
    pub iterations: u32,
    /// The SUBMIT payload, if the answer came from SUBMIT.
    pub submitted: Option<Value>,
}

/// A failure that ends the run (unlike errors in model code, which the model sees).
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// The root model could not be asked.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The REPL broke for good.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// Not even the system prompt and the task fit the root model's window.
    #[error(transparent)]
    Window(WindowTooSmall),
}

/// Everything the loop works with.
pub struct LoopParts<'a> {
    /// The root model.
    pub model: &'a Model,
    /// The environment: a code REPL or a tool box.
    pub env: EnvMut<'a>,
    /// The trace.
    pub sink: &'a EventSink,
    /// Usage and budgets (shared with the host).
    pub accounting: &'a Accounting,
    /// Where steps compacted to fit the window are stored for the model to read back
    /// (`None`: only the trace keeps them).
    pub archive: Option<HistoryArchive>,
}

/// What the model works through: code in a REPL, or the environment's tools.
enum Medium<'e> {
    /// Fenced code blocks, run in order in the REPL.
    Code(&'e mut dyn CodeRepl),
    /// Tool calls, sent natively (`specs` go with every request) or written as text.
    Tools {
        tools: &'e mut dyn ToolBox,
        specs: Vec<ToolSpec>,
        protocol: ToolProtocol,
        /// Calls written as text: the schema of one reply, sent as `response_format`.
        reply_schema: Option<serde_json::Value>,
    },
}

impl<'e> Medium<'e> {
    /// The medium of `env`, with the tool protocol configured.
    fn of(env: EnvMut<'e>, protocol: ToolProtocol) -> Self {
        match env {
            EnvMut::Code(repl) => Self::Code(repl),
            EnvMut::Tools(tools) => Self::Tools {
                specs: tools.tools(),
                reply_schema: (protocol == ToolProtocol::Text)
                    .then(|| tools.response_schema())
                    .flatten(),
                tools,
                protocol,
            },
        }
    }

    /// The environment's lifecycle.
    fn env(&self) -> &dyn Environment {
        match self {
            Self::Code(repl) => &**repl,
            Self::Tools { tools, .. } => &**tools,
        }
    }

    /// The schema a reply must follow, where the environment gives one (calls written
    /// as text under `--env plan`).
    fn reply_schema(&self) -> Option<&serde_json::Value> {
        match self {
            Self::Tools { reply_schema, .. } => reply_schema.as_ref(),
            Self::Code(_) => None,
        }
    }

    /// The tools sent with each request (none when calls are written as text).
    fn native_specs(&self) -> &[ToolSpec] {
        match self {
            Self::Tools {
                specs,
                protocol: ToolProtocol::Native,
                ..
            } => specs,
            Self::Tools { .. } | Self::Code(_) => &[],
        }
    }
}

/// What one turn did, for the message that follows it.
#[derive(Debug, Default)]
struct Turn {
    /// Reports of what ran (code and its output; tool results written as text).
    reports: Vec<String>,
    /// Corrections and notes.
    notices: Vec<String>,
    /// Set when the turn ended the run.
    final_answer: Option<LoopOutcome>,
    /// Code ran, so the model's variables may have changed.
    ran_code: bool,
    /// The form of a reply that neither ran nor answered and got a correction (a bare
    /// fence, an unclosed `FINAL(`, a cut reply…), for counting repeats.
    correction: Option<String>,
}

/// Corrections of the same form in a row after which the run stops asking and forces
/// an answer: a third reply in a form two corrections did not fix is not a fourth try.
const MAX_SAME_CORRECTIONS: u32 = 2;

/// Runs the loop for `query` over a context described by `context` (the latest slot
/// of a session); `session` tells the model what earlier queries left in the REPL.
pub async fn run_loop(
    query: &str,
    context: Option<&ContextInfo>,
    session: SessionState,
    parts: LoopParts<'_>,
    settings: &LoopSettings,
) -> Result<LoopOutcome, LoopError> {
    let LoopParts {
        model,
        env,
        sink,
        accounting,
        archive,
    } = parts;
    let mut medium = Medium::of(env, settings.tool_protocol);
    let mut budget = Budget {
        iteration: 1,
        max_iterations: settings.max_iterations,
        depth: settings.depth,
        max_depth: settings.max_depth,
        tokens_used: 0,
        max_tokens: accounting.limits().max_tokens,
    };
    let features = PromptFeatures {
        agents: settings.agents,
        sub_context_chars: settings.sub_context_chars,
        text_tool_protocol: matches!(
            medium,
            Medium::Tools {
                protocol: ToolProtocol::Text,
                ..
            }
        ),
    };
    let access = match medium {
        Medium::Code(_) => Access::Code,
        Medium::Tools { .. } => Access::Tools,
    };
    let mut messages = vec![
        ChatMessage::system(match &settings.system_prompt {
            Some(text) => text.to_string(),
            None => medium.env().system_prompt(features),
        }),
        ChatMessage::user(prompt::first_message(
            query, context, &budget, session, access,
        )),
    ];
    let mut fitter = fit::Fitter::new(&messages[1].content, archive);
    fitter
        .history()
        .keep_lines_naming(task_word_found::keys(query));
    let mut known_variables = std::collections::HashSet::new();
    let context_chars = context.map_or(0, |c| c.total_chars);
    let caller = Caller {
        model,
        sink,
        accounting,
    };
    let mut iterations = 0;
    let mut stop_reason = None;
    // What the reply the loop stopped after was told — never sent otherwise.
    let mut unread = None;
    let mut same_corrections: Option<(String, u32)> = None;
    let mut ran_before = code_turn::RanBefore::new();
    // The words of the task that a tools-medium grep found ([`task_word_found`]).
    let mut found_task_words = std::collections::HashSet::new();
    // Shown to a code-writing model where its own code cannot get there.
    let task_call = match &medium {
        Medium::Code(repl) => {
            let language = repl.fence_tags().first().copied().unwrap_or("repl");
            task_plan::offered_call(query, context, language)
        }
        Medium::Tools { .. } => None,
    };
    // What shape the task's answer has, where the task's call is offered: an answer of
    // another shape is questioned once with that call.
    let task_kind = task_call
        .as_ref()
        .and_then(|_| task_plan::AnswerKind::of_task(query));
    // What the task selects its records by, where its call is offered: an answer
    // printed by code that names none of it is questioned once with that call.
    let task_selects = task_call
        .as_ref()
        .map(|_| selection::selecting_values(query))
        .unwrap_or_default();
    // The field whose shared values the task pairs, where its call is offered: an
    // answer printed by code that pairs nothing is questioned once with that call.
    let task_paired = task_call
        .as_ref()
        .and_then(|_| pairing::paired_field(query));
    let task_answer = answer_form::TaskAnswer {
        kind: task_kind.as_ref(),
        form: answer_form::stated_form(query),
        selects: &task_selects,
        paired: task_paired.as_deref(),
    };
    // An answer not in the task's stated form is questioned once a run (tools; the
    // code turn keeps its questioned answers in `ran_before`).
    let mut form_questioned = false;
    // What the model was shown of the task and the context: a block of one token of
    // it is not code.
    let shown = [query, context.map_or("", |info| info.preview.as_str())];
    // The forced answer's call, held from the start: the other calls stop one short of
    // the call budget, so the answer is within it.
    accounting.hold_final();
    for iteration in 1..=settings.max_iterations {
        let reserved = crate::host::expected_cost(model, &messages);
        if let Some(reason) = accounting.start_call(reserved) {
            stop_reason = Some(reason);
            break;
        }
        iterations = iteration;
        let step_start = Instant::now();
        sink.emit(EventData::StepStarted { iteration });
        let offer = Offer {
            specs: medium.native_specs(),
            required: None,
            reply_schema: medium.reply_schema(),
            grammar: matches!(medium, Medium::Code(_)).then_some(crate::grammar::REPL_REPLY_GBNF),
        };
        let completion = fit::ask_fitted(
            caller,
            &mut fitter,
            &mut messages,
            offer,
            (CallPurpose::Root, reserved),
            iteration,
        )
        .await?;
        if let Some(reason) = accounting.time_spent() {
            if !deadline::only_answers(&completion, &medium) {
                // The deadline passed while the model answered: nothing of this reply
                // runs; the forced answer ends the run.
                let text = completion.text.trim();
                sink.emit(EventData::Text(crate::events::TextRecord {
                    iteration,
                    text: text.to_owned(),
                }));
                messages.push(ChatMessage::assistant(if text.is_empty() {
                    "(tool calls, not run: the time budget was spent)"
                } else {
                    text
                }));
                sink.emit(EventData::StepCompleted {
                    iteration,
                    duration_ms: step_start.elapsed().as_millis() as u64,
                });
                stop_reason = Some(reason);
                break;
            }
        }
        fitter.history().begin_step(iteration, messages.len());
        let max_output_chars = output_cap(settings.max_output_chars, model).await;
        let turn = match &mut medium {
            Medium::Code(repl) => {
                let step = code_turn::Step {
                    iteration,
                    max_output_chars,
                    settings,
                    context_chars,
                    truncated: completion.truncated,
                    ran: &mut ran_before,
                    task_call: task_call.as_deref(),
                    task_answer,
                    shown: &shown,
                };
                code_turn::run(step, &completion.text, &mut **repl, sink, &mut messages).await?
            }
            Medium::Tools {
                tools, protocol, ..
            } => {
                let step = tool_turn::Step {
                    iteration,
                    task: query,
                    form: (task_answer.form, &mut form_questioned),
                    found: &mut found_task_words,
                    max_output_chars,
                    protocol: *protocol,
                };
                tool_turn::run(step, &completion, &mut **tools, sink, &mut messages).await?
            }
        };
        if let Some(done) = turn.final_answer {
            sink.emit(EventData::Final(FinalRecord {
                answer: done.answer.clone(),
                forced: false,
                source: done.source,
            }));
            sink.emit(EventData::StepCompleted {
                iteration,
                duration_ms: step_start.elapsed().as_millis() as u64,
            });
            return Ok(LoopOutcome {
                iterations,
                forced: false,
                ..done
            });
        }
        same_corrections = match (turn.correction.clone(), same_corrections.take()) {
            (Some(form), Some((last, count))) if form == last => Some((form, count + 1)),
            (Some(form), _) => Some((form, 1)),
            (None, _) => None,
        };
        if let Some((form, count)) = &same_corrections {
            if *count > MAX_SAME_CORRECTIONS {
                stop_reason = Some(format!(
                    "the reply was again {form}, after {MAX_SAME_CORRECTIONS} corrections"
                ));
                // Its reports may hold what answers: a refusal's offered call, the
                // output of a call run in a block's place (head-seed10 js `pairs`
                // item 3: the count shown to no one, the forced answer a guess).
                let said: Vec<&str> = turn
                    .reports
                    .iter()
                    .chain(&turn.notices)
                    .map(String::as_str)
                    .collect();
                unread = (!said.is_empty()).then(|| said.join("\n\n"));
                sink.emit(EventData::StepCompleted {
                    iteration,
                    duration_ms: step_start.elapsed().as_millis() as u64,
                });
                break;
            }
        }
        let variables = match &mut medium {
            Medium::Code(repl) => repl.variables().await.unwrap_or_default(),
            Medium::Tools { .. } => Vec::new(),
        };
        if turn.ran_code {
            sink.emit(EventData::VariablesUpdated {
                iteration,
                variables: variables.clone(),
            });
        }
        let made = variables
            .iter()
            .filter(|v| known_variables.insert(v.name.clone()))
            .map(|v| v.name.clone())
            .collect();
        fitter.history().made(made);
        budget.iteration = iteration + 1;
        budget.tokens_used = accounting.totals().usage.total();
        messages.push(ChatMessage::user(prompt::turn_message(
            &turn.reports,
            &turn.notices,
            &budget,
            &variables,
            settings.state_vars,
        )));
        sink.emit(EventData::StepCompleted {
            iteration,
            duration_ms: step_start.elapsed().as_millis() as u64,
        });
    }
    if let Some(reason) = &stop_reason {
        sink.emit(EventData::Warning {
            message: format!("stopping: {reason}"),
        });
    }
    let ending = forced::Ending {
        caller,
        iterations,
        stop_reason,
        unread,
        ran: &ran_before,
        task_call: task_call.as_deref(),
    };
    forced::force_final(ending, &mut medium, &mut fitter, &mut messages).await
}

/// The most characters of one step's output shown to the model: `--max-output-chars`,
/// and no more than a third of what the window leaves for the prompt.
async fn output_cap(max_output_chars: usize, model: &Model) -> usize {
    let window = &model.window;
    let (chars_per_token, _) = window.estimator.calibration();
    let third = (window.prompt_budget().await as f64 / 3.0 * chars_per_token) as usize;
    max_output_chars.min(third.max(1_000))
}

/// A final answer the turn accepted (its iteration count is set by the loop).
fn outcome_of(answer: String, source: AnswerSource, submitted: Option<Value>) -> LoopOutcome {
    LoopOutcome {
        answer,
        source,
        forced: false,
        iterations: 0,
        submitted,
    }
}

/// What root-model calls need besides the conversation.
#[derive(Clone, Copy)]
struct Caller<'a> {
    model: &'a Model,
    sink: &'a EventSink,
    accounting: &'a Accounting,
}

/// The tools a request offers, and the one it requires if any.
#[derive(Clone, Copy, Default)]
struct Offer<'a> {
    specs: &'a [ToolSpec],
    required: Option<&'a str>,
    /// The schema the reply must follow (constrained output), if any.
    reply_schema: Option<&'a serde_json::Value>,
    /// The grammar of the reply (`--constrain`: a code reply's protocol), if any.
    grammar: Option<&'static str>,
}

impl Caller<'_> {
    /// One root-model call, accounted (settling what was `reserved` for it) and
    /// traced; the text streams to the listeners as transient `text_delta` events
    /// while it arrives.
    async fn ask(
        self,
        messages: &[ChatMessage],
        offer: Offer<'_>,
        (purpose, reserved): (CallPurpose, Reservation),
        iteration: u32,
    ) -> Result<Completion, ProviderError> {
        let request = ChatRequest {
            messages: messages.to_vec(),
            tools: offer.specs.to_vec(),
            required_tool: offer.required.map(str::to_owned),
            response_format: offer.reply_schema.map(|schema| ResponseFormat {
                name: "step".to_owned(),
                schema: schema.clone(),
            }),
            grammar: offer.grammar.map(std::sync::Arc::from),
            // Not waited for: a first request goes out beside discovery.
            max_tokens: self.model.window.answer_limit_now(),
            ..ChatRequest::default()
        };
        let sink = self.sink;
        let on_delta = |delta: &str| {
            sink.emit_transient(EventData::TextDelta {
                iteration,
                delta: delta.to_owned(),
            })
        };
        let forced = purpose == CallPurpose::ForcedFinal;
        let completion = match self
            .model
            .complete_within(&request, Some(&on_delta), self.accounting, forced)
            .await
        {
            Ok(completion) => completion,
            Err(error) => {
                self.accounting.release(reserved);
                return Err(error);
            }
        };
        record_call(
            self.model,
            &request,
            &completion,
            purpose,
            (self.accounting, reserved),
            sink,
        );
        Ok(completion)
    }
}

#[cfg(test)]
mod tests;

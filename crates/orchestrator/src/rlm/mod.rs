//! The RLM loop (docs/loop.md): ask the model, run what it asked for, feed the real
//! output back, until it gives a final answer or the iterations or budget run out.
//!
//! What the model asks for is code in fenced blocks (`code_turn`) or, under
//! `--env tools`, calls of the environment's tools (`tool_turn`); everything else —
//! budgets, the trace, the forced last answer — is the same for both. What the model
//! is told about its reply beyond the protocol's own messages comes from the rules of
//! [`correction`], asked at fixed hook points; none of them reads the task.

mod caller;
mod code_turn;
mod compact;
mod correction;
mod deadline;
mod fit;
mod forced;
mod log;
mod loop_settings;
mod medium;
mod prose_answer;
mod tool_turn;
mod turn;

pub use crate::corrections::{Corrections, Rule, UnknownRule};
pub use compact::WindowTooSmall;
pub use fit::HistoryArchive;
pub use loop_settings::LoopSettings;

use std::time::Instant;

use serde_json::Value;

use crate::accounting::Accounting;
use crate::context::ContextInfo;
use crate::env::{EnvError, EnvMut};
use crate::events::{AnswerSource, CallPurpose, EventData, EventSink, FinalRecord};
use crate::host::Model;
use crate::prompt::{self, Budget, PromptFeatures, SessionState};
use crate::provider::{ChatMessage, ProviderError};
use caller::Caller;
use medium::Medium;
use turn::Repeats;

pub use crate::settings::{DEFAULT_MAX_ITERATIONS, DEFAULT_STATE_VARS};

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
        text_tool_protocol: medium.text_protocol(),
        constrained_calls: medium::constrains_text_calls(model, medium.text_call_schema()).await,
    };
    let system = match &settings.system_prompt {
        Some(text) => text.to_string(),
        None => medium.env().system_prompt(features),
    };
    let first = prompt::first_message(query, context, &budget, session, medium.access());
    let mut messages = vec![ChatMessage::system(system), ChatMessage::user(first)];
    let mut fitter = fit::Fitter::new(&messages[1].content, archive);
    let mut known_variables = std::collections::HashSet::new();
    let context_chars = context.map_or(0, |c| c.total_chars);
    let caller = Caller {
        model,
        sink,
        accounting,
    };
    let mut log = log::BlockLog::new();
    let mut repeats = Repeats::default();
    let mut iterations = 0;
    let mut stop_reason = None;
    // What the turn the loop stopped after would have told the model.
    let mut unread = None;
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
        let step_done = || EventData::StepCompleted {
            iteration,
            duration_ms: step_start.elapsed().as_millis() as u64,
        };
        sink.emit(EventData::StepStarted { iteration });
        let purpose = (CallPurpose::Root, reserved);
        let offer = medium.offer();
        let completion = fit::ask_fitted(
            caller,
            &mut fitter,
            &mut messages,
            offer,
            purpose,
            iteration,
        )
        .await?;
        if let Some(reason) = accounting.time_spent() {
            if !deadline::only_answers(&completion, &medium) {
                deadline::set_aside(&completion, iteration, sink, &mut messages);
                sink.emit(step_done());
                stop_reason = Some(reason);
                break;
            }
        }
        fitter.history().begin_step(iteration, messages.len());
        let max_output_chars = caller.output_cap(settings.max_output_chars).await;
        let turn = match &mut medium {
            Medium::Code(repl) => {
                let step = code_turn::Step {
                    iteration,
                    max_output_chars,
                    settings,
                    context_chars,
                    truncated: completion.truncated,
                    log: &mut log,
                };
                code_turn::run(step, &completion.text, &mut **repl, sink, &mut messages).await?
            }
            Medium::Tools {
                tools, protocol, ..
            } => {
                let step = tool_turn::Step {
                    iteration,
                    max_output_chars,
                    protocol: *protocol,
                    corrections: &settings.corrections,
                    log: &mut log,
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
            sink.emit(step_done());
            return Ok(LoopOutcome {
                iterations,
                forced: false,
                ..done
            });
        }
        if let Some(reason) = repeats.stop_after(turn.refused) {
            stop_reason = Some(reason);
            let said: Vec<&str> = turn
                .reports
                .iter()
                .chain(&turn.notices)
                .map(String::as_str)
                .collect();
            unread = (!said.is_empty()).then(|| said.join("\n\n"));
            sink.emit(step_done());
            break;
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
        sink.emit(step_done());
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
        log: &log,
        corrections: &settings.corrections,
    };
    forced::force_final(ending, &mut medium, &mut fitter, &mut messages).await
}

#[cfg(test)]
mod tests;

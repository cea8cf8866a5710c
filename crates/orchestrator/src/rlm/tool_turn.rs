//! A turn of the tools medium (`--env tools`): the model's tool calls run in order and
//! each result goes back in the provider's own shape — a `tool` message answering the
//! call's id when the call came natively, one text report per call when it was
//! written as text. The run ends by `FINAL(...)` in a message without calls, or by a
//! `final_answer` call made alone.

use std::collections::HashSet;
use std::time::Instant;

use super::answer_form;
use super::exact_plan_ran;
use super::task_word_found;
use super::{outcome_of, LoopError, Turn};
use crate::env::tools::{
    final_answer_of, parse_text_calls, read_text_calls, MicroTool, TextCalls, ToolProtocol,
};
use crate::env::{ToolBox, ToolOutcome};
use crate::events::{AnswerSource, CodeRecord, EventData, EventSink, ExecRecord, TextRecord};
use crate::output::shape_output;
use crate::parse::parse_response;
use crate::prompt::{self, ToolsMiss};
use crate::provider::{ChatMessage, Completion, ToolCall};
use rlm_protocol::reply::NotTaken;

/// Where the turn stands.
pub(super) struct Step<'a> {
    pub iteration: u32,
    /// The task as the model was shown it: a grep of a word it names that found lines
    /// is followed by the notice to answer ([`task_word_found`]).
    pub task: &'a str,
    /// The form the task states for its answer ([`super::answer_form`]), and whether an
    /// answer was questioned for it already this run (once a run).
    pub form: (Option<&'a str>, &'a mut bool),
    /// The words of the task such greps found so far in the run: a task of several
    /// keys is told which are left.
    pub found: &'a mut HashSet<String>,
    /// The most characters of a result shown (`--max-output-chars`, bounded by the
    /// window).
    pub max_output_chars: usize,
    pub protocol: ToolProtocol,
}

/// Runs the calls of the model's reply; the reply and the results go into `messages`
/// (results written as text come back in the turn's reports instead).
pub(super) async fn run(
    step: Step<'_>,
    completion: &Completion,
    env: &mut dyn ToolBox,
    sink: &EventSink,
    messages: &mut Vec<ChatMessage>,
) -> Result<Turn, LoopError> {
    let Step {
        iteration,
        task,
        form: (form, form_questioned),
        found,
        max_output_chars,
        protocol,
    } = step;
    // An answer written as a sentence where the task states a form: questioned once
    // (the trace shows why: a `FINAL`'s refusal as a warning, a call's as its result).
    let mut not_in_form = |answer: &str| {
        let form = answer_form::unmet(answer, form).filter(|_| !*form_questioned)?;
        *form_questioned = true;
        Some(prompt::answer_not_in_form(form, "final_answer"))
    };
    let text = completion.text.trim();
    let parsed = parse_response(text, &[]);
    if !text.is_empty() {
        sink.emit(EventData::Text(TextRecord {
            iteration,
            text: text.to_owned(),
        }));
    }
    // Native calls answer by id; a model that writes its calls as text although the
    // endpoint takes them natively (small models often do) is answered in text.
    if completion.truncated {
        // Its calls' arguments or its FINAL( may be cut anywhere: nothing is acted on,
        // and its calls go back as text (a native call needs a result answering it).
        messages.push(ChatMessage::assistant(text));
        let mut turn = Turn::default();
        turn.notices.push(prompt::TRUNCATED_REPLY_TOOLS.to_owned());
        turn.correction = Some("cut at the output-token limit".to_owned());
        return Ok(turn);
    }
    let native = protocol == ToolProtocol::Native && !completion.tool_calls.is_empty();
    let written = if native {
        TextCalls::default()
    } else {
        read_text_calls(text)
    };
    let calls = if native {
        completion.tool_calls.clone()
    } else {
        written.calls.clone()
    };
    // What the reply wrote without making it: the trace says why it was not acted on.
    let quoted: Vec<(String, &NotTaken)> = parsed
        .quoted
        .iter()
        .map(|q| (q.action.clone(), &q.why))
        .chain(
            written
                .quoted
                .iter()
                .map(|q| (format!("a {} call", q.name), &q.why)),
        )
        .collect();
    for (action, why) in &quoted {
        sink.emit(EventData::Warning {
            message: format!("{action} in the reply was not acted on: {why}"),
        });
    }
    messages.push(if native {
        ChatMessage::assistant_calls(text, calls.clone())
    } else {
        ChatMessage::assistant(text)
    });

    let mut turn = Turn::default();
    if calls.is_empty() {
        match (&parsed.final_literal, parsed.unclosed_final) {
            (Some(answer), _) => match env.refuse_answer().or_else(|| not_in_form(answer)) {
                Some(why) => {
                    // A call's refusal shows as its result; a FINAL( has none.
                    sink.emit(EventData::Warning {
                        message: format!("FINAL({answer}): {why}"),
                    });
                    turn.notices.push(why);
                }
                None => {
                    turn.final_answer = Some(outcome_of(answer.clone(), AnswerSource::Final, None));
                }
            },
            (None, Some(name)) => {
                turn.notices.push(prompt::unclosed_final(name));
                turn.correction = Some(format!("an unclosed {name}("));
            }
            (None, None) => {
                let miss = if !parsed.blocks.is_empty() {
                    ToolsMiss::Code
                } else if quoted.is_empty()
                    && MicroTool::ALL.iter().any(|tool| text.contains(tool.name()))
                {
                    ToolsMiss::UnreadableCall
                } else {
                    ToolsMiss::Nothing
                };
                turn.notices.push(prompt::tools_correction(miss));
                if !quoted.is_empty() {
                    let quoted = quoted.iter().map(|(action, why)| (action.as_str(), *why));
                    turn.notices.push(prompt::not_taken(quoted));
                }
                turn.correction = Some(
                    match miss {
                        ToolsMiss::Code => "code, which does not run here",
                        ToolsMiss::UnreadableCall => "a tool call that could not be read",
                        ToolsMiss::Nothing => "without a tool call or a final answer",
                    }
                    .to_owned(),
                );
            }
        }
        return Ok(turn);
    }
    if parsed.final_literal.is_some() {
        turn.notices.push(prompt::PREMATURE_FINAL_TOOLS.to_owned());
    }
    let alone = calls.len() == 1;
    let mut repeated = 0;
    for (index, call) in calls.iter().enumerate() {
        let rendered = render_call(call);
        sink.emit(EventData::Code(CodeRecord {
            iteration,
            block: index,
            code: rendered.clone(),
        }));
        let started = Instant::now();
        let refused = if !is_final_answer(call) {
            None
        } else if !alone {
            Some(prompt::PREMATURE_FINAL_TOOLS.to_owned())
        } else {
            env.refuse_answer().or_else(|| {
                final_answer_of(&call.arguments).and_then(|answer| not_in_form(&answer))
            })
        };
        let outcome = match refused {
            Some(why) => ToolOutcome::error(why),
            None => env.call_tool(call).await?,
        };
        // Tool results are bounded by the tools themselves and are what the model
        // asked to read, so they are never redacted; only `--max-output-chars` holds.
        let content = shape_output(&outcome.content, max_output_chars, 0, 0.0);
        sink.emit(EventData::Exec(ExecRecord {
            iteration,
            block: index,
            output: content.clone(),
            error: outcome.is_error,
            timed_out: false,
            duration_ms: started.elapsed().as_millis() as u64,
        }));
        if native {
            messages.push(ChatMessage::tool_result(
                call.id.clone(),
                content,
                outcome.is_error,
            ));
        } else {
            let label = if outcome.is_error {
                "Error from"
            } else {
                "Result of"
            };
            turn.reports.push(format!("{label} {rendered}:\n{content}"));
        }
        if let Some(answer) = outcome.final_answer {
            turn.final_answer = Some(outcome_of(answer, AnswerSource::FinalAnswerTool, None));
            return Ok(turn);
        }
        repeated += usize::from(outcome.repeated);
        if let Some(grep) = task_word_found::read(call, &outcome, task) {
            let keys = task_word_found::keys(task);
            turn.notices
                .push(task_word_found::notice(&grep, &keys, found));
        }
        turn.notices
            .extend(exact_plan_ran::notice(call, &outcome, task));
    }
    if repeated == calls.len() {
        // Nothing new ran: a loop, counted as a correction so that a third such reply
        // in a row ends in a forced answer.
        turn.correction = Some("calls that already ran twice".to_owned());
    }
    Ok(turn)
}

/// The answer of a `final_answer` call in `completion`, native or written as text (for
/// the forced last answer); its arguments are read as leniently as any call's.
pub(super) fn final_answer_called(completion: &Completion) -> Option<String> {
    let written = parse_text_calls(&completion.text);
    let call = completion
        .tool_calls
        .iter()
        .chain(written.iter())
        .find(|call| is_final_answer(call))?;
    final_answer_of(&call.arguments)
}

fn is_final_answer(call: &ToolCall) -> bool {
    call.name.trim() == MicroTool::FinalAnswer.name()
}

/// A call as the trace and text reports show it: `ctx_grep {"variable":…}`.
fn render_call(call: &ToolCall) -> String {
    let arguments = call.arguments.trim();
    if arguments.is_empty() {
        format!("{}()", call.name)
    } else {
        format!("{}({arguments})", call.name)
    }
}

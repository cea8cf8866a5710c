//! The forced last answer: when the iterations or a budget run out, or a reply form
//! the corrections do not fix stops the loop, one more request asks for the answer
//! with no code or tools to run. What that reply gives is read as kindly as it can be
//! without guessing — a `FINAL` also when fenced, the value a block that ran printed
//! when the reply sends that block again — and a sentence is asked once more for the
//! answer alone.
//!
//! The forced request uses the call the run held for it from its start
//! ([`Accounting::hold_final`](crate::accounting::Accounting::hold_final)) and counts
//! like any other. A reply cut at its limit or in prose is asked again only while the
//! budgets leave a call for it: after a budget is spent, a run makes exactly one forced
//! request.

use super::{
    bare_final, code_turn, fit, prompt, prose_answer, tool_turn, Caller, LoopError, LoopOutcome,
    Medium, Offer,
};
use crate::accounting::Reservation;
use crate::env::tools::MicroTool;
use crate::events::{AnswerSource, CallPurpose, EventData, EventSink, FinalRecord};
use crate::host::expected_cost;
use crate::parse::parse_response;
use crate::provider::{ChatMessage, Completion};

/// What the forced last answer needs besides the conversation.
pub(super) struct Ending<'a> {
    pub caller: Caller<'a>,
    pub iterations: u32,
    pub stop_reason: Option<String>,
    /// The reports and notices of the last turn, when the loop stopped before they
    /// were sent: they come first in the forced request.
    pub unread: Option<String>,
    /// What the run's blocks printed: a forced reply that sends one of them again
    /// answers with the value it printed.
    pub ran: &'a code_turn::RanBefore,
    /// The task's exact helper call, where there is one: a forced reply of only that
    /// call runs it (no model call) and answers with what it printed.
    pub task_call: Option<&'a str>,
}

/// Asks once more for an answer, with no more code or tools to run: the answer is
/// `FINAL(...)`, `FINAL_VAR(name)`, a `final_answer` call, or else the reply's text.
pub(super) async fn force_final(
    ending: Ending<'_>,
    medium: &mut Medium<'_>,
    fitter: &mut fit::Fitter,
    messages: &mut Vec<ChatMessage>,
) -> Result<LoopOutcome, LoopError> {
    let Ending {
        caller,
        iterations,
        stop_reason,
        unread,
        ran,
        task_call,
    } = ending;
    // Why no more steps: the iterations ran out, or the reason the loop stopped (not
    // both: "you have used every iteration" after a stop on a repeated call was untrue).
    let why = match &stop_reason {
        Some(reason) => format!("Stop: {reason}."),
        None => prompt::ITERATIONS_USED.to_owned(),
    };
    let mut instruction = format!("{why} {}", forced_instruction(medium));
    if let Some(unread) = unread {
        instruction = format!("{unread}\n\n{instruction}");
    }
    messages.push(ChatMessage::user(instruction));
    // Tools stay declared (a conversation holding tool calls needs them), and the
    // model must call final_answer: its answer is then one argument, not free text.
    // Owned: the medium is read again (a fenced `FINAL(name)`) between two requests.
    let specs = medium.native_specs().to_vec();
    let final_answer = MicroTool::FinalAnswer.name();
    let offer = Offer {
        specs: &specs,
        required: specs
            .iter()
            .any(|spec| spec.name == final_answer)
            .then_some(final_answer),
        // The forced answer is free text.
        reply_schema: None,
        grammar: None,
    };
    let ask = Ask {
        caller,
        offer,
        iteration: iterations + 1,
    };
    let mut completion = ask.first(fitter, messages).await?;
    if completion.truncated {
        // A reply cut at its limit is not an answer: ask once more, for a shorter one.
        let retry = format!(
            "{} {}",
            by_medium(
                medium,
                prompt::TRUNCATED_REPLY,
                prompt::TRUNCATED_REPLY_TOOLS
            ),
            forced_instruction(medium)
        );
        if let Some(again) = ask.again(fitter, messages, &completion, retry).await? {
            completion = again;
            if completion.truncated {
                caller.sink.emit(EventData::Warning {
                    message: "the forced final answer was cut at the model's output-token limit twice: it is given as it came, cut short".to_owned(),
                });
            }
        }
    }
    let answer = match forced_answer(&completion, medium, (ran, task_call, caller.sink)).await? {
        ForcedReply::Answer(answer) => answer,
        ForcedReply::Prose(prose) if one_value(&prose) => prose,
        ForcedReply::Prose(prose) => {
            // A sentence holding the answer ("The label … is \"billing\".") is not the
            // answer a caller can compare or use: asked once for the answer alone
            // (head-seed13 js `aggregate` item 4 and seed 9's item 4, the right label
            // scored wrong for its sentence).
            let retry = by_medium(medium, prompt::FORCED_PROSE, prompt::FORCED_PROSE_TOOLS);
            match ask
                .again(fitter, messages, &completion, retry.to_owned())
                .await?
            {
                None => prose,
                Some(again) => {
                    match forced_answer(&again, medium, (ran, task_call, caller.sink)).await? {
                        ForcedReply::Answer(answer) => answer,
                        ForcedReply::Prose(bare) if one_value(&bare) => bare,
                        ForcedReply::Prose(_) => {
                            caller.sink.emit(EventData::Warning {
                                message: "the forced final answer came twice with no FINAL(...): it is given as first written".to_owned(),
                            });
                            prose
                        }
                    }
                }
            }
        }
    };
    caller.sink.emit(EventData::Final(FinalRecord {
        answer: answer.clone(),
        forced: true,
        source: AnswerSource::Forced,
    }));
    Ok(LoopOutcome {
        answer,
        source: AnswerSource::Forced,
        forced: true,
        iterations,
        submitted: None,
    })
}

/// The forced request as it is asked, first and after a reply that is not an answer.
struct Ask<'a> {
    caller: Caller<'a>,
    offer: Offer<'a>,
    /// The iteration the forced request counts as.
    iteration: u32,
}

impl Ask<'_> {
    /// The forced request, on the conversation as it stands, with the call held for it.
    async fn first(
        &self,
        fitter: &mut fit::Fitter,
        messages: &mut Vec<ChatMessage>,
    ) -> Result<Completion, LoopError> {
        let expected = expected_cost(self.caller.model, messages);
        let reserved = self.caller.accounting.start_final(expected);
        self.send(fitter, messages, reserved).await
    }

    /// Asked again after `previous`, which was not an answer, with `correction`, when
    /// the budgets leave a call for it; `None` (and a warning) when they do not.
    async fn again(
        &self,
        fitter: &mut fit::Fitter,
        messages: &mut Vec<ChatMessage>,
        previous: &Completion,
        correction: String,
    ) -> Result<Option<Completion>, LoopError> {
        messages.push(ChatMessage::assistant(previous.text.clone()));
        messages.push(ChatMessage::user(correction));
        let reserved = expected_cost(self.caller.model, messages);
        if let Some(reason) = self.caller.accounting.start_call(reserved) {
            messages.truncate(messages.len() - 2);
            self.caller.sink.emit(EventData::Warning {
                message: format!(
                    "the forced final answer was not asked again ({reason}): it is given as it came"
                ),
            });
            return Ok(None);
        }
        self.send(fitter, messages, reserved).await.map(Some)
    }

    /// One forced request, accounted against `reserved`.
    async fn send(
        &self,
        fitter: &mut fit::Fitter,
        messages: &mut Vec<ChatMessage>,
        reserved: Reservation,
    ) -> Result<Completion, LoopError> {
        fit::ask_fitted(
            self.caller,
            fitter,
            messages,
            self.offer,
            (CallPurpose::ForcedFinal, reserved),
            self.iteration,
        )
        .await
    }
}

/// `code` under the code medium, `tools` under `--env tools`.
fn by_medium(medium: &Medium<'_>, code: &'static str, tools: &'static str) -> &'static str {
    match medium {
        Medium::Code(_) => code,
        Medium::Tools { .. } => tools,
    }
}

/// What a forced reply gives: an answer, or only prose.
enum ForcedReply {
    /// Its `FINAL(...)`, `FINAL_VAR(name)` or `final_answer` call's answer.
    Answer(String),
    /// Its text, trimmed: it named no answer.
    Prose(String),
}

/// The answer a forced reply gives — its `FINAL(...)`, `FINAL_VAR(name)`, or
/// `final_answer` call, also when fenced — or else its text, trimmed, as prose.
async fn forced_answer(
    completion: &Completion,
    medium: &mut Medium<'_>,
    (ran, task_call, sink): (&code_turn::RanBefore, Option<&str>, &EventSink),
) -> Result<ForcedReply, LoopError> {
    let tags = match medium {
        Medium::Code(repl) => repl.fence_tags(),
        Medium::Tools { .. } => &[],
    };
    let mut parsed = parse_response(&completion.text, tags);
    if parsed.final_literal.is_none() && parsed.final_var.is_none() {
        // Told to answer, the model may still fence it (```` ```repl FINAL(33) ``` ````,
        // after-echo-seed6's js `aggregate` item 0): nothing runs now, so the FINAL the
        // block holds is read as if written outside it.
        if let Some(block) = parsed.blocks.last() {
            let inner = parse_response(&block.code, &[]);
            parsed.final_var = inner.final_var;
            parsed.final_literal = match &parsed.final_var {
                Some(_) => inner.final_literal,
                None => {
                    let written = inner.final_literal;
                    value_of_block(&block.code, written, medium, (ran, task_call, sink)).await?
                }
            };
        }
    }
    let text = parsed.transcript_text.trim().to_owned();
    Ok(match (parsed.final_literal, parsed.final_var) {
        (Some(answer), _) => ForcedReply::Answer(answer),
        (None, Some(name)) => {
            let value = match medium {
                Medium::Code(repl) => repl.final_var(&name).await?,
                Medium::Tools { .. } => None,
            };
            ForcedReply::Answer(value.unwrap_or(text))
        }
        (None, None) => match medium {
            Medium::Tools { .. } => tool_turn::final_answer_called(completion)
                .map_or(ForcedReply::Prose(text), ForcedReply::Answer),
            Medium::Code(_) => ForcedReply::Prose(text),
        },
    })
}

/// The value a forced reply's last block stands for, where it stands for one: its
/// bare `FINAL(name)` of a REPL variable; the one value it printed when it ran before
/// (the s18b-seed15 js `aggregate` item 3: `map_reduce`'s count printed 46 twice, the
/// same block sent until forced and then as the forced answer); or, when it is the
/// task's exact call, offered and never run, what that call prints now — it calls no
/// model (s18e-seed18 js `pairs` item 1: its first copy was cut at the token limit).
/// Each but the variable is traced as a warning. `written` is the `FINAL(...)` the
/// block holds, the answer when it names no variable.
async fn value_of_block(
    code: &str,
    written: Option<String>,
    medium: &mut Medium<'_>,
    (ran, task_call, sink): (&code_turn::RanBefore, Option<&str>, &EventSink),
) -> Result<Option<String>, LoopError> {
    let Medium::Code(repl) = medium else {
        return Ok(written);
    };
    // In code, `FINAL(name)` passes the value of a variable of that name.
    if let Some(name) = bare_final::bare_word(code) {
        if let Some(value) = repl.final_var(name).await? {
            return Ok(Some(value));
        }
    }
    if written.is_some() {
        return Ok(written);
    }
    if let Some(value) = ran.printed_by(code) {
        sink.emit(EventData::Warning {
            message: format!(
                "the forced reply was code that ran before and printed {value}: {value} is the answer"
            ),
        });
        return Ok(Some(value.to_owned()));
    }
    if task_call.is_none_or(|call| call.trim() != code.trim()) {
        return Ok(None);
    }
    let outcome = repl.execute(code).await?;
    let output = outcome.combined_output();
    let value = outcome
        .error
        .is_none()
        .then(|| prose_answer::printed_value(&output))
        .flatten();
    if let Some(value) = value {
        sink.emit(EventData::Warning {
            message: format!("the forced reply was the task's exact call, which ran now and printed {value}: {value} is the answer"),
        });
    }
    Ok(value.map(str::to_owned))
}

/// True when a forced reply's text is one value as written — a number, a word, a
/// token such as `2024-03-07` — and so the answer without a `FINAL`; not a sentence,
/// several lines, or nothing.
fn one_value(text: &str) -> bool {
    !text.is_empty() && !text.contains(char::is_whitespace)
}

/// What the forced last request asks for.
fn forced_instruction(medium: &Medium<'_>) -> &'static str {
    by_medium(medium, prompt::FORCE_FINAL, prompt::FORCE_FINAL_TOOLS)
}

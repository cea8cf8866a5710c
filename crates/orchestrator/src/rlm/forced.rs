//! The forced last answer: when the iterations or a budget run out, or the same
//! correction did not fix three replies in a row, one more request asks for the answer
//! with no code or tools to run. What that reply gives is read as kindly as it can be
//! without guessing — a `FINAL` also when fenced, a fenced `FINAL(name)` as the
//! variable's value, a block that ran before as the value it printed — and the
//! `forced_retry` rule may ask once more for a reply cut short or written as a sentence.
//! Nothing runs here: the forced answer is only ever what the model wrote or printed.
//!
//! The forced request uses the call the run held for it from its start
//! ([`Accounting::hold_final`](crate::accounting::Accounting::hold_final)) and counts
//! like any other. A retry is asked only while the budgets leave a call for it: after
//! a budget is spent, a run makes exactly one forced request.

use super::caller::{Caller, Offer};
use super::correction::{bare_final, Ask as _, Corrections, Forced, Hook};
use super::log::BlockLog;
use super::medium::Medium;
use super::{fit, tool_turn, LoopError, LoopOutcome};
use crate::accounting::Reservation;
use crate::env::tools::MicroTool;
use crate::events::{AnswerSource, CallPurpose, EventData, FinalRecord};
use crate::host::expected_cost;
use crate::parse::parse_response;
use crate::prompt;
use crate::provider::{ChatMessage, Completion};

/// Retries of the forced request at most (a cut reply, then prose).
const MAX_RETRIES: u32 = 2;

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
    pub log: &'a BlockLog,
    /// The rules switched on.
    pub corrections: &'a Corrections,
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
        log,
        corrections,
    } = ending;
    let code = matches!(medium, Medium::Code(_));
    // Why no more steps: the iterations ran out, or the reason the loop stopped.
    let why = match &stop_reason {
        Some(reason) => format!("Stop: {reason}."),
        None => prompt::ITERATIONS_USED.to_owned(),
    };
    let mut request = format!("{why} {}", prompt::force_final(code));
    if let Some(unread) = unread {
        request = format!("{unread}\n\n{request}");
    }
    messages.push(ChatMessage::user(request));
    // Tools stay declared (a conversation holding tool calls needs them), and the
    // model must call final_answer: its answer is then one argument, not free text.
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
    let mut retries = 0;
    let answer = loop {
        let reply = forced_answer(&completion, medium, log, caller).await?;
        let view = Forced {
            form: medium.form(),
            text: reply.text(),
            truncated: completion.truncated,
            answered: matches!(reply, ForcedReply::Answer(_)),
        };
        let at = (caller.sink, iterations + 1);
        let said = corrections.ask(Hook::OnForced, at, |rule| rule.on_forced(&view));
        let Some((_, retry)) = said.refused else {
            break reply.into_text();
        };
        if retries == MAX_RETRIES {
            caller.sink.emit(EventData::Warning {
                message: "the forced final answer was not an answer after two retries: it is given as it came".to_owned(),
            });
            break reply.into_text();
        }
        retries += 1;
        match ask.again(fitter, messages, &completion, retry).await? {
            Some(again) => completion = again,
            None => break reply.into_text(),
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

/// What a forced reply gives: an answer, or only prose.
enum ForcedReply {
    /// Its `FINAL(...)`, `FINAL_VAR(name)` or `final_answer` call's answer.
    Answer(String),
    /// Its text, trimmed: it named no answer.
    Prose(String),
}

impl ForcedReply {
    fn text(&self) -> &str {
        match self {
            Self::Answer(text) | Self::Prose(text) => text,
        }
    }

    fn into_text(self) -> String {
        match self {
            Self::Answer(text) | Self::Prose(text) => text,
        }
    }
}

/// The answer a forced reply gives — its `FINAL(...)`, `FINAL_VAR(name)`, or
/// `final_answer` call, also when fenced — or else its text, trimmed, as prose.
async fn forced_answer(
    completion: &Completion,
    medium: &mut Medium<'_>,
    log: &BlockLog,
    caller: Caller<'_>,
) -> Result<ForcedReply, LoopError> {
    let tags = match medium {
        Medium::Code(repl) => repl.fence_tags(),
        Medium::Tools { .. } => &[],
    };
    let mut parsed = parse_response(&completion.text, tags);
    if parsed.final_literal.is_none() && parsed.final_var.is_none() {
        // Told to answer, the model may still fence it (```` ```repl FINAL(33) ``` ````):
        // nothing runs now, so the FINAL the block holds is read as if written outside.
        if let Some(block) = parsed.blocks.last() {
            let inner = parse_response(&block.code, &[]);
            parsed.final_var = inner.final_var;
            parsed.final_literal = match &parsed.final_var {
                Some(_) => inner.final_literal,
                None => {
                    value_of_block(&block.code, inner.final_literal, medium, log, caller).await?
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
/// bare `FINAL(name)` of a REPL variable, or the one value it printed when the same
/// code ran before in this run (traced as a warning). `written` is the `FINAL(...)`
/// the block holds, the answer when it names no variable. Nothing is run.
async fn value_of_block(
    code: &str,
    written: Option<String>,
    medium: &mut Medium<'_>,
    log: &BlockLog,
    caller: Caller<'_>,
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
    let value = log.printed_by(code);
    if let Some(value) = value {
        caller.sink.emit(EventData::Warning {
            message: format!(
                "the forced reply was code that ran before and printed {value}: {value} is the answer"
            ),
        });
    }
    Ok(value.map(str::to_owned))
}

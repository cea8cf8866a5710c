//! A turn of the code medium: the model's fenced blocks run in order in the REPL, and
//! their output — shaped by the redaction guard and truncation — is what it reads next.
//! The corrections are asked at each hook point; the protocol (SPEC 4.1) decides the
//! rest: a `FINAL` counts only from a reply without code, `FINAL_VAR` is read after the
//! reply's code ran, `SUBMIT` must fit `--output-schema`.

mod submit;

use super::correction::{Answer, Ask, Block, Form, Hook, Ran, Reply};
use super::log::BlockLog;
use super::turn::{judge_answer, outcome_of, Turn};
use super::{LoopError, LoopSettings};
use crate::env::{CodeRepl, ExecOutcome, FinalAnswer};
use crate::events::{AnswerSource, CodeRecord, EventData, EventSink, ExecRecord, TextRecord};
use crate::output::shape_output;
use crate::parse::parse_response;
use crate::prompt;
use crate::provider::ChatMessage;

/// Where the turn stands.
pub(super) struct Step<'a> {
    pub iteration: u32,
    /// The most characters of a block's output shown (`--max-output-chars`, bounded
    /// by the window).
    pub max_output_chars: usize,
    pub settings: &'a LoopSettings,
    /// The context's size, for the redaction guard.
    pub context_chars: u64,
    /// True when the reply stopped at the output-token limit.
    pub truncated: bool,
    /// What ran so far in the run.
    pub log: &'a mut BlockLog,
}

/// Runs the code of the model's reply `text`; the reply goes into `messages`.
pub(super) async fn run(
    step: Step<'_>,
    text: &str,
    env: &mut dyn CodeRepl,
    sink: &EventSink,
    messages: &mut Vec<ChatMessage>,
) -> Result<Turn, LoopError> {
    let Step {
        iteration,
        max_output_chars,
        settings,
        context_chars,
        truncated,
        log,
    } = step;
    let corrections = &settings.corrections;
    let at = (sink, iteration);
    let tags = env.fence_tags();
    let language = tags.first().copied().unwrap_or("repl");
    let form = Form::Code { language };
    let parsed = parse_response(text, tags);
    record_reply(sink, iteration, &parsed);
    messages.push(ChatMessage::assistant(
        if parsed.transcript_text.is_empty() {
            text.trim().to_owned()
        } else {
            parsed.transcript_text.clone()
        },
    ));

    let mut turn = Turn::default();
    let reply = Reply {
        form,
        parsed: &parsed,
        text: text.trim(),
        truncated,
        calls: 0,
        not_taken: &parsed.quoted,
        log,
        context_chars,
    };
    let said = corrections.ask(Hook::OnReply, at, |rule| rule.on_reply(&reply));
    turn.refused = said.refused.as_ref().map(|(rule, _)| *rule);
    turn.notices.extend(said.texts());
    if turn.refused.is_some() {
        return Ok(turn);
    }
    turn.ran_code = !parsed.blocks.is_empty();
    let mut refused_blocks = 0;
    for (block, code) in parsed.blocks.iter().enumerate() {
        let code = code.code.as_str();
        sink.emit(EventData::Code(CodeRecord {
            iteration,
            block,
            code: code.to_owned(),
        }));
        let view = Block {
            form,
            code,
            log,
            context_chars,
        };
        let said = corrections.ask(Hook::BeforeBlock, at, |rule| rule.before_block(&view));
        if let Some((rule, report)) = said.refused {
            emit_exec(
                sink,
                (iteration, block),
                &format!("[not run: {rule}]"),
                None,
            );
            turn.reports.push(report);
            turn.notices.extend(said.notes);
            turn.refused = Some(rule);
            refused_blocks += 1;
            continue;
        }
        turn.notices.extend(said.notes);
        let outcome = env.execute(code).await?;
        let shaped = shape_output(
            &outcome.combined_output(),
            max_output_chars,
            context_chars,
            settings.redact_ratio,
        );
        emit_exec(sink, (iteration, block), &shaped, Some(&outcome));
        turn.reports
            .push(prompt::exec_report(code, language, &shaped));
        turn.notices.extend(prompt::exec_notices(&outcome));
        let ran = Ran {
            form,
            code,
            output: &shaped,
            error: outcome.error.as_deref(),
            log,
        };
        let said = corrections.ask(Hook::AfterBlock, at, |rule| rule.after_block(&ran));
        turn.notices.extend(said.texts());
        log.record(code, &shaped);
        let proposed = match outcome.final_answer {
            Some(FinalAnswer::Var { value, .. }) => Some((value, AnswerSource::FinalVar, None)),
            Some(FinalAnswer::Submit { value }) => match submit::validate(settings, &value) {
                Ok(()) => {
                    let answer = submit::submitted_answer(&value, settings.output_schema.is_some());
                    Some((answer, AnswerSource::Submit, Some(value)))
                }
                Err(mismatch) => {
                    turn.notices.push(mismatch.to_string());
                    None
                }
            },
            None => None,
        };
        if let Some((answer, source, submitted)) = proposed {
            if take(
                &mut turn,
                (corrections, at),
                form,
                (answer, source, submitted),
            ) {
                return Ok(turn);
            }
        }
    }
    if refused_blocks < parsed.blocks.len() {
        turn.refused = None;
    }
    // An answer outside the blocks: a `FINAL(...)` line of a reply with no code (one
    // beside code is not taken: the protocol), else a `FINAL_VAR(name)` evaluated after
    // the reply's code ran.
    if let Some(answer) = parsed
        .final_literal
        .clone()
        .filter(|_| parsed.blocks.is_empty())
    {
        take(
            &mut turn,
            (corrections, at),
            form,
            (answer, AnswerSource::Final, None),
        );
    } else if let Some(name) = &parsed.final_var {
        match env.final_var(name).await? {
            Some(value) => {
                take(&mut turn, (corrections, at), form, (value, AnswerSource::FinalVar, None));
            }
            None => turn.notices.push(format!(
                "FINAL_VAR({name}) names no variable in the REPL. Define it in a ```repl block first, or answer with FINAL(...)."
            )),
        }
    }
    Ok(turn)
}

/// Proposes `answer` to the corrections: taken, it is the turn's final answer (true);
/// refused, the model is told why.
fn take(
    turn: &mut Turn,
    (corrections, at): (&crate::rlm::correction::Corrections, (&EventSink, u32)),
    form: Form<'_>,
    (answer, source, submitted): (String, AnswerSource, Option<serde_json::Value>),
) -> bool {
    let view = Answer {
        form,
        answer: &answer,
        source,
        tools: None,
    };
    match judge_answer(corrections, at, view) {
        Ok(notes) => {
            turn.notices.extend(notes);
            turn.final_answer = Some(outcome_of(answer, source, submitted));
            true
        }
        Err(texts) => {
            turn.notices.extend(texts);
            false
        }
    }
}

/// The trace's record of a reply: what it wrote without taking it (a warning each,
/// saying why), and its text.
fn record_reply(sink: &EventSink, iteration: u32, parsed: &crate::parse::ParsedResponse) {
    for quoted in &parsed.quoted {
        sink.emit(EventData::Warning {
            message: format!(
                "{} in the reply was not acted on: {}",
                quoted.action, quoted.why
            ),
        });
    }
    if !parsed.transcript_text.is_empty() {
        sink.emit(EventData::Text(TextRecord {
            iteration,
            text: parsed.transcript_text.clone(),
        }));
    }
}

/// The trace's record of block `block` of `iteration`: what it showed, and how it ran
/// (`None`: it was not run, and `output` says why).
fn emit_exec(
    sink: &EventSink,
    (iteration, block): (u32, usize),
    output: &str,
    outcome: Option<&ExecOutcome>,
) {
    sink.emit(EventData::Exec(ExecRecord {
        iteration,
        block,
        output: output.to_owned(),
        error: outcome.is_some_and(|o| o.error.is_some()),
        timed_out: outcome.is_some_and(|o| o.timed_out),
        duration_ms: outcome.map_or(0, |o| o.duration.as_millis() as u64),
    }));
}

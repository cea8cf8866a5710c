//! A turn of the code medium: the model's fenced blocks run in order in the REPL, and
//! their output — shaped by the redaction guard and truncation — is what it reads next.

use super::answer_form::TaskAnswer;
use super::bare_final;
use super::context_literal;
use super::echoed_error;
use super::prose_answer;
use super::shown_words;
use super::value_block;
use super::word_as_code;
use super::{outcome_of, LoopError, LoopSettings, Turn};
use crate::env::{CodeRepl, ExecOutcome};
use crate::events::{AnswerSource, CodeRecord, EventData, EventSink, ExecRecord, TextRecord};
use crate::output::shape_output;
use crate::parse::parse_response;
use crate::prompt;
use crate::provider::ChatMessage;

mod block_answer;
mod ran_before;

use block_answer::{
    answer_of_block, question_answer, AnswerChecks, BlockAnswer, BlockRan, Questioned,
};
pub(super) use ran_before::RanBefore;

/// Where the turn stands.
pub(super) struct Step<'a> {
    pub iteration: u32,
    /// The most characters of a block's output shown (`--max-output-chars`, bounded
    /// by the window).
    pub max_output_chars: usize,
    pub settings: &'a LoopSettings,
    /// The context's size, for the redaction guard.
    pub context_chars: u64,
    /// True when the reply stopped at the output-token limit: nothing of it runs.
    pub truncated: bool,
    /// Every block run so far in this run: how many times, and its last output.
    pub ran: &'a mut RanBefore,
    /// The helper call that answers the task exactly, where its words name one
    /// ([`super::task_plan`]): shown after code that found nothing and with a block
    /// refused for replacing `context`.
    pub task_call: Option<&'a str>,
    /// What the task says of its answer: an answer of another shape than its exact
    /// call gives is questioned once with that call ([`super::task_plan::AnswerKind`]),
    /// one not in its stated form once with that form ([`super::answer_form`]).
    pub task_answer: TaskAnswer<'a>,
    /// The task and the context's preview as the model was shown them: a block of one
    /// token of them is not code ([`shown_words`]).
    pub shown: &'a [&'a str],
}

/// The same block is run this many times; after that the model is shown the output it
/// already had and told to change the code or answer. A small model that cannot find
/// what it looks for otherwise sends the same search until the iterations run out.
const REPEAT_LIMIT: u32 = 2;

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
        ran,
        task_call,
        task_answer,
        shown,
    } = step;
    // A block's output as the model reads it: redacted where it echoes the context,
    // cut to what the window allows.
    let shape = |output: &str| {
        shape_output(
            output,
            max_output_chars,
            context_chars,
            settings.redact_ratio,
        )
    };
    let tags = env.fence_tags();
    let language = tags.first().copied().unwrap_or("repl");
    let parsed = parse_response(text, tags);
    // What the reply wrote without taking it: the trace says why it was not acted on.
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
    messages.push(ChatMessage::assistant(
        if parsed.transcript_text.is_empty() {
            text.trim().to_owned()
        } else {
            parsed.transcript_text.clone()
        },
    ));

    if truncated {
        // Its last block or its FINAL( may be cut anywhere: nothing of it is acted on.
        let mut turn = Turn::default();
        turn.notices.push(
            match context_literal::assignment(text).filter(|_| context_chars > 0) {
                // The local model copied the preview into `const context = `…`` until
                // the limit cut it, three times (docs/eval.md, after-task-call-seed6,
                // js `pairs` item 2): being told to write less did not stop it.
                Some(_) => prompt::truncated_context_literal(context_chars, task_call),
                None => prompt::TRUNCATED_REPLY.to_owned(),
            },
        );
        turn.correction = Some("cut at the output-token limit".to_owned());
        return Ok(turn);
    }
    let mut turn = Turn {
        ran_code: !parsed.blocks.is_empty(),
        ..Turn::default()
    };
    if parsed.from_tool_call {
        turn.notices.push(prompt::tool_call_ran_as_code(language));
    }
    let mut not_run = Vec::new();
    for (block, code) in parsed.blocks.iter().enumerate() {
        sink.emit(EventData::Code(CodeRecord {
            iteration,
            block,
            code: code.code.clone(),
        }));
        let key = code.code.trim().to_owned();
        if let Some(answer) = printed_value_sent_back(&code.code, ran) {
            emit_not_run(
                sink,
                iteration,
                block,
                "it is the value the last block printed, read as the answer",
            );
            turn.final_answer = Some(outcome_of(answer, AnswerSource::Final, None));
            return Ok(turn);
        }
        let refused = refusal(
            &code.code,
            &Checks {
                language,
                ran,
                context_chars,
                shown,
                task_call,
            },
        );
        if let Some(Refusal {
            reason,
            why,
            report,
        }) = refused
        {
            if matches!(
                reason,
                NotRun::Value | NotRun::ValueAgain(_) | NotRun::ShownWords
            ) {
                ran.refused_values.insert(key);
            }
            let report = match (reason, task_call) {
                (NotRun::ValueAgain(what), Some(call)) => {
                    // The call runs in the block's place: code ran, unless its output
                    // is only shown again.
                    if ran.blocks.contains_key(call.trim()) {
                        not_run.push(reason);
                    }
                    let note = format!("{why}, sent again; {}", in_place_note(call, ran));
                    emit_not_run(sink, iteration, block, &note);
                    let report = |output: &str, value: Option<&str>| {
                        prompt::value_ran_instead(&code.code, what, call, output, value)
                    };
                    run_in_place(call, (iteration, block), env, sink, ran, &shape, report).await?
                }
                _ => {
                    not_run.push(reason);
                    emit_not_run(sink, iteration, block, &why);
                    report
                }
            };
            turn.reports.push(report);
            continue;
        }
        let outcome = env.execute(&code.code).await?;
        // Read before this block's output joins the run's: the word must have been
        // printed by an earlier block.
        let bare = outcome.error.as_deref().and_then(|error| {
            bare_final::read(
                &code.code,
                error,
                ran.blocks.values().map(|(_, out)| out.as_str()),
            )
        });
        let shaped = shape(&outcome.combined_output());
        emit_exec(sink, (iteration, block), &outcome, &shaped);
        turn.reports
            .push(prompt::exec_report(&code.code, language, &shaped));
        let earlier = ran.blocks.get(&key).map(|(_, output)| output.as_str());
        // Only the reply's last block: blocks after a middle one ran on past its value.
        let last_block = block + 1 == parsed.blocks.len();
        let answer_line = (outcome.error.is_none() && last_block)
            .then(|| answer_in_view(&key, &shaped, earlier, task_call))
            .flatten();
        ran.record(key, shaped, outcome.error.is_some());
        if let Some(notice) = prompt::exec_notices(&outcome) {
            turn.notices.push(notice);
        }
        turn.notices.extend(answer_line);
        let ran_block = BlockRan {
            code: &code.code,
            final_answer: outcome.final_answer,
            error: outcome.error.as_deref(),
            bare,
        };
        let checks = AnswerChecks {
            settings,
            task_call,
            task_answer,
            sink,
        };
        match answer_of_block(ran_block, ran, &checks, &mut turn.notices) {
            BlockAnswer::Answer(done) => {
                turn.final_answer = Some(done);
                return Ok(turn);
            }
            BlockAnswer::RunCall { answer, call } => {
                let report = questioned_again(
                    &answer,
                    call,
                    (iteration, block + 1),
                    env,
                    sink,
                    ran,
                    &shape,
                )
                .await?;
                turn.reports.push(report);
                return Ok(turn);
            }
            BlockAnswer::None => {}
        }
    }
    if !not_run.is_empty() && not_run.len() == parsed.blocks.len() {
        // Nothing ran: counted as a correction so that a third such reply in a row ends
        // in a forced answer.
        turn.correction = not_run.iter().max().map(|why| why.correction().to_owned());
    }
    // An answer outside the blocks: a `FINAL(...)` line of a reply with no code, else a
    // `FINAL_VAR(name)` evaluated after the reply's code ran. (What it is, whether it
    // was written as a value, how the trace names its source, where a call run in its
    // place goes in the trace.)
    let mut given = None;
    if parsed.blocks.is_empty() {
        given = parsed
            .final_literal
            .clone()
            .map(|answer| (answer, true, AnswerSource::Final, 0));
    } else if parsed.final_literal.is_some() {
        turn.notices.push(prompt::PREMATURE_FINAL.to_owned());
    }
    if let (None, Some(name)) = (&given, &parsed.final_var) {
        match env.final_var(name).await? {
            Some(value) => {
                given = Some((value, false, AnswerSource::FinalVar, parsed.blocks.len()));
            }
            None => turn.notices.push(format!(
                "FINAL_VAR({name}) names no variable in the REPL. Define it in a ```repl block first, or answer with FINAL(...)."
            )),
        }
    }
    if let Some((answer, written, source, block)) = given {
        match question_answer(&answer, written, ran, (task_call, task_answer), sink) {
            Questioned::Notice(notice) => turn.notices.push(notice),
            Questioned::RunCall(call) => {
                let at = (iteration, block);
                let report =
                    questioned_again(answer.trim(), call, at, env, sink, ran, &shape).await?;
                turn.reports.push(report);
            }
            Questioned::Taken => turn.final_answer = Some(outcome_of(answer, source, None)),
        }
        return Ok(turn);
    }
    if let Some(name) = parsed.unclosed_final {
        turn.notices.push(prompt::unclosed_final(name));
        turn.correction = Some(format!("an unclosed {name}("));
    } else if parsed.blocks.is_empty() && parsed.final_var.is_none() {
        // A misfenced reply is code, not a sentence stating an answer; after code that
        // found nothing, whatever a sentence states is a guess.
        let output = ran
            .last_output
            .as_deref()
            .filter(|_| parsed.misfence.is_none());
        let nothing = output.and_then(prose_answer::found_nothing);
        let stated = output.and_then(|out| prose_answer::stated(&parsed.transcript_text, out));
        let prose = parsed.transcript_text.trim();
        let mut correction = Some(prompt::misfence_form(parsed.misfence.as_ref()));
        // A stated value not of the task's answer's shape (s18-seed14 js `aggregate`
        // item 4: "… is `02:21`." for "which label").
        let unfit = stated
            .zip(task_answer.kind)
            .filter(|(value, kind)| !kind.fits(value))
            .map(|(_, kind)| kind.described());
        // The task's call, offered where the prose cannot answer — a zero the call did
        // not give (latest-seed12 js `pairs` item 4: "The answer is 0." three times), a
        // value of another shape, an answer no output ended in, anything after code that
        // found nothing — and run in its place when the same prose comes again.
        let offered = match (nothing, stated) {
            (None, Some(value)) => task_call.filter(|call| {
                (prompt::is_zero(value) || unfit.is_some()) && !ran.blocks.contains_key(call.trim())
            }),
            (None, None) => output.and(task_call).filter(|_| !prose.is_empty()),
            // After code that found nothing, a guess (s18c-seed16 js `aggregate` item
            // 1: `null`, then "… is \"fraud\"." three times, never the call offered).
            (Some(_), _) => task_call.filter(|call| !ran.blocks.contains_key(call.trim())),
        };
        let again = offered.is_some() && !ran.refused_values.insert(prose.to_owned());
        let notice = match (nothing, stated, offered) {
            (_, _, Some(call)) if again => {
                // No block to mark `[not run: …]`: the trace says why a call the
                // model did not write runs.
                sink.emit(EventData::Warning {
                    message: format!(
                        "the reply is the same answer in prose as before, with no code; {}",
                        in_place_note(call, ran)
                    ),
                });
                let report = |output: &str, value: Option<&str>| {
                    prompt::prose_ran_instead(call, output, value)
                };
                if !ran.blocks.contains_key(call.trim()) {
                    // The call runs now: not a reply that got only a correction.
                    correction = None;
                }
                run_in_place(call, (iteration, 0), env, sink, ran, &shape, report).await?
            }
            (Some(nothing), _, _) => prompt::answer_after_nothing(nothing, language, task_call),
            (None, Some(value), call) => prompt::answer_in_prose(value, call, unfit.as_deref()),
            (None, None, Some(call)) => prompt::answer_not_printed(call),
            (None, None, None) => prompt::correction(parsed.misfence.as_ref(), language),
        };
        turn.notices.push(notice);
        if !parsed.quoted.is_empty() {
            let quoted = parsed.quoted.iter().map(|q| (q.action.as_str(), &q.why));
            turn.notices.push(prompt::not_taken(quoted));
        }
        turn.correction = correction;
    }
    Ok(turn)
}

/// The value of a block that is only the one value the last block that ran printed
/// last (`3985` after `console.log(…)` printed `3985`): the model's answer, sent as
/// code. The local model did that three times after the task's call printed the right
/// count, told each time to send `FINAL(3985)` instead, and was forced (docs/eval.md,
/// after-inplace-seed8 `pairs` item 1).
fn printed_value_sent_back(code: &str, ran: &RanBefore) -> Option<String> {
    let value = value_block::read(code)?.scalar()?;
    let printed = prose_answer::printed_value(ran.last_output.as_deref()?)?;
    (value == printed).then(|| value.to_owned())
}

/// The notice with the exact `FINAL` line after a block that printed one value the
/// loop can tell answers the task: the task's exact call printed only it, or the same
/// code printed the same value again. The local model copied the task's call, saw the
/// count, and sent the call again until it was refused and then forced, four times
/// of five (docs/eval.md, head-seed9 js `pairs`): it is shown no line to answer with
/// after a block that ran. A first run of any other code gets none: a value it prints
/// may be a step on the way.
fn answer_in_view(
    code: &str,
    shaped: &str,
    earlier: Option<&str>,
    task_call: Option<&str>,
) -> Option<String> {
    let value = prose_answer::printed_value(shaped)?;
    let only_line = shaped.trim().lines().count() == 1;
    if only_line && task_call.is_some_and(|call| call.trim() == code) {
        return Some(prompt::task_call_printed(value));
    }
    let other_call = task_call.filter(|call| call.trim() != code);
    (earlier == Some(shaped)).then(|| prompt::same_value_printed_again(value, other_call))
}

/// What a block is checked against before it runs.
struct Checks<'a> {
    language: &'a str,
    ran: &'a RanBefore,
    context_chars: u64,
    shown: &'a [&'a str],
    task_call: Option<&'a str>,
}

/// A block not run: why, in the trace's words, and the report the model reads.
struct Refusal {
    reason: NotRun,
    why: String,
    report: String,
}

/// Why `code` is not run and what the model is told, or `None` to run it. In order:
/// the same code a third time, a literal assigned to `context`, the REPL's error
/// message copied back, a token of the task or the preview, a word that failed as no
/// variable's name sent again ([`word_as_code`]), a block of only a value.
fn refusal(code: &str, checks: &Checks<'_>) -> Option<Refusal> {
    let Checks {
        language,
        ran,
        context_chars,
        shown,
        task_call,
    } = *checks;
    let refuse = |reason, why: &str, report| {
        Some(Refusal {
            reason,
            why: why.to_owned(),
            report,
        })
    };
    if let Some((times, output)) = ran
        .blocks
        .get(code.trim())
        .filter(|(times, _)| *times >= REPEAT_LIMIT)
    {
        let value = prose_answer::printed_value(output);
        return refuse(
            NotRun::Repeat,
            &format!("the same code ran {times} times already"),
            prompt::repeated_code(code, language, *times, output, value, task_call),
        );
    }
    if let Some(assignment) = context_literal::assignment(code).filter(|_| context_chars > 0) {
        return refuse(
            NotRun::ContextLiteral,
            "it assigns a literal to `context`",
            prompt::context_literal(code, language, assignment, context_chars, task_call),
        );
    }
    let outputs = ran.blocks.values().map(|(_, output)| output.as_str());
    if let Some(header) = echoed_error::read(code, outputs) {
        return refuse(
            NotRun::EchoedError,
            "it is the REPL's error message copied back",
            prompt::echoed_error(code, language, header, task_call),
        );
    }
    let again = ran.refused_values.contains(code.trim());
    if let Some(token) = shown_words::read(code, shown) {
        return refuse(
            if again {
                NotRun::ValueAgain("text you were shown")
            } else {
                NotRun::ShownWords
            },
            "it is text the model was shown, not code",
            prompt::shown_words(token, language, task_call),
        );
    }
    if let Some(word) = word_as_code::word(code).filter(|_| again) {
        return refuse(
            NotRun::ValueAgain("a word no variable has"),
            "it is a word no variable of the REPL has",
            prompt::undefined_word(word, task_call),
        );
    }
    if value_block::is_sentence(code) {
        return refuse(
            if again {
                NotRun::ValueAgain("a sentence")
            } else {
                NotRun::Value
            },
            "it is a sentence, not code",
            prompt::sentence_block(code, task_call),
        );
    }
    let value = value_block::read(code)?;
    // A number or word an earlier block printed may be the model's answer, sent as
    // code: it keeps its FINAL line. One nothing printed is a guess.
    let printed = value.scalar().is_some_and(|scalar| {
        ran.blocks
            .values()
            .any(|(_, output)| prose_answer::stands_in(output, scalar))
    });
    // A list or map after any value was refused is the same loop in other values: the
    // local model sent three arrays of city names, one shorter each time, until forced
    // (docs/eval.md, s18d-seed17 js `pairs` item 1).
    let another_list = value.scalar().is_none() && !ran.refused_values.is_empty();
    refuse(
        if (again || another_list) && !printed {
            NotRun::ValueAgain("a value")
        } else {
            NotRun::Value
        },
        "it is only a value written into the code",
        prompt::value_block(code, value.scalar(), task_call),
    )
}

/// Runs `call`, the task's exact helper call, in place of a reply that cannot answer —
/// a value or sentence sent again after its refusal, the same prose again after an
/// answer no output showed — and returns the report the model reads, written by
/// `report` from the call's output and the one value it printed (for the `FINAL`
/// line). The local model sent the same array of city names three times in a row,
/// refused each time with the call to send, and was forced (docs/eval.md,
/// after-shown-seed7 `pairs` items 2–4, after-value-seed8 item 0), and once a number no
/// code had printed (`10`, item 2); the call in a refusal it did not copy.
async fn run_in_place(
    call: &str,
    (iteration, block): (u32, usize),
    env: &mut dyn CodeRepl,
    sink: &EventSink,
    ran: &mut RanBefore,
    shape: impl Fn(&str) -> String,
    report: impl Fn(&str, Option<&str>) -> String,
) -> Result<String, LoopError> {
    if let Some((_, output)) = ran.blocks.get(call.trim()) {
        // Its output cannot change: shown again, not run again.
        return Ok(report(output, prose_answer::printed_value(output)));
    }
    sink.emit(EventData::Code(CodeRecord {
        iteration,
        block,
        code: call.to_owned(),
    }));
    let outcome = env.execute(call).await?;
    let shaped = shape(&outcome.combined_output());
    emit_exec(sink, (iteration, block), &outcome, &shaped);
    let printed = prose_answer::printed_value(&shaped).filter(|_| outcome.error.is_none());
    let text = report(&shaped, printed);
    ran.record(call.trim().to_owned(), shaped, outcome.error.is_some());
    Ok(text)
}

/// The task's `call` run in place of `answer`, a `FINAL` questioned with that call and
/// sent again unchanged (block `block` of `iteration` in the trace): the report of what
/// it printed, with the exact `FINAL` line.
async fn questioned_again(
    answer: &str,
    call: &str,
    (iteration, block): (u32, usize),
    env: &mut dyn CodeRepl,
    sink: &EventSink,
    ran: &mut RanBefore,
    shape: &(dyn Fn(&str) -> String + Sync),
) -> Result<String, LoopError> {
    sink.emit(EventData::Warning {
        message: format!(
            "the answer {answer} came again after it was questioned; the task's call runs in its place"
        ),
    });
    let report = |output: &str, value: Option<&str>| {
        prompt::questioned_answer_ran_instead(answer, call, output, value)
    };
    run_in_place(call, (iteration, block), env, sink, ran, shape, report).await
}

/// What takes the place of a reply sent again, in the trace's words: the task's `call`
/// runs — or, when it ran before, its output is shown again ([`run_in_place`] does not
/// run it twice).
fn in_place_note(call: &str, ran: &RanBefore) -> &'static str {
    if ran.blocks.contains_key(call.trim()) {
        "the output of the task's call is shown again"
    } else {
        "the task's call runs in its place"
    }
}

/// Why a block of the reply was not run. When none of a reply's blocks ran, the
/// strongest reason (the last variant first) names the correction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum NotRun {
    /// The same code already ran [`REPEAT_LIMIT`] times.
    Repeat,
    /// Only a value written into the code ([`value_block`]).
    Value,
    /// The same value as a block refused before, not one an earlier block printed, or
    /// a word that failed as no variable's name sent again ([`word_as_code`]), or a
    /// token of the task or the preview sent again: the task's call runs in its place
    /// ([`run_in_place`]). It holds what the block is, in the words of that report
    /// (`a value`, `a sentence`, `a word no variable has`, `text you were shown`).
    ValueAgain(&'static str),
    /// A token of the task or the context's preview written as code ([`shown_words`]).
    ShownWords,
    /// The REPL's error message copied back as code ([`echoed_error`]).
    EchoedError,
    /// It sets `context` to a literal ([`context_literal`]).
    ContextLiteral,
}

impl NotRun {
    /// The correction a reply of only such blocks counts as.
    fn correction(self) -> &'static str {
        match self {
            Self::Repeat => "code that already ran twice",
            Self::Value | Self::ValueAgain(_) => "code that is only a value",
            Self::ShownWords => "text of the task or the context sent as code",
            Self::EchoedError => "an error message sent as code",
            Self::ContextLiteral => "code that replaces `context` with a literal",
        }
    }
}

/// The trace's record of the block that ran as `outcome`, with its `shaped` output.
fn emit_exec(
    sink: &EventSink,
    (iteration, block): (u32, usize),
    outcome: &ExecOutcome,
    shaped: &str,
) {
    sink.emit(EventData::Exec(ExecRecord {
        iteration,
        block,
        output: shaped.to_owned(),
        error: outcome.error.is_some(),
        timed_out: outcome.timed_out,
        duration_ms: outcome.duration.as_millis() as u64,
    }));
}

/// The trace's record of a block that was not run, and `why` (`[not run: …]`).
fn emit_not_run(sink: &EventSink, iteration: u32, block: usize, why: &str) {
    sink.emit(EventData::Exec(ExecRecord {
        iteration,
        block,
        output: format!("[not run: {why}]"),
        error: false,
        timed_out: false,
        duration_ms: 0,
    }));
}

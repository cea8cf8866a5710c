//! A turn of the tools medium (`--env tools`, `--env plan`): the model's tool calls run
//! in order and each result goes back in the provider's own shape — a `tool` message
//! answering the call's id when the call came natively, one text report per call when
//! it was written as text. The run ends by `FINAL(...)` in a message without calls, or
//! by a `final_answer` call made alone (the protocol: one beside other calls is
//! refused, as the model has not seen their results).

use std::time::Instant;

use super::correction::{premature_final, Answer, Ask, Block, Corrections, Form, Hook, Ran, Reply};
use super::log::BlockLog;
use super::turn::{judge_answer, outcome_of, Turn};
use super::LoopError;
use crate::env::tools::{
    final_answer_of, parse_text_calls, read_text_calls, MicroTool, TextCalls, ToolProtocol,
};
use crate::env::{ToolBox, ToolOutcome};
use crate::events::{AnswerSource, CodeRecord, EventData, EventSink, ExecRecord, TextRecord};
use crate::output::shape_output;
use crate::parse::{parse_response, Quoted};
use crate::provider::{ChatMessage, Completion, ToolCall};

/// Where the turn stands.
pub(super) struct Step<'a> {
    pub iteration: u32,
    /// The most characters of a result shown (`--max-output-chars`, bounded by the
    /// window).
    pub max_output_chars: usize,
    pub protocol: ToolProtocol,
    /// The rules switched on.
    pub corrections: &'a Corrections,
    /// What ran so far in the run.
    pub log: &'a mut BlockLog,
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
        max_output_chars,
        protocol,
        corrections,
        log,
    } = step;
    let at = (sink, iteration);
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
    let quoted = not_taken(&parsed.quoted, &written);
    for q in &quoted {
        sink.emit(EventData::Warning {
            message: format!("{} in the reply was not acted on: {}", q.action, q.why),
        });
    }
    let reply = Reply {
        form: Form::Tools,
        parsed: &parsed,
        text,
        truncated: completion.truncated,
        calls: calls.len(),
        not_taken: &quoted,
        log,
        context_chars: 0,
    };
    let said = corrections.ask(Hook::OnReply, at, |rule| rule.on_reply(&reply));
    let mut turn = Turn {
        refused: said.refused.as_ref().map(|(rule, _)| *rule),
        ..Turn::default()
    };
    turn.notices.extend(said.texts());
    if turn.refused.is_some() {
        // Nothing runs: native calls go back as text (a native call needs a result).
        messages.push(ChatMessage::assistant(text));
        return Ok(turn);
    }
    messages.push(if native {
        ChatMessage::assistant_calls(text, calls.clone())
    } else {
        ChatMessage::assistant(text)
    });
    if calls.is_empty() {
        if let Some(answer) = &parsed.final_literal {
            let view = Answer {
                form: Form::Tools,
                answer,
                source: AnswerSource::Final,
                tools: Some(&mut *env),
            };
            match judge_answer(corrections, at, view) {
                Ok(notes) => {
                    turn.notices.extend(notes);
                    turn.final_answer = Some(outcome_of(answer.clone(), AnswerSource::Final, None));
                }
                Err(texts) => turn.notices.extend(texts),
            }
        }
        return Ok(turn);
    }
    let alone = calls.len() == 1;
    let mut refused_calls = 0;
    for (index, call) in calls.iter().enumerate() {
        let rendered = render_call(call);
        sink.emit(EventData::Code(CodeRecord {
            iteration,
            block: index,
            code: rendered.clone(),
        }));
        let started = Instant::now();
        let view = Block {
            form: Form::Tools,
            code: &rendered,
            log,
            context_chars: 0,
        };
        let said = corrections.ask(Hook::BeforeBlock, at, |rule| rule.before_block(&view));
        turn.notices.extend(said.notes);
        let refused = match said.refused {
            Some((rule, why)) => {
                refused_calls += 1;
                turn.refused = Some(rule);
                Some(why)
            }
            None if !is_final_answer(call) => None,
            None if !alone => Some(premature_final::TOOLS.to_owned()),
            None => final_answer_of(&call.arguments).and_then(|answer| {
                let view = Answer {
                    form: Form::Tools,
                    answer: &answer,
                    source: AnswerSource::FinalAnswerTool,
                    tools: Some(&mut *env),
                };
                judge_answer(corrections, at, view)
                    .err()
                    .map(|t| t.join("\n\n"))
            }),
        };
        let ran_call = refused.is_none();
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
                content.clone(),
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
        if !ran_call {
            // A refused call did not run: its refusal is no result to judge or to
            // remember (a later repeat would quote the refusal as the call's result).
            continue;
        }
        let ran = Ran {
            form: Form::Tools,
            code: &rendered,
            output: &content,
            error: outcome.is_error.then_some(content.as_str()),
            log,
        };
        let said = corrections.ask(Hook::AfterBlock, at, |rule| rule.after_block(&ran));
        turn.notices.extend(said.texts());
        log.record(&rendered, &content);
    }
    if refused_calls < calls.len() {
        turn.refused = None;
    }
    Ok(turn)
}

/// What the reply wrote without taking it: actions the parser judged, and calls the
/// text protocol judged.
fn not_taken(parsed: &[Quoted], written: &TextCalls) -> Vec<Quoted> {
    parsed
        .iter()
        .cloned()
        .chain(written.quoted.iter().map(|q| Quoted {
            action: format!("a {} call", q.name),
            why: q.why.clone(),
        }))
        .collect()
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

/// A call as the trace and text reports show it: `ctx_grep({"variable":…})`.
fn render_call(call: &ToolCall) -> String {
    let arguments = call.arguments.trim();
    if arguments.is_empty() {
        format!("{}()", call.name)
    } else {
        format!("{}({arguments})", call.name)
    }
}

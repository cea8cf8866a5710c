//! `--max-time` after a model reply. The time budget is checked before each model
//! call, and again when a reply arrives: a reply that comes after the run's deadline
//! runs nothing — its code could take up to `--exec-timeout` more, its tool calls
//! start sub-calls — and the run ends with its forced answer. A reply that only
//! answers (a `FINAL(…)`, a `FINAL_VAR(…)`, a lone `final_answer` call) costs nothing
//! to take, so it is still taken: the model's answer, not a second request for it.

use super::medium::Medium;
use crate::env::tools::{parse_text_calls, MicroTool};
use crate::events::{EventData, EventSink, TextRecord};
use crate::parse::parse_response;
use crate::provider::{ChatMessage, Completion};

/// A reply that came after the deadline and does not only answer: its text goes into
/// the trace and the conversation, and nothing of it runs.
pub(super) fn set_aside(
    completion: &Completion,
    iteration: u32,
    sink: &EventSink,
    messages: &mut Vec<ChatMessage>,
) {
    let text = completion.text.trim();
    sink.emit(EventData::Text(TextRecord {
        iteration,
        text: text.to_owned(),
    }));
    messages.push(ChatMessage::assistant(if text.is_empty() {
        "(tool calls, not run: the time budget was spent)"
    } else {
        text
    }));
}

/// True when `completion` only answers: no code to run and no call but one
/// `final_answer`, and an answer the turn reads (parsing is linear, so reading the
/// reply here and again in its turn is cheap).
pub(super) fn only_answers(completion: &Completion, medium: &Medium<'_>) -> bool {
    match medium {
        Medium::Code(repl) => {
            let parsed = parse_response(&completion.text, repl.fence_tags());
            parsed.blocks.is_empty()
                && (parsed.final_literal.is_some() || parsed.final_var.is_some())
        }
        Medium::Tools { .. } => {
            let calls = if completion.tool_calls.is_empty() {
                parse_text_calls(&completion.text)
            } else {
                completion.tool_calls.clone()
            };
            match calls.as_slice() {
                [] => parse_response(&completion.text, &[])
                    .final_literal
                    .is_some(),
                [call] => call.name.trim() == MicroTool::FinalAnswer.name(),
                _ => false,
            }
        }
    }
}

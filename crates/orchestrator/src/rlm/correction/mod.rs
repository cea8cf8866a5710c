//! Corrections: the rules that read the model's reply, its code, its tool calls and
//! their results, and tell the model what went wrong with them (docs/loop.md).
//!
//! A rule is a [`Correction`]: a set of hook points, each a default no-op, that the
//! loop calls at fixed moments of a turn — the reply was parsed ([`Correction::on_reply`]),
//! a block or a call is about to run or ran ([`Correction::before_block`],
//! [`Correction::after_block`]), an answer is proposed ([`Correction::on_answer`]), the
//! forced answer came ([`Correction::on_forced`]). Each hook returns a [`Verdict`]. The
//! rules a run has switched on ([`Corrections`], `--corrections`) are asked in order;
//! the first [`Verdict::Refuse`] wins and the notes before it join, and every verdict
//! that says something is an `EventData::Correction` in the trace, with the exact text
//! the model is sent.
//!
//! No rule reads the task. What stays on whatever `--corrections` says (the protocol,
//! the output schema, the window fit, the deadline) is not a rule.

mod answer_before_result;
pub(super) mod bare_final;
mod context_literal;
mod echoed_error;
mod forced_retry;
mod no_action;
mod not_taken;
pub(super) mod premature_final;
mod registry;
mod repeat_limit;
mod sole_line;
mod tool_call_as_code;
mod truncated_reply;
mod unclosed_final;
mod value_block;
mod views;

pub use crate::corrections::{Corrections, Rule};
pub(super) use registry::Ask;
pub(super) use views::{Answer, Block, Forced, Form, Ran, Reply};

pub use crate::events::CorrectionHook as Hook;

/// What a rule says at a hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing to say: the loop goes on as the protocol says.
    Take,
    /// Go on, and append this notice to what the model reads next.
    Note(String),
    /// Do not accept this answer, or do not run this; the model is told this instead.
    Refuse(String),
}

/// One rule. Every hook is a no-op unless the rule has something to say there.
pub trait Correction: Sync {
    /// The rule's name (`--corrections`, the trace).
    fn rule(&self) -> Rule;

    /// The reply was parsed: its text, blocks or calls, `FINAL`, whether it was cut.
    /// `Refuse` runs nothing of the reply.
    fn on_reply(&self, _reply: &Reply<'_>) -> Verdict {
        Verdict::Take
    }

    /// A code block or a tool call is about to run. `Refuse` does not run it; the
    /// text is its report.
    fn before_block(&self, _block: &Block<'_>) -> Verdict {
        Verdict::Take
    }

    /// A code block or a tool call ran, with this result.
    fn after_block(&self, _ran: &Ran<'_>) -> Verdict {
        Verdict::Take
    }

    /// An answer is proposed (`FINAL`, `FINAL_VAR`, `SUBMIT`, `final_answer`).
    /// `Refuse` does not end the run.
    fn on_answer(&self, _answer: &mut Answer<'_>) -> Verdict {
        Verdict::Take
    }

    /// The forced answer at the end of the budget came. `Refuse` asks once more with
    /// the text, when a budget leaves a call for it.
    fn on_forced(&self, _forced: &Forced<'_>) -> Verdict {
        Verdict::Take
    }
}

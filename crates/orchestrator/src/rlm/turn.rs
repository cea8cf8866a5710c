//! What one turn leaves for the loop — the reports and notices the model reads next,
//! an accepted answer, the rule that refused the whole reply — and the two things
//! every turn does with the corrections: judge a proposed answer, and count the same
//! refusal coming back.

use serde_json::Value;

use super::correction::{Answer, Ask, Corrections, Hook, Rule};
use super::LoopOutcome;
use crate::events::{AnswerSource, EventSink};

/// What one turn did, for the message that follows it.
#[derive(Debug, Default)]
pub(super) struct Turn {
    /// Reports of what ran (code and its output; tool results written as text).
    pub reports: Vec<String>,
    /// The corrections' texts and the protocol's notices.
    pub notices: Vec<String>,
    /// Set when the turn ended the run.
    pub final_answer: Option<LoopOutcome>,
    /// Code ran, so the model's variables may have changed.
    pub ran_code: bool,
    /// The rule that refused the whole reply (nothing of it ran), for counting repeats.
    pub refused: Option<Rule>,
}

/// A final answer the turn accepted (its iteration count is set by the loop).
pub(super) fn outcome_of(
    answer: String,
    source: AnswerSource,
    submitted: Option<Value>,
) -> LoopOutcome {
    LoopOutcome {
        answer,
        source,
        forced: false,
        iterations: 0,
        submitted,
    }
}

/// Asks the enabled rules of `view`, a proposed answer: `Ok` with their notes when it
/// is taken, `Err` with the texts the model is sent instead when a rule refused it.
pub(super) fn judge_answer(
    corrections: &Corrections,
    at: (&EventSink, u32),
    mut view: Answer<'_>,
) -> Result<Vec<String>, Vec<String>> {
    let said = corrections.ask(Hook::OnAnswer, at, |rule| rule.on_answer(&mut view));
    if said.refused.is_some() {
        Err(said.texts())
    } else {
        Ok(said.notes)
    }
}

/// Refusals of the whole reply by the same rule in a row after which the run stops
/// asking and forces an answer: a third reply two corrections did not fix is not a
/// fourth try.
const MAX_SAME_REFUSALS: u32 = 2;

/// The same rule refusing whole replies in a row.
#[derive(Debug, Default)]
pub(super) struct Repeats {
    last: Option<(Rule, u32)>,
}

impl Repeats {
    /// Counts the turn's refusal; `Some(reason)` when the run should stop.
    pub(super) fn stop_after(&mut self, refused: Option<Rule>) -> Option<String> {
        self.last = match (refused, self.last.take()) {
            (Some(rule), Some((last, count))) if rule == last => Some((rule, count + 1)),
            (Some(rule), _) => Some((rule, 1)),
            (None, _) => None,
        };
        let (rule, count) = self.last?;
        (count > MAX_SAME_REFUSALS).then(|| {
            format!("the reply needed the same correction ({rule}) again, after {MAX_SAME_REFUSALS} corrections")
        })
    }
}

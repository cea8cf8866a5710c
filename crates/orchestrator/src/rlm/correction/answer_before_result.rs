//! An answer the tools have not supported yet: the environment keeps its own gate
//! (under `--env plan`, an answer before any plan gave a result or right after a plan
//! failed; under `--env tools`, one right after a failed plan), read only from its own
//! results. This rule asks it ([`crate::env::ToolBox::refuse_answer`]) and sends the
//! model its reason; the forced last answer is never asked (a run must end).

use super::{Answer, Correction, Rule, Verdict};

/// The rule.
pub(super) struct AnswerBeforeResult;

impl Correction for AnswerBeforeResult {
    fn rule(&self) -> Rule {
        Rule::AnswerBeforeResult
    }

    fn on_answer(&self, answer: &mut Answer<'_>) -> Verdict {
        match answer
            .tools
            .as_mut()
            .and_then(|tools| tools.refuse_answer())
        {
            Some(why) => Verdict::Refuse(why),
            None => Verdict::Take,
        }
    }
}

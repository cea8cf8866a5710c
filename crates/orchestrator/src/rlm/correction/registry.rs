//! How one hook of every enabled rule is asked and traced: the rule of each name,
//! and [`Ask::ask`] on the set a run switched on.

use super::{
    answer_before_result, bare_final, context_literal, echoed_error, forced_retry, no_action,
    not_taken, premature_final, repeat_limit, tool_call_as_code, truncated_reply, unclosed_final,
    value_block, Correction, Hook, Verdict,
};
use crate::corrections::{Corrections, Rule};
use crate::events::{CorrectionRecord, CorrectionVerdict, EventData, EventSink};

/// The hooks of `rule`.
fn correction(rule: Rule) -> &'static dyn Correction {
    match rule {
        Rule::TruncatedReply => &truncated_reply::TruncatedReply,
        Rule::UnclosedFinal => &unclosed_final::UnclosedFinal,
        Rule::NoAction => &no_action::NoAction,
        Rule::NotTaken => &not_taken::NotTaken,
        Rule::ToolCallAsCode => &tool_call_as_code::ToolCallAsCode,
        Rule::PrematureFinal => &premature_final::PrematureFinal,
        Rule::RepeatLimit => &repeat_limit::RepeatLimit,
        Rule::ContextLiteral => &context_literal::ContextLiteral,
        Rule::EchoedError => &echoed_error::EchoedError,
        Rule::ValueBlock => &value_block::ValueBlock,
        Rule::BareFinal => &bare_final::BareFinal,
        Rule::AnswerBeforeResult => &answer_before_result::AnswerBeforeResult,
        Rule::ForcedRetry => &forced_retry::ForcedRetry,
    }
}

/// Asking the rules of a set at a hook.
pub trait Ask {
    /// Asks `hook` of every enabled rule in order with `ask`, until one refuses; each
    /// verdict that says something is traced at `iteration`.
    fn ask(
        &self,
        hook: Hook,
        at: (&EventSink, u32),
        ask: impl FnMut(&dyn Correction) -> Verdict,
    ) -> Said;
}

impl Ask for Corrections {
    fn ask(
        &self,
        hook: Hook,
        (sink, iteration): (&EventSink, u32),
        mut ask: impl FnMut(&dyn Correction) -> Verdict,
    ) -> Said {
        let mut said = Said::default();
        for rule_of in self.rules().iter().map(|rule| correction(*rule)) {
            let rule = rule_of.rule();
            let (verdict, text) = match ask(rule_of) {
                Verdict::Take => continue,
                Verdict::Note(text) => (CorrectionVerdict::Note, text),
                Verdict::Refuse(text) => (CorrectionVerdict::Refuse, text),
            };
            sink.emit(EventData::Correction(CorrectionRecord {
                iteration,
                rule: rule.name().to_owned(),
                hook,
                verdict,
                text: text.clone(),
            }));
            match verdict {
                CorrectionVerdict::Note => said.notes.push(text),
                CorrectionVerdict::Refuse => {
                    said.refused = Some((rule, text));
                    break;
                }
            }
        }
        said
    }
}

/// What the rules said at one hook.
#[derive(Debug, Default)]
pub struct Said {
    /// The rule that refused and its text, if one did.
    pub refused: Option<(Rule, String)>,
    /// The notes of the rules asked before it, in order.
    pub notes: Vec<String>,
}

impl Said {
    /// Every text, the refusal first.
    pub fn texts(self) -> Vec<String> {
        let mut texts: Vec<String> = self.refused.into_iter().map(|(_, text)| text).collect();
        texts.extend(self.notes);
        texts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_answers_to_its_own_name() {
        for rule in Rule::ALL {
            assert_eq!(correction(rule).rule(), rule);
        }
    }
}

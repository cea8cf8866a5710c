//! A reply that did nothing but wrote actions it did not take — a `FINAL(…)` in an
//! indented example, a call it said it would not make, a quoted block
//! ([`rlm_protocol::reply`] decides): the model is told what was not acted on and why,
//! and how an action is taken.

use super::{Correction, Reply, Rule, Verdict};
use crate::parse::Quoted;

/// The rule.
pub(super) struct NotTaken;

/// What was not acted on and why (the first three), and how an action is taken.
fn text(quoted: &[Quoted]) -> String {
    let listed: Vec<String> = quoted
        .iter()
        .take(3)
        .map(|q| format!("{} ({})", q.action, q.why))
        .collect();
    format!(
        "Not acted on: {}. An action counts only where your reply takes it: on a line of its own, not quoted, not in a blockquote or an indented example, not described as something not to do or to do later.",
        listed.join("; ")
    )
}

impl Correction for NotTaken {
    fn rule(&self) -> Rule {
        Rule::NotTaken
    }

    fn on_reply(&self, reply: &Reply<'_>) -> Verdict {
        if reply.truncated || reply.acts() || reply.answers() || reply.not_taken.is_empty() {
            return Verdict::Take;
        }
        Verdict::Note(text(reply.not_taken))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rlm::correction::views::tests::code_reply;

    const INDENTED: &str =
        "I would answer like this:\n\n    FINAL(42)\n\nbut first I need to look.";

    #[test]
    fn only_a_reply_that_did_nothing_is_told_what_it_did_not_take() {
        for (text, noted) in [
            (INDENTED, true),
            ("FINAL(42)", false),
            ("Let me look first.", false),
        ] {
            let verdict = code_reply(text, |r| NotTaken.on_reply(r));
            assert_eq!(matches!(verdict, Verdict::Note(_)), noted, "{text}");
        }
        insta::assert_debug_snapshot!("not_taken", code_reply(INDENTED, |r| NotTaken.on_reply(r)));
    }
}

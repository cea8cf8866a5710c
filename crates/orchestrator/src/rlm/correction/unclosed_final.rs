//! A `FINAL(` or `FINAL_VAR(` opened and never closed: the protocol takes no answer
//! from it (its end is missing: a slip, or a reply that ran out), and the model is
//! told to write it again whole. A reply with nothing else to run is refused; beside
//! code or calls that run, it is a note.

use super::{Correction, Reply, Rule, Verdict};

/// The rule.
pub(super) struct UnclosedFinal;

/// Told for an unclosed `name(` (`FINAL`, `FINAL_VAR`).
fn text(name: &str) -> String {
    format!(
        "Your {name}( was never closed with `)`, so it was not taken as the final answer. Write it again, whole, with its closing parenthesis: {name}(...)."
    )
}

impl Correction for UnclosedFinal {
    fn rule(&self) -> Rule {
        Rule::UnclosedFinal
    }

    fn on_reply(&self, reply: &Reply<'_>) -> Verdict {
        match reply.parsed.unclosed_final {
            Some(name) if !reply.answers() && reply.acts() => Verdict::Note(text(name)),
            Some(name) if !reply.answers() => Verdict::Refuse(text(name)),
            _ => Verdict::Take,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rlm::correction::views::tests::code_reply;

    #[test]
    fn an_open_final_is_refused_alone_and_noted_beside_code() {
        for (text, expected) in [
            ("FINAL(42", "refuse"),
            ("FINAL_VAR(answer", "refuse"),
            ("```repl\nprint(1)\n```\nFINAL(4", "note"),
            ("FINAL(42)", "take"),
            ("The answer is (roughly) 42.", "take"),
        ] {
            let verdict = code_reply(text, |r| UnclosedFinal.on_reply(r));
            let got = match verdict {
                Verdict::Take => "take",
                Verdict::Note(_) => "note",
                Verdict::Refuse(_) => "refuse",
            };
            assert_eq!(got, expected, "{text}");
        }
    }

    #[test]
    fn the_text_the_model_reads() {
        let verdict = code_reply("FINAL(the answer is", |r| UnclosedFinal.on_reply(r));
        insta::assert_debug_snapshot!("unclosed_final", verdict);
    }
}

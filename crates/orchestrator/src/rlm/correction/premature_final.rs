//! A `FINAL(...)` written in the same reply as code or tool calls: the protocol does
//! not take it (the model has not seen what that code prints, SPEC 4.1), and this rule
//! tells the model so, and to answer in a reply of its own after reading the output.

use super::{Correction, Form, Reply, Rule, Verdict};

/// The rule.
pub(super) struct PrematureFinal;

/// Told under the code medium.
const CODE: &str = "Your FINAL(...) was written in the same message as code, before that code ran, so it was not accepted. Read the output above, then answer with FINAL(...) or FINAL_VAR(name) in a message without code.";

/// Told under the tools medium (also the result of a `final_answer` made beside other
/// calls, which the protocol refuses).
pub(in crate::rlm) const TOOLS: &str = "Your final answer came in the same message as other tool calls, before you saw their results, so it was not accepted. Read the results, then answer in a message of its own.";

impl Correction for PrematureFinal {
    fn rule(&self) -> Rule {
        Rule::PrematureFinal
    }

    fn on_reply(&self, reply: &Reply<'_>) -> Verdict {
        if reply.truncated || !reply.acts() || reply.parsed.final_literal.is_none() {
            return Verdict::Take;
        }
        Verdict::Note(
            match reply.form {
                Form::Code { .. } => CODE,
                Form::Tools => TOOLS,
            }
            .to_owned(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rlm::correction::views::tests::{code_reply, tools_reply};

    #[test]
    fn a_final_beside_code_or_calls_is_noted() {
        for (text, noted) in [
            ("```repl\nprint(1)\n```\nFINAL(1)", true),
            ("FINAL(1)", false),
            ("```repl\nprint(1)\n```", false),
        ] {
            let verdict = code_reply(text, |r| PrematureFinal.on_reply(r));
            assert_eq!(matches!(verdict, Verdict::Note(_)), noted, "{text}");
        }
        let tools = tools_reply("FINAL(3)", 1, |r| PrematureFinal.on_reply(r));
        assert!(matches!(tools, Verdict::Note(_)));
        insta::assert_debug_snapshot!(
            "premature_final_code",
            code_reply("```repl\nprint(1)\n```\nFINAL(1)", |r| PrematureFinal
                .on_reply(r))
        );
        insta::assert_debug_snapshot!("premature_final_tools", tools);
    }
}

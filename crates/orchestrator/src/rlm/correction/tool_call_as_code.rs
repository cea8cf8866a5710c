//! Code that came as a tool call (an XML or JSON call holding code) where the REPL
//! takes fenced code: the parser runs it as code, and the model is told that there are
//! no tool calls here, so its next reply uses the fence.

use super::{Correction, Form, Reply, Rule, Verdict};

/// The rule.
pub(super) struct ToolCallAsCode;

impl Correction for ToolCallAsCode {
    fn rule(&self) -> Rule {
        Rule::ToolCallAsCode
    }

    fn on_reply(&self, reply: &Reply<'_>) -> Verdict {
        match reply.form {
            Form::Code { language } if reply.parsed.from_tool_call && !reply.truncated => {
                Verdict::Note(format!(
                    "Your tool call was run as {language} code; there are no tool calls here. Next time write the code in a ```repl fence."
                ))
            }
            _ => Verdict::Take,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rlm::correction::views::tests::code_reply;

    #[test]
    fn only_code_taken_out_of_a_call_is_noted() {
        let call = "<tool_call>{\"name\": \"python\", \"arguments\": {\"code\": \"print(len(context))\"}}</tool_call>";
        for (text, noted) in [
            (call, true),
            ("```repl\nprint(1)\n```", false),
            ("FINAL(1)", false),
        ] {
            let verdict = code_reply(text, |r| ToolCallAsCode.on_reply(r));
            assert_eq!(matches!(verdict, Verdict::Note(_)), noted, "{text}");
        }
        insta::assert_debug_snapshot!(
            "tool_call_as_code",
            code_reply(call, |r| ToolCallAsCode.on_reply(r))
        );
    }
}

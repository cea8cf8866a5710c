//! A reply cut at the model's output-token limit: its last block, call or `FINAL(` may
//! end anywhere, so nothing of it is run or taken, and the model is asked for a
//! shorter reply. A reply cut while it was writing text into `context` is told that
//! `context` already holds the whole context (copying it is what ran out the limit).

use super::{context_literal, Correction, Form, Reply, Rule, Verdict};

/// The rule.
pub(super) struct TruncatedReply;

/// Told under the code medium.
pub(super) const CODE: &str = "Your last reply was cut off at the output-token limit, so none of it was run and it was not taken as the final answer. Answer again, shorter: less code per reply, and a short FINAL(...) — build a long answer in a variable and give FINAL_VAR(name).";

/// Told under the tools medium.
pub(super) const TOOLS: &str = "Your last reply was cut off at the output-token limit, so none of its tool calls were run and it was not taken as the final answer. Answer again, shorter: fewer calls per reply, and a short FINAL(...) or final_answer.";

/// Told when the cut reply was assigning a literal to `context`.
fn context_copied(context_chars: u64) -> String {
    format!(
        "Your last reply was cut off at the output-token limit while it wrote text into `context`, so none of it was run. Do not copy the context into the code: `context` already holds the whole context ({context_chars} characters). Write code that reads `context` as it is."
    )
}

impl Correction for TruncatedReply {
    fn rule(&self) -> Rule {
        Rule::TruncatedReply
    }

    fn on_reply(&self, reply: &Reply<'_>) -> Verdict {
        if !reply.truncated {
            return Verdict::Take;
        }
        Verdict::Refuse(match reply.form {
            Form::Tools => TOOLS.to_owned(),
            Form::Code { .. } => match context_literal::assignment(reply.text) {
                Some(_) if reply.context_chars > 0 => context_copied(reply.context_chars),
                _ => CODE.to_owned(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rlm::correction::views::tests::{code_reply, tools_reply};

    #[test]
    fn only_a_cut_reply_is_refused() {
        for (text, truncated, refused) in [
            ("```repl\nprint(1)\n```", false, false),
            ("```repl\nprint(1)", true, true),
            ("FINAL(4", true, true),
        ] {
            let verdict = code_reply(text, |r| {
                r.truncated = truncated;
                TruncatedReply.on_reply(r)
            });
            assert_eq!(matches!(verdict, Verdict::Refuse(_)), refused, "{text}");
        }
    }

    #[test]
    fn the_texts_the_model_reads() {
        let code = code_reply("```repl\nprint(1)", |r| {
            r.truncated = true;
            TruncatedReply.on_reply(r)
        });
        insta::assert_debug_snapshot!("truncated_reply_code", code);
        let literal = code_reply("```js\nconst context = `person 1: city=Lima", |r| {
            r.truncated = true;
            r.context_chars = 32_000;
            TruncatedReply.on_reply(r)
        });
        insta::assert_debug_snapshot!("truncated_reply_context_literal", literal);
        let tools = tools_reply("{\"name\": \"ctx_grep\", \"arguments\": {\"pat", 0, |r| {
            r.truncated = true;
            TruncatedReply.on_reply(r)
        });
        insta::assert_debug_snapshot!("truncated_reply_tools", tools);
    }
}

//! A reply that runs nothing and answers nothing. Under the code medium it is most
//! often code in the wrong fence (a bare fence, another language, a tool-call blob) or
//! prose stating the value the last block printed; the correction names the fence, or
//! gives the exact `FINAL` line for that value, or — when the last output was a
//! "nothing" value (`null`, `[]`) — says the code found nothing and how to look at the
//! context. Under the tools medium it names what the reply held instead of a call.

use super::{Correction, Form, Reply, Rule, Verdict};
use crate::env::tools::MicroTool;
use crate::parse::Misfence;
use crate::rlm::prose_answer::{found_nothing, stated};

/// The rule.
pub(super) struct NoAction;

impl Correction for NoAction {
    fn rule(&self) -> Rule {
        Rule::NoAction
    }

    fn on_reply(&self, reply: &Reply<'_>) -> Verdict {
        if reply.truncated
            || reply.acts()
            || reply.answers()
            || reply.parsed.unclosed_final.is_some()
        {
            return Verdict::Take;
        }
        Verdict::Refuse(match reply.form {
            Form::Code { language } => code_text(reply, language),
            Form::Tools => tools_text(reply),
        })
    }
}

/// The correction under the code medium.
fn code_text(reply: &Reply<'_>, language: &str) -> String {
    if let Some(misfence) = &reply.parsed.misfence {
        return misfenced(misfence, language);
    }
    let Some(output) = reply.log.last_output() else {
        return GENERAL.to_owned();
    };
    if let Some(nothing) = found_nothing(output) {
        let peek = match language {
            "python" => "print(context[:300])",
            _ => "console.log(context.slice(0, 300))",
        };
        return format!(
            "Your message had no code to run and no final answer, and your last code printed {nothing}: it found nothing, so an answer now would be a guess. Look at how the context is written ({peek} in a ```repl block), fix the code that printed {nothing} to match it, and run it again."
        );
    }
    match stated(&reply.parsed.transcript_text, output) {
        Some(value) => format!(
            "Your message had no code to run and no final answer: an answer in a sentence is not taken. If {value} is your answer, reply with exactly this line and nothing else:\nFINAL({value})\nOtherwise write code in a ```repl block."
        ),
        None => GENERAL.to_owned(),
    }
}

/// The correction of a reply with neither code nor an answer, nor a misfence.
const GENERAL: &str = "Your message had no code to run and no final answer. Write code in a ```repl block to explore the context, or answer with FINAL(...) on its own line.";

/// The correction of code in the wrong fence.
fn misfenced(misfence: &Misfence, language: &str) -> String {
    match misfence {
        Misfence::Bare => format!(
            "Your code was in a fence without a tag, so it did not run. Code runs only in ```repl fences (or ```{language})."
        ),
        Misfence::OtherLanguage(tag) => format!(
            "```{tag} blocks do not run here: this REPL runs {language}. Put {language} code in a ```repl fence."
        ),
        Misfence::ToolCall => format!(
            "There are no native tool calls here. Write {language} code in a ```repl fence instead, for example:\n```repl\nprint(len(context))\nprint(peek(context, 0, 500))\n```"
        ),
    }
}

/// The correction under the tools medium.
fn tools_text(reply: &Reply<'_>) -> String {
    let lead = if !reply.parsed.blocks.is_empty() {
        "No code runs here: you work by calling tools."
    } else if reply.not_taken.is_empty()
        && MicroTool::ALL
            .iter()
            .any(|tool| reply.text.contains(tool.name()))
    {
        "Your message names a tool, but no call could be read from it: give the tool's name and its arguments as one JSON object, with plain values."
    } else {
        "Your message called no tool and gave no final answer."
    };
    format!("{lead} Call a tool (for example ctx_grep on `context`), or answer: FINAL(…) on its own line, the answer inside the parentheses.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rlm::correction::views::tests::{code_reply, code_reply_after, tools_reply};
    use crate::rlm::log::BlockLog;

    fn after(output: &str, text: &str) -> Verdict {
        let mut log = BlockLog::new();
        log.record("print(x)", output);
        code_reply_after(text, &log, |r| NoAction.on_reply(r))
    }

    #[test]
    fn only_a_reply_that_runs_and_answers_nothing_is_refused() {
        for (text, refused) in [
            ("Let me think about it.", true),
            ("```\nprint(1)\n```", true),
            ("```bash\nls\n```", true),
            ("```repl\nprint(1)\n```", false),
            ("FINAL(1)", false),
            ("FINAL_VAR(x)", false),
            ("FINAL(1", false),
        ] {
            let verdict = code_reply(text, |r| NoAction.on_reply(r));
            assert_eq!(matches!(verdict, Verdict::Refuse(_)), refused, "{text}");
        }
    }

    #[test]
    fn the_texts_the_model_reads() {
        insta::assert_debug_snapshot!(
            "no_action_general",
            code_reply("Let me think about it.", |r| NoAction.on_reply(r))
        );
        insta::assert_debug_snapshot!(
            "no_action_bare_fence",
            code_reply("```\nprint(1)\n```", |r| NoAction.on_reply(r))
        );
        insta::assert_debug_snapshot!(
            "no_action_other_language",
            code_reply("```bash\nwc -l\n```", |r| NoAction.on_reply(r))
        );
        insta::assert_debug_snapshot!(
            "no_action_stated_value",
            after("290\n", "The answer is 290.")
        );
        insta::assert_debug_snapshot!(
            "no_action_found_nothing",
            after("result: null\n", "It is 12.")
        );
        insta::assert_debug_snapshot!(
            "no_action_tools_nothing",
            tools_reply("I am not sure yet.", 0, |r| NoAction.on_reply(r))
        );
        insta::assert_debug_snapshot!(
            "no_action_tools_code",
            tools_reply("```repl\nprint(1)\n```", 0, |r| NoAction.on_reply(r))
        );
        insta::assert_debug_snapshot!(
            "no_action_tools_unreadable",
            tools_reply("ctx_grep with pattern rent", 0, |r| NoAction.on_reply(r))
        );
    }

    #[test]
    fn prose_that_states_another_value_gets_the_general_text() {
        let Verdict::Refuse(text) = after("290\n", "The answer is 291.") else {
            panic!("refused");
        };
        assert_eq!(text, GENERAL);
    }
}

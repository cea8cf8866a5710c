//! The same code, or the same tool call, sent again after it ran [`LIMIT`] times: its
//! output cannot change, so it is not run a third time; the model is shown the output
//! it already had and told to change the code or answer. A model that cannot find
//! what it looks for otherwise sends the same search until the iterations run out.
//! Replies of only such blocks count toward the loop's stop on repeated corrections.

use super::{Block, Correction, Form, Rule, Verdict};
use crate::rlm::prose_answer::printed_value;

/// The rule.
pub(super) struct RepeatLimit;

/// Runs of the same code (or call) before it is refused.
pub(super) const LIMIT: u32 = 2;

impl Correction for RepeatLimit {
    fn rule(&self) -> Rule {
        Rule::RepeatLimit
    }

    fn before_block(&self, block: &Block<'_>) -> Verdict {
        let Some((times, output)) = block.log.runs_of(block.code).filter(|(t, _)| *t >= LIMIT)
        else {
            return Verdict::Take;
        };
        let shown = if output.trim().is_empty() {
            "(no output)"
        } else {
            output
        };
        Verdict::Refuse(match block.form {
            Form::Code { language } => {
                let next = match printed_value(output) {
                    Some(value) => format!(
                        "To look further, change the code (another pattern, other offsets, another helper). If {value} is your answer, reply with exactly this line and nothing else:\nFINAL({value})"
                    ),
                    None => "Change the code (another pattern, other offsets, another helper) or answer with FINAL(...).".to_owned(),
                };
                format!(
                    "Code not run: the same code already ran {times} times.\n```{language}\n{}\n```\n\nIts output was:\n{shown}\n\nRunning it again gives the same. {next}",
                    block.code
                )
            }
            Form::Tools => format!(
                "Call not run: the same call already ran {times} times. Its result was:\n{shown}\n\nCalling it again gives the same. Call another tool or the same one with other arguments, or answer with final_answer."
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rlm::log::BlockLog;

    fn ask(form: Form<'_>, code: &str, log: &BlockLog) -> Verdict {
        RepeatLimit.before_block(&Block {
            form,
            code,
            log,
            context_chars: 0,
        })
    }

    #[test]
    fn the_third_run_of_the_same_code_or_call_is_refused() {
        let code = Form::Code { language: "python" };
        let mut log = BlockLog::new();
        for (runs, refused) in [(0, false), (1, false), (2, true), (3, true)] {
            while log.runs_of("print(n)").map_or(0, |(t, _)| t) < runs {
                log.record("print(n)", "129\n");
            }
            let verdict = ask(code, "print(n)\n", &log);
            assert_eq!(matches!(verdict, Verdict::Refuse(_)), refused, "{runs}");
        }
        // Other code is not a repeat.
        assert_eq!(ask(code, "print(m)", &log), Verdict::Take);
    }

    #[test]
    fn the_texts_the_model_reads() {
        let mut log = BlockLog::new();
        log.record("print(n)", "129\n");
        log.record("print(n)", "129\n");
        log.record("print(rows[:2])", "");
        log.record("print(rows[:2])", "");
        let call = r#"ctx_grep({"variable":"context","pattern":"rent"})"#;
        log.record(
            call,
            "1 line of context matches \"rent\":\nThe rent is 900.",
        );
        log.record(
            call,
            "1 line of context matches \"rent\":\nThe rent is 900.",
        );
        let code = Form::Code { language: "python" };
        insta::assert_debug_snapshot!("repeat_limit_value", ask(code, "print(n)", &log));
        insta::assert_debug_snapshot!("repeat_limit_no_output", ask(code, "print(rows[:2])", &log));
        insta::assert_debug_snapshot!("repeat_limit_call", ask(Form::Tools, call, &log));
    }
}

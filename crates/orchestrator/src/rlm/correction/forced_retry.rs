//! A forced answer that is not one: a reply cut at its output-token limit, or a
//! sentence with no `FINAL` (a caller cannot compare or use "The total is 3006."). It
//! is asked again — cut: for a shorter reply; prose: for the answer alone — but only
//! while a budget leaves a call for it; otherwise it is given as it came.

use super::{truncated_reply, Correction, Forced, Form, Rule, Verdict};

/// The rule.
pub(super) struct ForcedRetry;

/// Asked under the code medium after prose.
const PROSE: &str = "Your reply has no FINAL line. Reply with one line only: FINAL(the answer), with just the answer inside the parentheses (the number, the word or the value the task asks for), no sentence around it.";

/// Asked under the tools medium after prose.
const PROSE_TOOLS: &str = "Your reply called no final_answer. Call final_answer with just the answer (the number, the word or the value the task asks for), no sentence around it.";

impl Correction for ForcedRetry {
    fn rule(&self) -> Rule {
        Rule::ForcedRetry
    }

    fn on_forced(&self, forced: &Forced<'_>) -> Verdict {
        let code = matches!(forced.form, Form::Code { .. });
        if forced.truncated {
            let cut = if code {
                truncated_reply::CODE
            } else {
                truncated_reply::TOOLS
            };
            let again = crate::prompt::force_final(code);
            return Verdict::Refuse(format!("{cut} {again}"));
        }
        if forced.answered || one_value(forced.text) {
            return Verdict::Take;
        }
        Verdict::Refuse(if code { PROSE } else { PROSE_TOOLS }.to_owned())
    }
}

/// True when a forced reply's text is one value as written — a number, a word, a
/// token such as `2024-03-07` — and so the answer without a `FINAL`.
fn one_value(text: &str) -> bool {
    !text.is_empty() && !text.contains(char::is_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(form: Form<'_>, text: &str, truncated: bool, answered: bool) -> Verdict {
        ForcedRetry.on_forced(&Forced {
            form,
            text,
            truncated,
            answered,
        })
    }

    #[test]
    fn a_cut_or_prose_forced_reply_is_asked_again() {
        let code = Form::Code { language: "python" };
        for (text, truncated, answered, refused) in [
            ("FINAL(3", true, false, true),
            ("The total is 3006.", false, false, true),
            ("3006", false, false, false),
            ("FINAL(3006)", false, true, false),
            ("", false, false, true),
        ] {
            let verdict = ask(code, text, truncated, answered);
            assert_eq!(matches!(verdict, Verdict::Refuse(_)), refused, "{text}");
        }
    }

    #[test]
    fn the_texts_the_model_reads() {
        let code = Form::Code { language: "python" };
        insta::assert_debug_snapshot!("forced_retry_cut", ask(code, "FINAL(3", true, false));
        insta::assert_debug_snapshot!("forced_retry_prose", ask(code, "It is 3006.", false, false));
        insta::assert_debug_snapshot!(
            "forced_retry_prose_tools",
            ask(Form::Tools, "It is 3006.", false, false)
        );
    }
}

//! `FINAL(word)` written in a code block with a bare word: the model meant the text
//! answer the way FINAL reads outside code, and the REPL read the word as a variable
//! that does not exist (`NameError: name 'word' is not defined`). A note only: the
//! model is told how to write either an answer of that text or a variable's value; the
//! word is never taken as the answer on its behalf.

use super::sole_line::sole_statement;
use super::{Correction, Form, Ran, Rule, Verdict};

/// The rule.
pub(super) struct BareFinal;

impl Correction for BareFinal {
    fn rule(&self) -> Rule {
        Rule::BareFinal
    }

    fn after_block(&self, ran: &Ran<'_>) -> Verdict {
        if !matches!(ran.form, Form::Code { .. }) {
            return Verdict::Take;
        }
        match ran.error.and_then(|error| read(ran.code, error)) {
            Some(word) => Verdict::Note(format!(
                "FINAL({word}) ran as code, and `{word}` is not a variable of the REPL. To answer with the text {word}, write FINAL(\"{word}\") with quotes, or a line FINAL({word}) outside any code block; to answer with a variable's value, assign it first."
            )),
            None => Verdict::Take,
        }
    }
}

/// The word of a block that failed with `error` because it is a bare `FINAL(word)` and
/// `word` is not defined (Python's `NameError`, JavaScript's `ReferenceError`).
fn read<'a>(code: &'a str, error: &str) -> Option<&'a str> {
    bare_word(code).filter(|word| undefined(error, word))
}

/// The identifier of a block that is one `FINAL(identifier)` call and nothing else but
/// comments.
pub(in crate::rlm) fn bare_word(code: &str) -> Option<&str> {
    let call = sole_statement(code)?;
    let word = call.strip_prefix("FINAL(")?.strip_suffix(')')?.trim();
    let mut chars = word.chars();
    let starts = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    (starts && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')).then_some(word)
}

/// True when `error` says `word` is not defined: Python's `NameError: name 'word' is
/// not defined`, JavaScript's `ReferenceError: word is not defined`.
fn undefined(error: &str, word: &str) -> bool {
    error.contains(&format!("name '{word}' is not defined"))
        || error.contains(&format!("{word} is not defined"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rlm::log::BlockLog;

    const NAME_ERROR: &str = "Traceback (most recent call last):\n  File \"<cell 2>\", line 1, in <module>\n    FINAL(loyalty)\nNameError: name 'loyalty' is not defined";

    fn ask(code: &str, error: Option<&str>) -> Verdict {
        BareFinal.after_block(&Ran {
            form: Form::Code { language: "python" },
            code,
            output: error.unwrap_or_default(),
            error,
            log: &BlockLog::new(),
        })
    }

    #[test]
    fn a_bare_final_of_an_undefined_word_is_noted_and_nothing_else() {
        let js = "ReferenceError: loyalty is not defined";
        for (code, error, noted) in [
            ("FINAL(loyalty)\n", Some(NAME_ERROR), true),
            ("// the answer\n FINAL( loyalty );", Some(js), true),
            ("x = 1\nFINAL(loyalty)", Some(NAME_ERROR), false),
            ("FINAL(answer[0])", Some(NAME_ERROR), false),
            ("FINAL(\"loyalty\")", Some(NAME_ERROR), false),
            (
                "FINAL(loyalty)",
                Some("ZeroDivisionError: division by zero"),
                false,
            ),
            ("FINAL(loyalty)", None, false),
        ] {
            assert_eq!(
                matches!(ask(code, error), Verdict::Note(_)),
                noted,
                "{code}"
            );
        }
    }

    #[test]
    fn the_text_the_model_reads() {
        insta::assert_debug_snapshot!("bare_final", ask("FINAL(loyalty)", Some(NAME_ERROR)));
    }
}

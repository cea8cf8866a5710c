//! A block that is one bare word the REPL does not know — `payments` — is the model's
//! answer sent as code: it runs, fails (`ReferenceError: payments is not defined`), and
//! a small model sends it again. Qwen2.5-Coder-1.5B did that five times after its
//! `const context = …` block was refused, and was forced with the word — the wrong
//! label (docs/eval.md, head-seed10, js `aggregate` item 4).
//!
//! A word cannot be refused before it runs (it may name a variable to show), so it is
//! read after: a word its code printed last is the answer; another word gets a notice,
//! and the same word sent again is refused like a value ([`super::code_turn`]).

use super::sole_line::sole_statement;

/// The word of a block that is one identifier and nothing else (comments and a `;`
/// aside): `payments`, not `labels[0]`, `x = 1` or `None`.
pub(super) fn word(code: &str) -> Option<&str> {
    let word = sole_statement(code)?;
    let mut chars = word.chars();
    let starts = chars
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$');
    let name = starts && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$');
    (name && !super::value_block::is_literal_word(word)).then_some(word)
}

/// True when `error` says `word` is not defined: Python's `NameError: name 'word' is
/// not defined`, JavaScript's `ReferenceError: word is not defined`.
pub(super) fn undefined(error: &str, word: &str) -> bool {
    error.contains(&format!("name '{word}' is not defined"))
        || error.contains(&format!("{word} is not defined"))
}

/// The word of a block that ran and failed with `error` because the word is no
/// variable of the REPL: the model's answer, or a guess at one, sent as code.
pub(super) fn read<'a>(code: &'a str, error: &str) -> Option<&'a str> {
    word(code).filter(|word| undefined(error, word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_word_the_repl_does_not_know_is_read() {
        // The head-seed10 reading's js `aggregate` item 4, as the model wrote it.
        let js = "ReferenceError: payments is not defined\n    at <eval> (<cell 1>:1:1)";
        assert_eq!(read("payments", js), Some("payments"));
        assert_eq!(read("// the label\npayments;\n", js), Some("payments"));
        let python = "NameError: name 'returns' is not defined";
        assert_eq!(read("returns", python), Some("returns"));
    }

    #[test]
    fn other_blocks_and_other_errors_are_not_read() {
        let js = "ReferenceError: payments is not defined";
        assert_eq!(read("payments()", js), None);
        assert_eq!(read("x = payments", js), None);
        assert_eq!(read("payments\nreturns", js), None);
        assert_eq!(
            read("payments", "TypeError: payments is not a function"),
            None
        );
        // A variable that is defined shows its value: no error, nothing read.
        assert_eq!(word("labels"), Some("labels"));
        assert_eq!(word("None"), None);
        assert_eq!(word("labels[0]"), None);
    }
}

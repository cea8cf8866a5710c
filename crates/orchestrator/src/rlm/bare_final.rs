//! `FINAL(word)` written in a code block with a bare word: the model meant the text
//! answer the way FINAL reads outside code, and the REPL read the word as a variable
//! that does not exist (Qwen2.5-Coder-1.5B printed `loyalty`, then wrote
//! ```` ```repl FINAL(loyalty) ``` ```` four times: `NameError: name 'loyalty' is not
//! defined`, docs/eval.md, the matrix reading).
//!
//! The word is taken as the answer only when an earlier block of the run printed it:
//! then it is a value the model read, not the name of a variable it forgot to make
//! (`FINAL(special_number)` with nothing printed). Otherwise the model is told how to
//! write either.

use super::prose_answer::stands_in;
use super::sole_line::sole_statement;
use super::word_as_code;

/// What a failed bare `FINAL(word)` block means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum BareFinal {
    /// The word, printed earlier in the run: the answer.
    Answer(String),
    /// The word was never printed: what to tell the model.
    Notice(String),
}

/// Reads a block that failed with `error`: `Some` when `code` is a bare `FINAL(word)`
/// and the error says `word` is not defined (Python's `NameError`, JavaScript's
/// `ReferenceError`). `earlier_outputs` are the outputs of the run's blocks before this
/// one; one that ran without an error and printed `word` as a word makes it the answer.
pub(super) fn read<'a>(
    code: &str,
    error: &str,
    earlier_outputs: impl IntoIterator<Item = &'a str>,
) -> Option<BareFinal> {
    let word = bare_word(code)?;
    if !word_as_code::undefined(error, word) {
        return None;
    }
    let printed = earlier_outputs
        .into_iter()
        .filter(|output| !failed(output))
        .any(|output| stands_in(output, word));
    Some(if printed {
        BareFinal::Answer(word.to_owned())
    } else {
        BareFinal::Notice(format!(
            "FINAL({word}) ran as code, and `{word}` is not a variable of the REPL. To answer with the text {word}, write FINAL(\"{word}\") with quotes, or a line FINAL({word}) outside any code block; to answer with a variable's value, assign it first."
        ))
    })
}

/// The identifier of a block that is one `FINAL(identifier)` call and nothing else but
/// comments ("# Final the answer" above it, as the model writes it).
pub(super) fn bare_word(code: &str) -> Option<&str> {
    let word = final_argument(code)?;
    let mut chars = word.chars();
    let starts = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    (starts && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')).then_some(word)
}

/// The argument, trimmed, of a block that is one `FINAL(…)` call and nothing else but
/// comments and a trailing `;`: what [`bare_word`] and
/// [`super::unprinted_answer::literal_in_code`] read.
pub(super) fn final_argument(code: &str) -> Option<&str> {
    let call = sole_statement(code)?;
    Some(call.strip_prefix("FINAL(")?.strip_suffix(')')?.trim())
}

/// True when an output is an error's: its words are the traceback's, not a value.
fn failed(output: &str) -> bool {
    output.contains("Traceback (most recent call last)")
        || output.contains("Error:")
        || output.contains("is not defined")
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME_ERROR: &str = "Traceback (most recent call last):\n  File \"<cell 2>\", line 1, in <module>\n    FINAL(loyalty)\nNameError: name 'loyalty' is not defined";

    #[test]
    fn a_word_printed_earlier_is_the_answer() {
        // The matrix reading's aggregate item 4, as the model wrote it.
        assert_eq!(
            read("FINAL(loyalty)\n", NAME_ERROR, ["loyalty\n"]),
            Some(BareFinal::Answer("loyalty".into()))
        );
        let js = "ReferenceError: loyalty is not defined";
        assert_eq!(
            read(
                "// the answer\n FINAL( loyalty );",
                js,
                ["the most: loyalty (80)"]
            ),
            Some(BareFinal::Answer("loyalty".into()))
        );
    }

    #[test]
    fn a_word_never_printed_gets_the_notice() {
        let error = "NameError: name 'special_number' is not defined";
        let Some(BareFinal::Notice(text)) = read("FINAL(special_number)", error, ["42\n"]) else {
            panic!("a notice");
        };
        assert!(
            text.contains("FINAL(\"special_number\") with quotes"),
            "{text}"
        );
        // An earlier traceback that names the word is not a value printed.
        assert!(matches!(
            read("FINAL(loyalty)", NAME_ERROR, [NAME_ERROR]),
            Some(BareFinal::Notice(_))
        ));
        // Part of a longer word is not the word.
        assert!(matches!(
            read(
                "FINAL(loyal)",
                "NameError: name 'loyal' is not defined",
                ["loyalty"]
            ),
            Some(BareFinal::Notice(_))
        ));
    }

    #[test]
    fn other_blocks_and_other_errors_are_not_read() {
        assert_eq!(read("x = 1\nFINAL(loyalty)", NAME_ERROR, ["loyalty"]), None);
        assert_eq!(read("FINAL(answer[0])", NAME_ERROR, ["loyalty"]), None);
        assert_eq!(read("FINAL(\"loyalty\")", NAME_ERROR, ["loyalty"]), None);
        assert_eq!(
            read(
                "FINAL(loyalty)",
                "ZeroDivisionError: division by zero",
                ["loyalty"]
            ),
            None
        );
    }
}

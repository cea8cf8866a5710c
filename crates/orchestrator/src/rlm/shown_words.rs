//! A block that is only one token of the text the model was shown — `label=returns`
//! out of the context's preview, a word of the task — is not run: it is not code, and
//! run it only fails (JavaScript reads `label=returns` as an assignment from a variable
//! `returns` that does not exist).
//!
//! The local model sent exactly that after its `const context = …` block was refused
//! (docs/eval.md, the after-echo-seed6 reading, js `aggregate` item 4, "which label
//! appears in the most records"), four times against `ReferenceError: returns is not
//! defined`. A block is read as shown words when it is one token — no space, call or
//! bracket, and not a name, which may be a variable echoed — that the task or the
//! preview holds as a whole token.

use super::sole_line::sole_line;

/// The most characters such a token has: longer text is code.
const MAX_CHARS: usize = 80;

/// The block's one token, when `code` (comments aside) is a single token of at least
/// three characters, with no bracket and not a name (it has a character such as `=`,
/// `-` or `:`), that one of the `shown` texts holds whole (between whitespace, the
/// text's ends or `.,;:?!"'`).
pub(super) fn read<'a>(code: &'a str, shown: &[&str]) -> Option<&'a str> {
    let token = sole_line(code)?.trim_end_matches(';');
    let length = token.chars().count();
    // A name or a property (`labels`, `context.length`) may be a variable echoed.
    let not_a_name = token.contains(|c: char| !(c.is_alphanumeric() || "_$.".contains(c)));
    let plain = (3..=MAX_CHARS).contains(&length)
        && not_a_name
        && !token.contains(|c: char| c.is_whitespace() || "()[]{}".contains(c));
    (plain && shown.iter().any(|text| holds_token(text, token))).then_some(token)
}

/// Whether `text` holds `token` as a whole token.
fn holds_token(text: &str, token: &str) -> bool {
    let bounds = |c: Option<char>| c.is_none_or(|c| c.is_whitespace() || ".,;:?!\"'`".contains(c));
    text.match_indices(token).any(|(at, _)| {
        bounds(text[..at].chars().next_back()) && bounds(text[at + token.len()..].chars().next())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREVIEW: &str =
        "2026-03-13 00:51 order=000001 label=returns amount=412\n2026-03-11 20:55 order=000002 label=fraud";
    const TASK: &str =
        "Which label appears in the most records of the context? Answer with the label only.";

    #[test]
    fn a_key_value_of_the_preview_is_shown_words() {
        assert_eq!(
            read("label=returns", &[TASK, PREVIEW]),
            Some("label=returns")
        );
        assert_eq!(
            read("// the label\nlabel=fraud;\n", &[TASK, PREVIEW]),
            Some("label=fraud")
        );
    }

    #[test]
    fn a_name_is_not_shown_words_it_may_be_a_variable_echoed() {
        assert_eq!(read("label", &[TASK]), None);
        assert_eq!(read("context", &[TASK]), None);
        assert_eq!(read("context.length", &["see context.length."]), None);
    }

    #[test]
    fn code_is_not_shown_words() {
        assert_eq!(read("label=refunds", &[TASK, PREVIEW]), None);
        assert_eq!(read("print(label)", &["print(label) and more"]), None);
        assert_eq!(read("label=returns\nprint(1)", &[PREVIEW]), None);
        assert_eq!(read("count = 3", &["count = 3"]), None);
        assert_eq!(read("ab", &["ab"]), None);
        assert_eq!(read("", &[TASK]), None);
        // Part of a token is not the token.
        assert_eq!(read("order=00000", &[PREVIEW]), None);
        assert_eq!(read("abel=returns", &[PREVIEW]), None);
    }
}

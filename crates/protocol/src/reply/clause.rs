//! The words around an action: the sentence it stands in before it, what continues
//! that sentence after it, the line that introduces it — and the phrases in them that
//! make the action a quotation (declined, put off, shown as an example).
//!
//! Each piece is at most [`CLAUSE_BYTES`] long, so reading it costs the same however
//! long the reply is.

use std::sync::LazyLock;

use regex::Regex;

use super::layout::{is_decoration, Layout};

/// The most bytes of text either side of an action the rule reads.
const CLAUSE_BYTES: usize = 300;

/// The largest char boundary of `text` at or below `at`.
fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// True when the `.` ending `before` closes an abbreviation of single letters
/// (`e.g.`, `i.e.`), not a sentence.
fn ends_abbreviation(before: &str) -> bool {
    let mut chars = before.chars().rev();
    match (chars.next(), chars.next()) {
        (Some(letter), Some(previous)) if letter.is_alphabetic() => {
            previous == '.' || previous.is_whitespace()
        }
        (Some(letter), None) => letter.is_alphabetic(),
        _ => false,
    }
}

/// The byte just past the first sentence end in `text` (`.`, `!` or `?` followed by
/// whitespace or the end, not an abbreviation's `.`), if any.
fn sentence_end(text: &str) -> Option<usize> {
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        let next_is_space = chars.peek().is_none_or(|(_, next)| next.is_whitespace());
        if next_is_space && !(c == '.' && ends_abbreviation(&text[..at])) {
            return Some(at + 1);
        }
    }
    None
}

/// The part of its sentence before an action at `at`, on its line: from the last
/// sentence end between the line's start and `at`.
pub(super) fn sentence_before(text: &str, line_start: usize, at: usize) -> &str {
    let from = floor_boundary(text, at.saturating_sub(CLAUSE_BYTES)).max(line_start);
    let mut before = &text[from..at];
    while let Some(end) = sentence_end(before) {
        before = &before[end..];
    }
    before
}

/// What continues an action's sentence after it ends at `end`: the rest of its line
/// (past closing tags such as `</tool_call>`) up to a sentence end, or, when nothing
/// but decoration follows it on its line, the next line when that line continues the
/// sentence (it starts with a small letter or `,` `;` `—` `-` `(`).
pub(super) fn sentence_after(text: &str, end: usize) -> &str {
    let end = end.min(text.len());
    let at_line_start = end == 0 || text[..end].ends_with('\n');
    let (rest, next_line) = if at_line_start {
        ("", end)
    } else {
        let line_end = text[end..].find('\n').map_or(text.len(), |n| end + n);
        (&text[end..line_end], (line_end + 1).min(text.len()))
    };
    let mut rest = rest.trim_start_matches(is_decoration);
    while let Some(tag) = rest.strip_prefix("</") {
        rest = tag
            .find('>')
            .map_or("", |close| &tag[close + 1..])
            .trim_start_matches(is_decoration);
    }
    if rest.is_empty() {
        let line_end = text[next_line..]
            .find('\n')
            .map_or(text.len(), |n| next_line + n);
        let line = text[next_line..line_end].trim_start();
        let continues = line
            .chars()
            .next()
            .is_some_and(|c| c.is_lowercase() || matches!(c, ',' | ';' | '—' | '–' | '-' | '('));
        if !continues {
            return "";
        }
        rest = line;
    }
    let rest = &rest[..floor_boundary(rest, CLAUSE_BYTES)];
    sentence_end(rest).map_or(rest, |stop| &rest[..stop])
}

/// The line that introduces line `line`: the nearest non-blank line before it, when it
/// ends with `:` (emphasis aside), at most its last [`CLAUSE_BYTES`].
pub(super) fn introduction<'t>(text: &'t str, layout: &Layout, line: usize) -> Option<&'t str> {
    let mut index = line;
    for _ in 0..3 {
        index = index.checked_sub(1)?;
        let range = layout.line(text, index);
        let content = text[range].trim_end_matches(['*', '_', ' ', '\t']);
        if content.trim().is_empty() {
            continue;
        }
        if !content.ends_with(':') {
            return None;
        }
        let from = floor_boundary(content, content.len().saturating_sub(CLAUSE_BYTES));
        return Some(&content[from..]);
    }
    None
}

/// What words around an action can say of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Says {
    /// It is not to be done: "which I must not follow", "do not run this:".
    Declined,
    /// It is for later: "as a later step", "once I have the count".
    Deferred,
    /// It is an example of a form: "for example", "e.g.", "such as".
    Example,
}

/// The verbs of taking an action.
const VERBS: &str =
    r"(?:follow|obey|run|execute|call|do|use|trust|comply|submit|take|act|answer|send|make)";

/// What the declined action is called in a sentence that declines it.
const OBJECTS: &str =
    r"(?:this|these|that|those|it|them|following|below|above|instructions?|commands?|calls?)";

/// A negation.
const NOT: &str = r"(?:\bnot|n't|\bnever|\bcannot)";

/// A negated verb of taking with what it refuses right after it ("do not run this",
/// "I must not follow the instruction below", "I won't run it").
fn refused_object() -> String {
    format!(r"{NOT}\s+(?:\w+\s+){{0,2}}?{VERBS}\w*\s+(?:\w+\s+){{0,2}}?{OBJECTS}\b")
}

/// A refusal in a relative clause, by the one who writes ("…, which I must not
/// follow"; not "…, which will not run out of memory").
fn refused_relative() -> String {
    format!(
        r"\b(?:which|that)\b[^.!?]{{0,40}}?\b(?:i|we|you)\b[^.!?]{{0,20}}?{NOT}\s+(?:\w+\s+){{0,2}}?{VERBS}\b"
    )
}

/// A refusal in the passive ("it is not to be run", "not to be followed").
const REFUSED_PASSIVE: &str = r"\b(?:is|are|be)\s+not\s+(?:to\s+be\s+)?(?:followed|obeyed|run|executed|called|used|trusted|taken)\b|\bnot\s+to\s+be\s+(?:followed|obeyed|run|executed|called|used|trusted|taken)\b";

/// A phrase before an action that declines it: [`refused_object`], [`refused_relative`],
/// [`REFUSED_PASSIVE`], or "ignore the following".
static DECLINED_BEFORE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i){}|{}|{REFUSED_PASSIVE}|\b(?:ignore|disregard)\s+(?:\w+\s+)?{OBJECTS}\b",
        refused_object(),
        refused_relative()
    ))
    .ok()
});

/// A phrase after an action that declines it ("…, which I must not follow", "— but I
/// won't run it", "which I will ignore", "(ignore it)").
static DECLINED_AFTER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i){}|{}|{REFUSED_PASSIVE}|\b(?:which|that|i|we)\b[^.!?]{{0,30}}?\b(?:ignore|disregard)\b|\b(?:ignore|disregard)\s+(?:it|this|that|them)\b",
        refused_object(),
        refused_relative()
    ))
    .ok()
});

/// A phrase that puts an action off to a later turn.
static DEFERRED: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:later|afterwards?|eventually|subsequently)\b|\b(?:next|following|future)\s+(?:turn|reply|message|iteration|round)s?\b|\b(?:once|when)\s+(?:i|we)\s+(?:have\s+(?:the|a|an|it|all|enough|its|their|more)|know|get|see|receive|confirm|verify|check|find)\b",
    )
    .ok()
});

/// A phrase that shows an action as an example of a form.
static EXAMPLE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\bfor\s+(?:example|instance)\b|\be\.g\.|\bsuch\s+as\b|\blike\s+(?:this|so)\b|\b(?:template|placeholder)\b|\bexamples?(?:\s+(?:calls?|reply|replies|answer|form|format|usage|syntax))?\s*:?\s*$|\b(?:is|as|was)\s+(?:an?\s+|the\s+)?(?:example|template|placeholder|format)\b",
    )
    .ok()
});

/// True when `clause`, written `before` or after an action, says `what` of it.
pub(super) fn says(clause: &str, before: bool, what: Says) -> bool {
    let pattern = match (what, before) {
        (Says::Declined, true) => &DECLINED_BEFORE,
        (Says::Declined, false) => &DECLINED_AFTER,
        (Says::Deferred, _) => &DEFERRED,
        (Says::Example, _) => &EXAMPLE,
    };
    // A pattern that failed to compile (it cannot: they are constants, and a test
    // compiles each) takes every action: the rule never refuses on a broken pattern.
    let said = pattern
        .as_ref()
        .as_ref()
        .is_some_and(|regex| regex.is_match(clause));
    // "Later I may refine it, but now: …" takes it now.
    said && !(what == Says::Deferred && NOW.as_ref().is_some_and(|now| now.is_match(clause)))
}

/// A word that takes an action now, whatever else its sentence puts off.
static NOW: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"(?i)\bnow\b").ok());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        for pattern in [&DECLINED_BEFORE, &DECLINED_AFTER, &DEFERRED, &EXAMPLE, &NOW] {
            assert!(pattern.is_some());
        }
    }

    #[test]
    fn sentences_are_cut_at_their_ends_not_at_abbreviations() {
        let text = "It is done. For example, e.g. ctx_grep(x)";
        let at = text.find("ctx_grep").unwrap_or(0);
        assert_eq!(sentence_before(text, 0, at), " For example, e.g. ");
        assert_eq!(sentence_end("ab cd. e"), Some(6));
        assert_eq!(sentence_end("A. Smith"), None);
        assert_eq!(sentence_end("i.e. no end"), None);
    }

    #[test]
    fn after_an_action_its_sentence_continues_on_its_line_or_the_next() {
        let text = "{\"a\": 1}, which I must not follow. Then more.\n";
        assert_eq!(sentence_after(text, 8), ", which I must not follow.");
        let text = "<tool_call>{}</tool_call>\nwhich I must not follow.\nNext.";
        let end = text.find('}').unwrap_or(0) + 1;
        assert_eq!(sentence_after(text, end), "which I must not follow.");
        let text = "FINAL(1)\nThe end.";
        assert_eq!(sentence_after(text, 8), "");
        // From a line's start (after a fence): that line, when it continues.
        let text = "```\nx\n```\nwhich I will not run.\n";
        let end = text.find("which").unwrap_or(0);
        assert_eq!(sentence_after(text, end), "which I will not run.");
    }

    #[test]
    fn phrases_are_recognised() {
        assert!(says(", which I must not follow.", false, Says::Declined));
        assert!(says("— but I won't run it", false, Says::Declined));
        assert!(says("Do not run this:", true, Says::Declined));
        assert!(says(
            "I must not follow the instruction below:",
            true,
            Says::Declined
        ));
        assert!(!says(
            "I will not call any more tools; my answer:",
            true,
            Says::Declined
        ));
        assert!(!says(
            "I don't know yet, so let me look:",
            true,
            Says::Declined
        ));
        assert!(says("which I will ignore.", false, Says::Declined));
        assert!(says("it is not to be run", false, Says::Declined));
        // What the code does is not a refusal of it.
        for what_it_does in [
            "which will not run out of memory.",
            "that does not call the model, it only counts.",
            "ignoring the header line.",
        ] {
            assert!(!says(what_it_does, false, Says::Declined), "{what_it_does}");
        }
        assert!(!says(
            "The code below, which does not use the model:",
            true,
            Says::Declined
        ));
        assert!(says("As a later step I will call ", true, Says::Deferred));
        assert!(says(
            "Once I have the count, I will answer with ",
            true,
            Says::Deferred
        ));
        assert!(!says("I will call ", true, Says::Deferred));
        assert!(!says(
            "Once I have counted them, the answer:",
            true,
            Says::Deferred
        ));
        assert!(!says(
            "When I read the context I found it:",
            true,
            Says::Deferred
        ));
        assert!(!says(
            "I may refine it later, but now:",
            true,
            Says::Deferred
        ));
        assert!(says("For example, ", true, Says::Example));
        assert!(says("The reply format is, e.g. ", true, Says::Example));
        assert!(!says("Here is my answer:", true, Says::Example));
        assert!(says("An example call:", true, Says::Example));
        assert!(says("Example: ", true, Says::Example));
        assert!(!says(
            "Let me look at an example record:",
            true,
            Says::Example
        ));
    }
}

//! A `ctx_grep` of a word the task names that found lines: under `--env tools`, what the
//! task asks about is then in view. Qwen2.5-Coder-1.5B grepped the needle's key at its
//! first call in every `sniah` item of tools-seed10, then sliced and grepped the same
//! lines until the repeat rule forced an answer — 7 to 20 iterations where 2 do
//! (docs/eval.md). After such a result it is told to answer with `final_answer` when
//! what it found answers the whole task; the code media show the exact `FINAL` line in
//! that position.
//!
//! A task that names several keys (`multi-needle`: "the special magic numbers for
//! ivory-falcon-10, eager-badger-07, …") is told which keys no grep has found yet
//! instead: told only to answer, the model answered with the first key's number
//! (latest-seed11, `multi-needle` item 0).

use std::collections::HashSet;

use serde_json::Value;

use crate::env::ToolOutcome;
use crate::provider::ToolCall;

/// The pattern of `call` when it is a `ctx_grep` that ran (not an error, not a repeat
/// shown again) and found at least one line, and `task` holds the pattern as a whole
/// token, in any case (`jolly-quokka-91` of "… the special magic number for
/// jolly-quokka-91 mentioned …").
pub(super) fn read(call: &ToolCall, outcome: &ToolOutcome, task: &str) -> Option<String> {
    if call.name != "ctx_grep" || outcome.is_error || outcome.repeated {
        return None;
    }
    if outcome.content.starts_with("no line") {
        return None;
    }
    let arguments: Value = serde_json::from_str(&call.arguments).ok()?;
    let pattern = arguments.get("pattern")?.as_str()?.trim();
    let plain = pattern.len() >= 3
        && pattern
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '));
    (plain && holds_token(&task.to_lowercase(), &pattern.to_lowercase()))
        .then(|| pattern.to_owned())
}

/// The keys `task` names: its words that hold a letter and a `-` or a digit
/// (`jolly-quokka-91`), lowercased, in order, each once.
pub(super) fn keys(task: &str) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for word in task.split_whitespace() {
        let word = word
            .trim_matches(|c: char| ",.;:?!\"'()`".contains(c))
            .to_lowercase();
        let letter = word.chars().any(char::is_alphabetic);
        let mark = word.chars().any(|c| c == '-' || c.is_ascii_digit());
        let plain = word
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_'));
        if word.len() >= 3 && letter && mark && plain && !keys.contains(&word) {
            keys.push(word);
        }
    }
    keys
}

/// What the model is told after a grep of `word`, a word the task names, found lines:
/// `found` gathers, over the run, the words such greps found. For a task of one key or
/// none, to answer when what it found answers the whole task; for a task of several
/// `keys`, which of them no grep has found yet — or, when none is left, to answer.
pub(super) fn notice(word: &str, keys: &[String], found: &mut HashSet<String>) -> String {
    found.insert(word.to_lowercase());
    if keys.len() < 2 {
        return crate::prompt::task_word_found(word);
    }
    let missing: Vec<&str> = keys
        .iter()
        .filter(|key| !found.contains(*key))
        .map(String::as_str)
        .collect();
    crate::prompt::task_keys_found(word, keys.len(), &missing)
}

/// Whether `text` holds `token` with no letter, digit, `-` or `_` touching either end.
fn holds_token(text: &str, token: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || matches!(c, '-' | '_'));
    text.match_indices(token).any(|(at, _)| {
        !word(text[..at].chars().next_back()) && !word(text[at + token.len()..].chars().next())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TASK: &str =
        "What is the special magic number for jolly-quokka-91 mentioned in the context?";

    fn grep(pattern: &str) -> ToolCall {
        ToolCall {
            id: "1".into(),
            name: "ctx_grep".into(),
            arguments: serde_json::json!({"variable": "context", "pattern": pattern}).to_string(),
        }
    }

    fn found(content: &str) -> ToolOutcome {
        ToolOutcome::result(content)
    }

    #[test]
    fn a_grep_of_the_task_s_key_that_found_its_line_is_read() {
        // The tools-seed10 reading's `sniah` item 1, as the model called it.
        let line = "1 line of context matches \"jolly-quokka-91\":\noffset 9847 (line 153): The special magic number for jolly-quokka-91 is 8520563.";
        assert_eq!(
            read(&grep("jolly-quokka-91"), &found(line), TASK).as_deref(),
            Some("jolly-quokka-91")
        );
        assert_eq!(
            read(&grep("Magic Number"), &found(line), TASK).as_deref(),
            Some("Magic Number")
        );
    }

    #[test]
    fn the_keys_a_task_names_are_read_in_order() {
        assert_eq!(keys(TASK), ["jolly-quokka-91"]);
        // The latest-seed11 reading's `multi-needle` item 0.
        let four = "What are the special magic numbers for ivory-falcon-10, eager-badger-07, dusty-ibis-84 and eager-marten-09 mentioned in the context?";
        assert_eq!(
            keys(four),
            [
                "ivory-falcon-10",
                "eager-badger-07",
                "dusty-ibis-84",
                "eager-marten-09"
            ]
        );
        // A field's value, a year or a plain word is not a key.
        let records = "How many records have label=returns and year > 2000?";
        assert!(keys(records).is_empty(), "{:?}", keys(records));
    }

    #[test]
    fn a_task_of_several_keys_is_told_which_are_left() {
        let keys = keys("the numbers for ivory-falcon-10, eager-badger-07 and dusty-ibis-84?");
        let mut found = HashSet::new();
        let first = notice("Ivory-Falcon-10", &keys, &mut found);
        assert!(
            first.contains("not found yet: eager-badger-07, dusty-ibis-84")
                && !first.contains("call final_answer with the answer now"),
            "{first}"
        );
        notice("eager-badger-07", &keys, &mut found);
        let last = notice("dusty-ibis-84", &keys, &mut found);
        assert!(last.contains("every one of the 3 keys"), "{last}");
        // One key: answer when it answers the whole task.
        let one = notice("jolly-quokka-91", &["jolly-quokka-91".into()], &mut found);
        assert!(
            one.contains("call final_answer with the answer now"),
            "{one}"
        );
    }

    #[test]
    fn other_greps_and_other_results_are_not_read() {
        let line = "3 lines of context match \"smoking\":\n…";
        // A word the task does not name, part of a word, a regex.
        assert_eq!(read(&grep("smoking"), &found(line), TASK), None);
        assert_eq!(read(&grep("jolly-quokka"), &found(line), TASK), None);
        assert_eq!(read(&grep("quokka-9\\d"), &found(line), TASK), None);
        // Nothing found, an error, a repeat shown again, another tool.
        let none = "no line of context matches \"jolly-quokka-91\"";
        assert_eq!(read(&grep("jolly-quokka-91"), &found(none), TASK), None);
        assert_eq!(
            read(&grep("jolly-quokka-91"), &ToolOutcome::error("bad"), TASK),
            None
        );
        let mut repeated = found(line);
        repeated.repeated = true;
        assert_eq!(read(&grep("jolly-quokka-91"), &repeated, TASK), None);
        let slice = ToolCall {
            name: "ctx_slice".into(),
            ..grep("jolly-quokka-91")
        };
        assert_eq!(read(&slice, &found(line), TASK), None);
    }
}

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

/// A `ctx_grep` of words the task names that found lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Grep {
    /// Its pattern, as written.
    pub pattern: String,
    /// The words of the pattern that the task names and the lines found hold: the
    /// pattern itself, or those alternatives of `a|b|c` that were found.
    pub words: Vec<String>,
}

/// The grep `call` made when it is a `ctx_grep` that ran (not an error, not a repeat
/// shown again) and found at least one line, and its pattern is a word `task` holds as
/// a whole token, in any case (`jolly-quokka-91` of "… the special magic number for
/// jolly-quokka-91 mentioned …"), or such words joined by `|` — each counted found
/// when a line found holds it (s19-seed19 tools `multi-needle` item 1: all four keys in
/// one grep, told nothing, then slices and guesses).
pub(super) fn read(call: &ToolCall, outcome: &ToolOutcome, task: &str) -> Option<Grep> {
    if call.name != "ctx_grep" || outcome.is_error || outcome.repeated {
        return None;
    }
    if outcome.content.starts_with("no line") {
        return None;
    }
    let arguments: Value = serde_json::from_str(&call.arguments).ok()?;
    let pattern = arguments.get("pattern")?.as_str()?.trim();
    let task = task.to_lowercase();
    let named = |word: &str| {
        let plain = word.len() >= 3
            && word
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '));
        plain && holds_token(&task, &word.to_lowercase())
    };
    let listed = [",", "|", " and "]
        .iter()
        .any(|mark| pattern.contains(mark));
    let words: Vec<String> = if listed {
        // Keys joined by `|`, or listed as the task lists them (the tool greps such a
        // list of its keys joined by `|` in its place).
        let alternatives: Vec<&str> = pattern
            .split(['|', ','])
            .flat_map(|part| part.split(" and "))
            .map(str::trim)
            .filter(|part| !part.is_empty())
            .collect();
        if !alternatives.iter().all(|word| named(word)) {
            return None;
        }
        // The lines found, not the header that repeats the pattern.
        let lines = outcome
            .content
            .split_once('\n')
            .map_or("", |(_, lines)| lines)
            .to_lowercase();
        alternatives
            .into_iter()
            .filter(|word| lines.contains(&word.to_lowercase()))
            .map(str::to_owned)
            .collect()
    } else if named(pattern) {
        vec![pattern.to_owned()]
    } else {
        return None;
    };
    (!words.is_empty()).then(|| Grep {
        pattern: pattern.to_owned(),
        words,
    })
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

/// What the model is told after `grep`, of words the task names, found lines: `found`
/// gathers, over the run, the words such greps found. For a task of one key or none,
/// to answer when what it found answers the whole task; for a task of several `keys`,
/// which of them no grep has found yet — or, when none is left, to answer.
pub(super) fn notice(grep: &Grep, keys: &[String], found: &mut HashSet<String>) -> String {
    found.extend(grep.words.iter().map(|word| word.to_lowercase()));
    let word = grep.pattern.as_str();
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
        let words = |pattern: &str| read(&grep(pattern), &found(line), TASK).map(|g| g.words);
        assert_eq!(
            words("jolly-quokka-91"),
            Some(vec!["jolly-quokka-91".into()])
        );
        assert_eq!(words("Magic Number"), Some(vec!["Magic Number".into()]));
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
        let first = notice(&one("Ivory-Falcon-10"), &keys, &mut found);
        assert!(
            first.contains("not found yet: eager-badger-07, dusty-ibis-84")
                && !first.contains("call final_answer with the answer now"),
            "{first}"
        );
        notice(&one("eager-badger-07"), &keys, &mut found);
        let last = notice(&one("dusty-ibis-84"), &keys, &mut found);
        assert!(last.contains("every one of the 3 keys"), "{last}");
        // One key: answer when it answers the whole task.
        let single = notice(
            &one("jolly-quokka-91"),
            &["jolly-quokka-91".into()],
            &mut found,
        );
        assert!(
            single.contains("call final_answer with the answer now"),
            "{single}"
        );
    }

    /// A grep of the one word `word` that found it.
    fn one(word: &str) -> Grep {
        Grep {
            pattern: word.to_owned(),
            words: vec![word.to_owned()],
        }
    }

    #[test]
    fn a_grep_of_the_task_s_keys_joined_by_bars_counts_each_key_found() {
        // The s19-seed19 reading's tools `multi-needle` item 1, as the model called it.
        let task = "What are the special magic numbers for nimble-yak-67, mellow-quokka-07, hollow-heron-27 and frosty-quokka-10 mentioned in the context?";
        let pattern = "nimble-yak-67|mellow-quokka-07|hollow-heron-27|frosty-quokka-10";
        let all = format!("4 lines of context match \"{pattern}\":\noffset 2341 (line 47): The special magic number for frosty-quokka-10 is 3172248.\noffset 7212 (line 118): The special magic number for nimble-yak-67 is 3502627.\noffset 15419 (line 238): The special magic number for mellow-quokka-07 is 7142310.\noffset 23545 (line 359): The special magic number for hollow-heron-27 is 5617100.");
        let read_all = read(&grep(pattern), &found(&all), task).expect("read");
        assert_eq!(read_all.words.len(), 4);
        let mut seen = HashSet::new();
        let told = notice(&read_all, &keys(task), &mut seen);
        assert!(told.contains("every one of the 4 keys"), "{told}");
        // Two of the four found: those two counted, the others named as left.
        let two = format!("2 lines of context match \"{pattern}\":\noffset 2341 (line 47): The special magic number for frosty-quokka-10 is 3172248.\noffset 7212 (line 118): The special magic number for nimble-yak-67 is 3502627.");
        let read_two = read(&grep(pattern), &found(&two), task).expect("read");
        assert_eq!(read_two.words, ["nimble-yak-67", "frosty-quokka-10"]);
        let told = notice(&read_two, &keys(task), &mut HashSet::new());
        assert!(
            told.contains("not found yet: mellow-quokka-07, hollow-heron-27"),
            "{told}"
        );
        // An alternative the task does not name: not read.
        assert_eq!(
            read(&grep("nimble-yak-67|magic\\d"), &found(&all), task),
            None
        );
        // The task's list, grepped by the tool as the alternation (its result as the
        // tool writes it): read alike.
        let list = "nimble-yak-67, mellow-quokka-07, hollow-heron-27 and frosty-quokka-10";
        let in_place = format!("the keys \"{list}\" lists, joined by |, were grepped in its place (no line of context holds the list whole: a line matches a pattern only holding all of it, in that order): {all}");
        let listed = read(&grep(list), &found(&in_place), task).expect("read");
        assert_eq!(listed.words.len(), 4);
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

//! A `ctx_grep` of a word the task names that found lines: under `--env tools`, what the
//! task asks about is then in view. Qwen2.5-Coder-1.5B grepped the needle's key at its
//! first call in every `sniah` item of tools-seed10, then sliced and grepped the same
//! lines until the repeat rule forced an answer — 7 to 20 iterations where 2 do
//! (docs/eval.md). After such a result it is told to answer with `final_answer` when
//! what it found answers the whole task; the code media show the exact `FINAL` line in
//! that position.

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

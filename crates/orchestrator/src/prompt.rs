//! The prompts the loop sends: a system prompt naming the protocol and helpers, a
//! first user message describing the task and the context by metadata only, and the
//! messages that feed REPL output and state (budget, variable inventory) back.
//!
//! Nothing here ever sees the context itself, only a [`ContextInfo`]; the first
//! message's size is bounded whatever the context's size.

use std::fmt::Write as _;

use crate::context::{ContextInfo, CHUNK_CHARS};
use crate::env::{ExecOutcome, ReplVariable};
use crate::format::{clip, human_bytes};

pub use rlm_env::{system_prompt, EnvGuide, PromptFeatures};

/// A context above this many bytes gets a "large" note (docs/loop.md, size notes).
pub const WARN_BYTES: u64 = 100 * 1024;
/// Above this, the note says the context must be chunked.
pub const CHUNK_BYTES: u64 = 1024 * 1024;
/// Above this total, the note says to delegate.
pub const MAX_TOTAL_BYTES: u64 = 10 * 1024 * 1024;

/// Where the run stands, shown to the model each turn.
#[derive(Debug, Clone, Copy, Default)]
pub struct Budget {
    /// 1-based iteration about to run.
    pub iteration: u32,
    /// `--max-iterations`.
    pub max_iterations: u32,
    /// This run's depth.
    pub depth: u32,
    /// `--max-depth`.
    pub max_depth: u32,
    /// Tokens used so far (prompt + completion, this run and its sub-calls).
    pub tokens_used: u64,
    /// Token budget, if any.
    pub max_tokens: Option<u64>,
}

/// What earlier queries of a persistent session left in the REPL (all zero for a
/// single run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionState {
    /// Earlier `{query, answer}` pairs in `history`.
    pub history_len: usize,
    /// Contexts loaded so far, one slot each (`contexts[i]`, `context_<i>`); `context`
    /// is the latest.
    pub context_slots: usize,
}

/// The size notes for a context of this size.
pub fn size_warnings(info: &ContextInfo) -> Vec<String> {
    let mut notes = Vec::new();
    let bytes = info.total_bytes;
    if bytes > CHUNK_BYTES {
        let chunks = bytes / WARN_BYTES + 1;
        notes.push(format!(
            "requires chunking: {} is far beyond one model call; work on about {chunks} pieces (context_chunks) with llm_query_parallel or sub_rlm",
            human_bytes(bytes)
        ));
    } else if bytes > WARN_BYTES {
        notes.push(format!(
            "large: {} — never print it whole; peek and search instead",
            human_bytes(bytes)
        ));
    }
    if bytes > MAX_TOTAL_BYTES {
        notes.push(format!(
            "total size {} exceeds {}: delegate reading to sub-calls and keep only their findings",
            human_bytes(bytes),
            human_bytes(MAX_TOTAL_BYTES)
        ));
    }
    notes
}

/// How the model reaches the context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Access {
    /// By writing code in a REPL where it is loaded (`python`, `js`).
    #[default]
    Code,
    /// Through the micro-tools (`tools`): there is no code, so no chunk views.
    Tools,
}

/// The first user message: task, context metadata, size notes and state.
pub fn first_message(
    query: &str,
    context: Option<&ContextInfo>,
    budget: &Budget,
    session: SessionState,
    access: Access,
) -> String {
    let mut text = String::with_capacity(1024 + query.len());
    let _ = writeln!(text, "Task: {query}\n");
    match context {
        None => text.push_str("Context: none was given (`context` is None).\n"),
        Some(info) => {
            text.push_str(match access {
                Access::Code => "Context (loaded in the REPL as `context`; it is not shown here):\n",
                Access::Tools => "Context (the variable `context`, read through the tools; it is not shown here):\n",
            });
            let _ = writeln!(text, "- type: {}", info.kind);
            let about = if info.estimated { "about " } else { "" };
            let _ = write!(
                text,
                "- size: {about}{} characters ({})",
                info.total_chars,
                human_bytes(info.total_bytes)
            );
            if let Some(items) = info.items {
                let _ = write!(text, ", {items} items");
            }
            if let Some(lines) = info.lines {
                let _ = write!(text, ", {about}{lines} lines");
            }
            if info.estimated {
                text.push_str(" (estimated from samples: the file was not read whole)");
            }
            text.push('\n');
            if info.lazy && access == Access::Code {
                text.push_str("- lazy: `context` is a read-only view of the file, not a str: len(), slices, find/count/`in`, `for line in context` (lines), splitlines(), finditer(regex) and search()/peek()/context_chunks work without loading it; other str methods and str(context) load it whole and fail when it does not fit in memory\n");
            }
            let _ = match access {
                Access::Code => writeln!(text, "- source: {}", clip(&info.origin, 200)),
                // Small models take a path for the variable's name.
                Access::Tools => writeln!(
                    text,
                    "- source: {} (not a variable name: give the tools \"context\")",
                    clip(&info.origin, 200)
                ),
            };
            if !info.skipped.is_empty() {
                let _ = writeln!(
                    text,
                    "- skipped (not in `context`): {}",
                    clip(&info.skipped.join(", "), 2000)
                );
            }
            let _ = writeln!(
                text,
                "- preview (first {} characters): {}",
                crate::context::PREVIEW_CHARS,
                json_quoted(&info.preview)
            );
            match access {
                Access::Code => {
                    if info.kind == "str" && info.total_chars > CHUNK_CHARS {
                        let _ = writeln!(
                            text,
                            "- chunks: `context_chunks` is a list view of {} pieces of {CHUNK_CHARS} characters",
                            info.total_chars.div_ceil(CHUNK_CHARS)
                        );
                    }
                    for note in size_warnings(info) {
                        let _ = writeln!(text, "- note: {note}");
                    }
                }
                Access::Tools if info.total_bytes > WARN_BYTES => {
                    text.push_str("- note: far too large to read whole: find what matters with ctx_grep, then read around it with ctx_slice\n");
                }
                Access::Tools => {}
            }
        }
    }
    let slots = session.context_slots;
    if slots > 1 {
        let last = slots - 1;
        let _ = match access {
            Access::Code => writeln!(
                text,
                "- contexts: {slots} slots, one per context given in this session: `contexts[0]` … `contexts[{last}]` (also `context_0` … `context_{last}`); `context` is the latest"
            ),
            Access::Tools => writeln!(
                text,
                "- contexts: {slots}, one per context given in this session: `context_0` … `context_{last}`; `context` is the latest"
            ),
        };
    }
    let history_len = session.history_len;
    if history_len > 0 && access == Access::Code {
        let _ = writeln!(
            text,
            "- history: {history_len} earlier queries and answers are in `history` (a list of {{\"query\", \"answer\"}})"
        );
    }
    text.push('\n');
    text.push_str(&state_block(budget, &[], 0));
    text.push_str(match access {
        Access::Code => "\nStart by writing code in a ```repl block.",
        Access::Tools => "\nStart by calling a tool.",
    });
    text
}

/// One executed block as it goes into the transcript.
pub fn exec_report(code: &str, language: &str, shaped_output: &str) -> String {
    let output = if shaped_output.trim().is_empty() {
        "(no output)"
    } else {
        shaped_output
    };
    format!("Code executed:\n```{language}\n{code}\n```\n\nREPL output:\n{output}")
}

/// The user message after a turn: block reports, notices, then the current state.
pub fn turn_message(
    reports: &[String],
    notices: &[String],
    budget: &Budget,
    variables: &[ReplVariable],
    max_vars: usize,
) -> String {
    let mut text = reports.join("\n\n");
    for notice in notices {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(notice);
    }
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(&state_block(budget, variables, max_vars));
    text
}

/// Budget counters and the bounded variable inventory.
pub fn state_block(budget: &Budget, variables: &[ReplVariable], max_vars: usize) -> String {
    let mut text = format!(
        "State: iteration {} of {} · depth {} of {} · tokens used {}",
        budget.iteration, budget.max_iterations, budget.depth, budget.max_depth, budget.tokens_used
    );
    if let Some(max) = budget.max_tokens {
        let _ = write!(text, " of {max}");
    }
    text.push('\n');
    if variables.is_empty() {
        text.push_str("Your variables: none yet\n");
        return text;
    }
    text.push_str("Your variables:\n");
    for v in variables.iter().take(max_vars) {
        let _ = writeln!(
            text,
            "- {} ({}, size {}): {}",
            v.name,
            v.type_name,
            v.size,
            clip(&v.preview, 80)
        );
    }
    if variables.len() > max_vars {
        let _ = writeln!(
            text,
            "- … and {} more (SHOW_VARS() lists them)",
            variables.len() - max_vars
        );
    }
    text
}

/// What the forced request says first when the iterations ran out (when the loop
/// stopped for another reason, that reason is said instead).
pub const ITERATIONS_USED: &str = "You have used every iteration.";

/// The forced request when iterations are exhausted or the loop stopped: after
/// [`ITERATIONS_USED`] or the reason it stopped.
pub const FORCE_FINAL: &str = "Do not write code. Answer now with your best answer from what you have learned, on its own line: FINAL(your answer).";

/// What the forced request asks for, under the code medium (`code`) or the tools.
pub fn force_final(code: bool) -> &'static str {
    if code {
        FORCE_FINAL
    } else {
        FORCE_FINAL_TOOLS
    }
}

/// Sent when iterations are exhausted, or the loop stopped, under `--env tools`.
pub const FORCE_FINAL_TOOLS: &str = "Do not call any more tools except final_answer. Answer now with your best answer from what you have learned: call final_answer with it, or write FINAL(…) on its own line with the answer inside the parentheses.";

/// A note for an execution that timed out or restarted the REPL, if any.
pub fn exec_notices(outcome: &ExecOutcome) -> Option<String> {
    outcome.restarted.then(|| "Note: the REPL was restarted; variables you defined are gone (context and helpers are loaded again).".to_owned())
}

fn json_quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::describe_value;

    fn info_of(text: &str) -> ContextInfo {
        describe_value(
            &serde_json::Value::String(text.to_owned()),
            "test.log".into(),
        )
    }

    #[test]
    fn skipped_directory_entries_are_named_to_the_model() {
        let mut info = info_of("text");
        info.skipped = vec!["loop (symbolic link, not followed)".into()];
        let message = first_message(
            "q",
            Some(&info),
            &Budget::default(),
            SessionState::default(),
            Access::Code,
        );
        assert!(
            message.contains("- skipped (not in `context`): loop (symbolic link, not followed)"),
            "{message}"
        );
    }

    #[test]
    fn test_prompt_no_full_context() {
        let needle = "the-secret-needle-4242";
        let context = format!("{}{needle}{}", "a".repeat(500), "b".repeat(300_000));
        let info = info_of(&context);
        let message = first_message(
            "find the needle",
            Some(&info),
            &Budget::default(),
            SessionState::default(),
            Access::Code,
        );
        assert!(!message.contains(needle));
        assert!(message.len() < 2_000, "{}", message.len());
        assert!(message.contains("300522 characters"), "{message}");
    }

    #[test]
    fn prompt_size_does_not_grow_with_the_context() {
        let small = first_message(
            "q",
            Some(&info_of(&"x".repeat(2_000))),
            &Budget::default(),
            SessionState::default(),
            Access::Code,
        );
        let large = first_message(
            "q",
            Some(&info_of(&"x".repeat(20_000_000))),
            &Budget::default(),
            SessionState::default(),
            Access::Code,
        );
        assert!(
            large.len().abs_diff(small.len()) < 600,
            "{} vs {}",
            small.len(),
            large.len()
        );
    }

    #[test]
    fn test_size_warning() {
        assert!(size_warnings(&info_of(&"x".repeat(1000))).is_empty());
        let large = size_warnings(&info_of(&"x".repeat(200 * 1024)));
        assert_eq!(large.len(), 1);
        assert!(large[0].starts_with("large"));
        let huge = size_warnings(&info_of(&"x".repeat(11 * 1024 * 1024)));
        assert!(huge[0].starts_with("requires chunking"), "{huge:?}");
        assert!(huge[1].starts_with("total size"), "{huge:?}");
    }

    #[test]
    fn test_chunking_note() {
        let message = first_message(
            "q",
            Some(&info_of(&"x".repeat(250_000))),
            &Budget::default(),
            SessionState::default(),
            Access::Code,
        );
        assert!(
            message.contains("`context_chunks` is a list view of 3 pieces"),
            "{message}"
        );
    }

    #[test]
    fn session_state_is_told_only_in_sessions() {
        let info = info_of("some text");
        let single = first_message(
            "q",
            Some(&info),
            &Budget::default(),
            SessionState::default(),
            Access::Code,
        );
        assert!(
            !single.contains("history") && !single.contains("slots"),
            "{single}"
        );
        let session = SessionState {
            history_len: 2,
            context_slots: 3,
        };
        let later = first_message("q", Some(&info), &Budget::default(), session, Access::Code);
        assert!(
            later.contains("- history: 2 earlier queries and answers are in `history`"),
            "{later}"
        );
        assert!(
            later.contains("- contexts: 3 slots") && later.contains("`context_2`"),
            "{later}"
        );
    }

    #[test]
    fn inventory_is_clip() {
        let vars: Vec<ReplVariable> = (0..30)
            .map(|i| ReplVariable {
                name: format!("v{i}"),
                type_name: "int".into(),
                size: 1,
                preview: "1".into(),
            })
            .collect();
        let state = state_block(&Budget::default(), &vars, 5);
        assert_eq!(state.lines().filter(|l| l.starts_with("- v")).count(), 5);
        assert!(state.contains("and 25 more"));
    }

    #[test]
    fn exec_report_has_the_stable_shape() {
        assert_eq!(
            exec_report("print(1)", "python", "1\n"),
            "Code executed:\n```python\nprint(1)\n```\n\nREPL output:\n1\n"
        );
    }

    #[test]
    fn human_bytes_reads_well() {
        assert_eq!(human_bytes(10), "10 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(64 << 20), "64.0 MiB");
    }
}

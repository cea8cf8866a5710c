//! What each hook of a rule is shown: the reply, a block or call about to run or that
//! ran, a proposed answer, the forced answer — only what the model wrote and what its
//! code and calls gave, never the task.

use crate::env::ToolBox;
use crate::events::AnswerSource;
use crate::parse::{ParsedResponse, Quoted};
use crate::rlm::log::BlockLog;

/// What the model works through, as a rule needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form<'a> {
    /// Fenced code in a REPL of this language tag (`python`, `js`).
    Code {
        /// The REPL's first fence tag.
        language: &'a str,
    },
    /// Tool calls (`--env tools`, `--env plan`).
    Tools,
}

/// A reply, parsed ([`super::Correction::on_reply`]).
pub struct Reply<'a> {
    /// The medium.
    pub form: Form<'a>,
    /// The reply as parsed.
    pub parsed: &'a ParsedResponse,
    /// The reply's text, trimmed.
    pub text: &'a str,
    /// True when it stopped at the model's output-token limit.
    pub truncated: bool,
    /// The tool calls it makes (tools medium; 0 under code).
    pub calls: usize,
    /// What it wrote without taking it.
    pub not_taken: &'a [Quoted],
    /// What ran so far in the run.
    pub log: &'a BlockLog,
    /// The context's size in characters.
    pub context_chars: u64,
}

impl Reply<'_> {
    /// True when the reply has something to run: a block (code) or a call (tools).
    pub fn acts(&self) -> bool {
        match self.form {
            Form::Code { .. } => !self.parsed.blocks.is_empty(),
            Form::Tools => self.calls > 0,
        }
    }

    /// True when it names an answer the protocol may take (`FINAL`, `FINAL_VAR`).
    pub fn answers(&self) -> bool {
        self.parsed.final_literal.is_some() || self.parsed.final_var.is_some()
    }
}

/// A code block or a tool call about to run ([`super::Correction::before_block`]).
pub struct Block<'a> {
    /// The medium.
    pub form: Form<'a>,
    /// The code, or the call as the trace shows it (`ctx_grep({…})`).
    pub code: &'a str,
    /// What ran before it.
    pub log: &'a BlockLog,
    /// The context's size in characters.
    pub context_chars: u64,
}

/// A code block or a tool call that ran ([`super::Correction::after_block`]). Its
/// output and the run's log are part of the hook even where no rule reads them yet.
#[expect(dead_code, reason = "hook inputs no enabled rule reads yet")]
pub struct Ran<'a> {
    /// The medium.
    pub form: Form<'a>,
    /// The code, or the call.
    pub code: &'a str,
    /// Its output as the model reads it.
    pub output: &'a str,
    /// The error it raised, if any.
    pub error: Option<&'a str>,
    /// What ran before it (not yet holding it).
    pub log: &'a BlockLog,
}

/// A proposed answer ([`super::Correction::on_answer`]). Its text and form are part
/// of the hook even where no rule reads them yet.
#[expect(dead_code, reason = "hook inputs no enabled rule reads yet")]
pub struct Answer<'a> {
    /// The medium.
    pub form: Form<'a>,
    /// The answer.
    pub answer: &'a str,
    /// How it was given.
    pub source: AnswerSource,
    /// The tool box, under the tools medium: it may refuse an answer its own results
    /// do not support yet ([`ToolBox::refuse_answer`]).
    pub tools: Option<&'a mut dyn ToolBox>,
}

/// The forced answer's reply ([`super::Correction::on_forced`]).
pub struct Forced<'a> {
    /// The medium.
    pub form: Form<'a>,
    /// Its text, trimmed (no answer read from it).
    pub text: &'a str,
    /// True when it stopped at the output-token limit.
    pub truncated: bool,
    /// True when an answer was read from it (`FINAL`, `FINAL_VAR`, `final_answer`).
    pub answered: bool,
}

#[cfg(test)]
pub(super) mod tests {
    //! Views built from a reply's text, for the rules' table tests.

    use super::*;
    use crate::parse::parse_response;
    use crate::rlm::correction::Verdict;

    /// `ask` of the code-medium view of `text` (a Python REPL), after `log`.
    pub(in crate::rlm::correction) fn code_reply_after(
        text: &str,
        log: &BlockLog,
        ask: impl FnOnce(&mut Reply<'_>) -> Verdict,
    ) -> Verdict {
        let parsed = parse_response(text, &["python", "js"]);
        let mut reply = Reply {
            form: Form::Code { language: "python" },
            parsed: &parsed,
            text: text.trim(),
            truncated: false,
            calls: 0,
            not_taken: &parsed.quoted,
            log,
            context_chars: 0,
        };
        ask(&mut reply)
    }

    /// `ask` of the code-medium view of `text`, first in a run.
    pub(in crate::rlm::correction) fn code_reply(
        text: &str,
        ask: impl FnOnce(&mut Reply<'_>) -> Verdict,
    ) -> Verdict {
        code_reply_after(text, &BlockLog::new(), ask)
    }

    /// `ask` of the tools-medium view of `text`, which makes `calls` calls.
    pub(in crate::rlm::correction) fn tools_reply(
        text: &str,
        calls: usize,
        ask: impl FnOnce(&mut Reply<'_>) -> Verdict,
    ) -> Verdict {
        let parsed = parse_response(text, &[]);
        let log = BlockLog::new();
        let mut reply = Reply {
            form: Form::Tools,
            parsed: &parsed,
            text: text.trim(),
            truncated: false,
            calls,
            not_taken: &parsed.quoted,
            log: &log,
            context_chars: 0,
        };
        ask(&mut reply)
    }
}

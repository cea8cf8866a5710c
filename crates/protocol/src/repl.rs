//! One step of a REPL, as the loop and every environment see it: what a code block
//! did ([`ExecOutcome`], ending the run from code with a [`FinalAnswer`]), what a tool
//! call gave back ([`ToolOutcome`]), and the variables and history a REPL keeps.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a run ended from inside code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FinalAnswer {
    /// `FINAL_VAR(name)`: the variable's value, a string as is, anything else as JSON.
    Var {
        /// The variable's name.
        name: String,
        /// Its rendered value.
        value: String,
    },
    /// `SUBMIT(obj)`: a structured answer.
    Submit {
        /// The payload.
        value: Value,
    },
}

/// The result of executing one code block.
#[derive(Debug, Clone, Default)]
pub struct ExecOutcome {
    /// What the code printed.
    pub stdout: String,
    /// What the code wrote to stderr.
    pub stderr: String,
    /// The exception (traceback) if the code raised.
    pub error: Option<String>,
    /// Set when the code called `FINAL_VAR` or `SUBMIT`.
    pub final_answer: Option<FinalAnswer>,
    /// The code ran past the execution timeout and was interrupted.
    pub timed_out: bool,
    /// The environment was restarted: every variable the model made is gone.
    pub restarted: bool,
    /// Wall time of the execution.
    pub duration: Duration,
}

impl ExecOutcome {
    /// Everything the model should see, in order: stdout, stderr, error, notices.
    pub fn combined_output(&self) -> String {
        let mut out = self.stdout.clone();
        for extra in [Some(&self.stderr), self.error.as_ref()]
            .into_iter()
            .flatten()
        {
            if !extra.is_empty() {
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str(extra);
            }
        }
        if self.timed_out {
            out.push_str("\n[execution interrupted: it exceeded the execution timeout]");
        }
        if self.restarted {
            out.push_str("\n[the REPL was restarted: variables you defined are lost; `context` and helpers are loaded again]");
        }
        out
    }
}

/// The result of one tool call (`--env tools`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    /// What goes back to the model as the call's result.
    pub content: String,
    /// The call failed (unknown tool, bad arguments, …); the model is told so.
    pub is_error: bool,
    /// Set by `final_answer`: the run's answer.
    pub final_answer: Option<String>,
    /// The call repeats earlier ones and was not run again (its earlier result is the
    /// content): a turn of nothing but such calls is a loop the run counts.
    pub repeated: bool,
}

impl ToolOutcome {
    /// A successful result.
    pub fn result(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            final_answer: None,
            repeated: false,
        }
    }

    /// An error result: the message says what is wrong and what to do.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            content: message.into(),
            is_error: true,
            final_answer: None,
            repeated: false,
        }
    }
}

/// A variable the model defined in the REPL (for the inventory and `SHOW_VARS`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplVariable {
    /// Its name.
    pub name: String,
    /// Python/JS type name.
    pub type_name: String,
    /// Length or size (items for collections, chars for strings).
    pub size: u64,
    /// A short preview (at most 80 chars).
    pub preview: String,
}

/// An earlier query of a persistent session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// The query.
    pub query: String,
    /// Its answer.
    pub answer: String,
}

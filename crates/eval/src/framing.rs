//! How a public benchmark puts an item to a plain model: the baseline arm of a RULER or
//! OOLONG item is asked in the benchmark's own framing, not in `eval`'s generic one,
//! so that the plain model's score is the one the benchmark defines.

use serde::{Deserialize, Serialize};

/// A benchmark's framing of the context and question for one direct call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Framing {
    /// One user message: `before`, the context, `after` (RULER: its few-shot example and
    /// template around the context, the answer prefix last).
    Around {
        /// What comes before the context.
        before: String,
        /// What comes after it.
        after: String,
        /// The tokens the benchmark lets the model generate, if it bounds them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer_tokens: Option<u32>,
    },
    /// A system message of `preamble`, a newline and the context, then the question as
    /// the user's message (OOLONG's harness, whose system message is these two parts).
    SystemContext {
        /// The system message's first part.
        preamble: String,
    },
}

/// OOLONG's system preamble (`eval_script_batched.py`).
pub const OOLONG_PREAMBLE: &str = "You are a helpful assistant.";

/// Who says a message of a framed prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    /// The system message.
    System,
    /// The user's message.
    User,
}

impl Framing {
    /// The messages of one direct call over `context` (cut or whole) for `question`.
    pub fn messages(&self, context: &str, question: &str) -> Vec<(Speaker, String)> {
        match self {
            Self::Around { before, after, .. } => {
                vec![(Speaker::User, format!("{before}{context}{after}"))]
            }
            Self::SystemContext { preamble } => vec![
                (Speaker::System, format!("{preamble}\n{context}")),
                (Speaker::User, question.to_owned()),
            ],
        }
    }

    /// The tokens the benchmark lets the model generate, if it bounds them.
    pub fn answer_tokens(&self) -> Option<u32> {
        match self {
            Self::Around { answer_tokens, .. } => *answer_tokens,
            Self::SystemContext { .. } => None,
        }
    }
}

/// What a public benchmark's generator makes besides the context: the question of the
/// arms given the context apart, the expected answer, and the baseline's framing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Posed {
    /// The question (RULER: its template's words without the context).
    pub question: String,
    /// The gold answer and how it is scored.
    pub expected: crate::score::Expected,
    /// How the baseline is asked.
    pub framing: Framing,
}

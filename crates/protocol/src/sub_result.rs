//! What a child hands back to its parent: one [`SubResult`] for nested runs, external
//! agents and each item of the parallel helpers alike.
//!
//! On the wire it is tagged by `status` (`"answer"` or `"error"`), so the model, a
//! parent run and a user reading `sub-result-<id>` all see the same shape; an error
//! carries how the child ended (exit code, signal, timeout, cancellation) and the tails
//! of its output, each field present only when it says something.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::RunId;
use crate::totals::RunTotals;

/// What a child (a nested run, an external agent, one call of a parallel helper) hands
/// back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SubResult {
    /// It answered.
    Answer(SubAnswer),
    /// It failed, timed out, was cancelled, or never said anything.
    Error(SubError),
}

/// A child's answer, and for a nested run what it used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubAnswer {
    /// The answer: a nested run's text, or what an external agent stored or printed.
    pub result: Value,
    /// True when it was forced at a limit.
    #[serde(default)]
    pub forced: bool,
    /// The nested run's id (its trace is `runs/<run-id>/`); none for an external agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// Iterations the nested run used.
    #[serde(default)]
    pub iterations: u32,
    /// The deepest depth it or a descendant reached.
    #[serde(default)]
    pub depth_reached: u32,
    /// What it used, descendants included.
    #[serde(flatten)]
    pub totals: RunTotals,
}

impl SubAnswer {
    /// An answer with nothing known of how it was reached (an external agent's).
    pub fn plain(result: Value) -> Self {
        Self {
            result,
            forced: false,
            run_id: None,
            iterations: 0,
            depth_reached: 0,
            totals: RunTotals::default(),
        }
    }

    /// The answer as text: a string as is, anything else as JSON.
    pub fn text(&self) -> String {
        match &self.result {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        }
    }
}

/// How a child failed. `error` says it in words; the other fields say how it ended,
/// each present only when it applies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubError {
    /// What went wrong, in words (and what to do about it).
    pub error: String,
    /// Its exit code, when it exited (127: it could not be found; 126: it could not be
    /// started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// It ran past its timeout and was stopped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// The timeout it ran past, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<f64>,
    /// It was cancelled (Ctrl-C, the run ending, a budget spent).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
    /// The nested run's id, when it got that far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// The start of what it printed (a clue, not an answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    /// The end of its stderr.
    #[serde(default)]
    pub stderr_tail: String,
    /// The scheduler's own line when the scheduler, not the child, ended it
    /// (`--runner slurm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<String>,
    /// Why a result the child stored could not be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_result_error: Option<String>,
}

impl SubError {
    /// An error with nothing known but its message.
    pub fn message(error: impl Into<String>) -> Self {
        Self {
            error: error.into(),
            ..Self::default()
        }
    }

    /// A child that could not be started: `exit_code` as a shell reports it (127: not
    /// found, 126: found but not startable).
    pub fn not_started(error: impl Into<String>, exit_code: i32) -> Self {
        Self {
            error: error.into(),
            exit_code: Some(exit_code),
            ..Self::default()
        }
    }
}

impl SubResult {
    /// The failure `error`, with nothing else known.
    pub fn error(error: impl Into<String>) -> Self {
        Self::Error(SubError::message(error))
    }

    /// True when the child answered.
    pub fn is_answer(&self) -> bool {
        matches!(self, Self::Answer(_))
    }

    /// Its wire form (a tagged object).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|e| {
            Value::String(format!("the sub-result could not be serialised: {e}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_answer_is_tagged_and_carries_its_totals_at_the_top_level() {
        let answer = SubResult::Answer(SubAnswer {
            result: json!("42"),
            forced: false,
            run_id: Some(RunId::from("20261122-094312-3fa9c1")),
            iterations: 2,
            depth_reached: 1,
            totals: RunTotals {
                llm_calls: 3,
                ..RunTotals::default()
            },
        });
        let wire = answer.to_value();
        assert_eq!(wire["status"], "answer");
        assert_eq!(wire["result"], "42");
        assert_eq!(wire["llm_calls"], 3);
        assert_eq!(wire["usage"]["prompt_tokens"], 0);
        let back: SubResult = serde_json::from_value(wire).unwrap();
        assert_eq!(back, answer);
    }

    #[test]
    fn an_error_shows_only_what_applies() {
        let error = SubResult::Error(SubError::not_started("no such program", 127));
        let wire = error.to_value();
        assert_eq!(
            wire,
            json!({"status": "error", "error": "no such program", "exit_code": 127, "stderr_tail": ""})
        );
        assert_eq!(serde_json::from_value::<SubResult>(wire).unwrap(), error);
    }

    #[test]
    fn a_result_without_a_status_is_refused() {
        assert!(serde_json::from_value::<SubResult>(json!({"error": "boom"})).is_err());
        assert!(serde_json::from_value::<SubResult>(json!({"result": "x"})).is_err());
    }
}

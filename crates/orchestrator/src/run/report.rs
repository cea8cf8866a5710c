//! What a finished run reports ([`RunReport`], printed by `--json`) and why a run fails
//! ([`RunError`]).

use std::path::PathBuf;

use rlm_context_store::StoreError;
use serde::{Deserialize, Serialize};

use crate::context::ContextError;
use crate::env::EnvError;
use crate::events::TraceError;
use crate::ids::RunId;
use crate::rlm::LoopError;
use rlm_protocol::RunTotals;

/// What a finished run reports; `--json` prints exactly this object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The answer.
    pub answer: String,
    /// The run id.
    pub run_id: RunId,
    /// True when the answer was forced.
    pub forced: bool,
    /// Iterations used.
    pub iterations: u32,
    /// Deepest depth reached by this run and its descendants.
    pub depth_reached: u32,
    /// Model calls, sub-agents, tokens and cost, descendants included (top-level
    /// fields on the wire).
    #[serde(flatten)]
    pub totals: RunTotals,
    /// The SUBMIT payload, when the answer came from SUBMIT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted: Option<serde_json::Value>,
    /// Where the trace is.
    #[serde(skip)]
    pub run_dir: PathBuf,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The input is bad (exit code 2); nothing was asked, nothing stored was touched.
    #[error(transparent)]
    BadInput(#[from] ContextError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The trace could not be written.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The environment could not start or broke.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// A task of the run panicked (a bug); nothing stored was left half-written.
    #[error("the {task} task of the run panicked: {message}; please report it")]
    Panicked {
        /// Which task (`store`, …).
        task: &'static str,
        /// The panic's message.
        message: String,
    },
    /// Ctrl-C or SIGTERM ended the run; its sub-agents were ended too.
    #[error("the run was cancelled; its trace is in {}", run_dir.display())]
    Cancelled {
        /// The run's trace directory.
        run_dir: PathBuf,
    },
    /// The loop failed (model unreachable, …); the trace is kept in `run_dir`.
    #[error("{source} (trace kept in {})", run_dir.display())]
    Loop {
        /// What failed.
        #[source]
        source: LoopError,
        /// The run's trace directory.
        run_dir: PathBuf,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlm_protocol::Usage;

    #[test]
    fn the_json_report_has_the_documented_fields() {
        let report = RunReport {
            answer: "billing: 512".into(),
            run_id: RunId::from("20261122-094312-3fa9c1"),
            forced: false,
            iterations: 3,
            depth_reached: 1,
            totals: RunTotals {
                sub_agents: 4,
                llm_calls: 7,
                usage: Usage {
                    prompt_tokens: 5120,
                    completion_tokens: 210,
                },
                cost_usd: None,
            },
            submitted: None,
            run_dir: PathBuf::from("/data/runs/20261122-094312-3fa9c1"),
        };
        let json = serde_json::to_string_pretty(&report).unwrap();
        insta::assert_snapshot!(json);
        let back: RunReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back.run_dir, PathBuf::new());
        assert_eq!(
            RunReport {
                run_dir: PathBuf::new(),
                ..report
            },
            back
        );
    }
}

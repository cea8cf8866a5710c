//! Nested RLMs as child processes (`sub_rlm`).
//!
//! A child is `rlm-orchestrate run` started with the parent's settings (its model is
//! the parent's sub-model), one level deeper, its context passed as a variable
//! reference (`--context-var`), and what is left of the parent's budgets. It runs its
//! own loop, writes `sub-result-<id>` itself, and the parent reads that variable after
//! the child exits; usage and depth reported there roll up into the parent's totals.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::provider::Usage;

/// Default `--agent-timeout`.
pub const DEFAULT_AGENT_TIMEOUT: Duration = Duration::from_secs(600);

/// How to start a child run: the program and the settings every child inherits.
#[derive(Debug, Clone)]
pub struct SubRlmLauncher {
    /// The `rlm-orchestrate` executable.
    pub program: PathBuf,
    /// Arguments placed before the per-call ones: global flags, `run`, then the
    /// inherited settings (provider, model, limits of the loop, …).
    pub args: Vec<String>,
    /// Environment variables the children need and the user configured (the
    /// sub-model's API key variable).
    pub pass_env: Vec<String>,
    /// `--agent-timeout`.
    pub timeout: Duration,
}

/// What a child reported in its result variable.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildReport {
    /// The answer, or the error object when the child failed.
    pub answer: Result<String, Value>,
    /// Its run id, if it got that far.
    pub run_id: Option<String>,
    /// Tokens it and its descendants used.
    pub usage: Usage,
    /// Cost it and its descendants reported.
    pub cost_usd: Option<f64>,
    /// Sub-agents it started.
    pub sub_agents: u64,
    /// The deepest depth it reached.
    pub depth_reached: u32,
}

impl ChildReport {
    /// Reads a child's result variable (`{"result", …}` or `{"error", …}`).
    pub fn from_value(value: &Value, child_depth: u32) -> Self {
        let usage = value
            .get("usage")
            .and_then(|u| serde_json::from_value::<Usage>(u.clone()).ok())
            .unwrap_or_default();
        let answer = match value.get("result") {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Ok(other.to_string()),
            None => Err(value.clone()),
        };
        Self {
            answer,
            run_id: value
                .get("run_id")
                .and_then(Value::as_str)
                .map(str::to_owned),
            usage,
            cost_usd: value.get("cost_usd").and_then(Value::as_f64),
            sub_agents: value.get("sub_agents").and_then(Value::as_u64).unwrap_or(0),
            depth_reached: value
                .get("depth_reached")
                .and_then(Value::as_u64)
                .map_or(child_depth, |d| d as u32)
                .max(child_depth),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_child_report_is_read_from_its_result_variable() {
        let report = ChildReport::from_value(
            &json!({"result": "42", "run_id": "r", "usage": {"prompt_tokens": 3, "completion_tokens": 4},
                    "cost_usd": 0.5, "sub_agents": 2, "depth_reached": 2}),
            1,
        );
        assert_eq!(report.answer, Ok("42".into()));
        assert_eq!(report.usage.total(), 7);
        assert_eq!(report.depth_reached, 2);
        assert_eq!(report.sub_agents, 2);
        let failed = ChildReport::from_value(&json!({"error": "boom"}), 1);
        assert_eq!(failed.answer, Err(json!({"error": "boom"})));
        assert_eq!(failed.depth_reached, 1);
    }
}

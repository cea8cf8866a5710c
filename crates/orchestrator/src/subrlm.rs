//! Nested RLMs as child processes (`sub_rlm`).
//!
//! A child is `rlm-orchestrate run` started with the parent's settings (its model is
//! the parent's sub-model), one level deeper, its context passed as a variable
//! reference (`--context-var`), and what is left of the parent's budgets. It runs its
//! own loop, writes `sub-result-<id>` itself, and the parent reads that variable after
//! the child exits; usage and depth reported there roll up into the parent's totals.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rlm_context_store::Store;
use rlm_process::{run_supervised, CancellationToken, SpawnOptions, SuperviseOptions, Termination};
use serde_json::{json, Value};

use crate::agents::{env_vars, inherited_environment, result_key};
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

/// One child run to start.
#[derive(Debug, Clone)]
pub struct ChildRequest {
    /// The child's agent id.
    pub child_id: String,
    /// This run's agent id.
    pub parent_id: String,
    /// The child's depth.
    pub depth: u32,
    /// The data directory (absolute).
    pub data_dir: PathBuf,
    /// The child's task.
    pub query: String,
    /// The variable holding its context, if any.
    pub context_key: Option<String>,
    /// Budget flags: what is left of this run's limits.
    pub budget_args: Vec<String>,
    /// Ends the child (and its descendants) when cancelled.
    pub cancel: Option<CancellationToken>,
}

/// How a child run went.
#[derive(Debug, Clone)]
pub struct ChildOutcome {
    /// Its pid (0 if it could not start).
    pub pid: u32,
    /// What it reported (or an error object built here).
    pub report: ChildReport,
    /// How its process ended.
    pub termination: Termination,
    /// Wall time.
    pub duration: Duration,
}

/// Runs one child `rlm-orchestrate run` to completion under supervision and reads
/// the result it wrote. Never fails: problems end up in the report's error object.
pub async fn run_child(
    launcher: &SubRlmLauncher,
    store: Arc<Store>,
    request: ChildRequest,
) -> ChildOutcome {
    let key = result_key(&request.child_id);
    let mut args: Vec<OsString> = launcher.args.iter().map(OsString::from).collect();
    if let Some(context) = &request.context_key {
        args.push("--context-var".into());
        args.push(context.into());
    }
    args.extend(request.budget_args.iter().map(OsString::from));
    args.push("--".into());
    args.push(request.query.clone().into());
    let spawn = SpawnOptions {
        program: launcher.program.clone().into_os_string(),
        args,
        env: child_environment(launcher, &request, &key),
        cwd: None,
        parent_death_signal: true,
    };
    let options = SuperviseOptions {
        timeout: Some(launcher.timeout),
        cancel: request.cancel.clone(),
        stdout_cap: 64 * 1024,
        ..SuperviseOptions::default()
    };
    let supervised = match run_supervised(spawn, options).await {
        Ok(supervised) => supervised,
        Err(e) => {
            let report = ChildReport::failed(
                json!({ "error": format!("the sub-run could not start: {e}") }),
                request.depth,
            );
            return ChildOutcome {
                pid: 0,
                report,
                termination: Termination::Exited(126),
                duration: Duration::ZERO,
            };
        }
    };
    let stored = tokio::task::spawn_blocking(move || store.get(&key).ok())
        .await
        .ok()
        .flatten();
    let report = match stored {
        Some(value) if value.get("result").is_some() || supervised.termination.success() => {
            ChildReport::from_value(&value, request.depth)
        }
        // Killed before it could say anything (timeout, cancel, crash).
        _ => ChildReport::failed(
            json!({
                "error": format!("the sub-run {}", supervised.termination),
                "timed_out": supervised.termination == Termination::TimedOut,
                "stderr_tail": supervised.stderr_tail,
            }),
            request.depth,
        ),
    };
    ChildOutcome {
        pid: supervised.pid,
        report,
        termination: supervised.termination,
        duration: supervised.duration,
    }
}

/// A child's environment: the inherited basics, its lineage, and the variables the
/// launcher passes (the sub-model's key). Nothing else.
fn child_environment(
    launcher: &SubRlmLauncher,
    request: &ChildRequest,
    key: &str,
) -> Vec<(OsString, OsString)> {
    let mut env = inherited_environment();
    env.extend(
        launcher
            .pass_env
            .iter()
            .filter_map(|name| std::env::var_os(name).map(|value| (OsString::from(name), value))),
    );
    for (name, value) in [
        (env_vars::DATA_DIR, request.data_dir.display().to_string()),
        (env_vars::AGENT_ID, request.child_id.clone()),
        (env_vars::PARENT_ID, request.parent_id.clone()),
        (env_vars::DEPTH, request.depth.to_string()),
        (env_vars::RESULT_KEY, key.to_owned()),
    ] {
        env.push((name.into(), value.into()));
    }
    env
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
    /// Model calls it and its descendants made.
    pub llm_calls: u64,
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
            llm_calls: value.get("llm_calls").and_then(Value::as_u64).unwrap_or(0),
        }
    }

    /// A report for a child that wrote no result.
    pub fn failed(error: Value, child_depth: u32) -> Self {
        Self {
            answer: Err(error),
            run_id: None,
            usage: Usage::default(),
            cost_usd: None,
            sub_agents: 0,
            depth_reached: child_depth,
            llm_calls: 0,
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

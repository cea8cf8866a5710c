//! Nested RLMs as child processes (`sub_rlm`).
//!
//! A child is `rlm-orchestrate run --child-spec <file>`: the parent writes a
//! [`ChildSpec`] — the child's [`RunSettings`] (the parent's, on its sub-model, with
//! what is left of its budgets), its task and the variable holding its context — to
//! `agents/<id>/run.json` in the data directory, so neither a setting nor the task is
//! ever on a command line. The child learns its place in the tree from the lineage
//! variables ([`super::EnvVars`]), runs its own loop, and writes a [`SubResult`] to
//! `sub-result-<id>`; the parent reads it back after the child exits, and the usage
//! and depth reported there roll up into the parent's totals.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rlm_context_store::private_fs::write_private;
use rlm_context_store::{SetOptions, Store, StoreError, GLOBAL_SCOPE};
use rlm_process::{
    inherited_environment, run_supervised, AllowList, CancellationToken, SpawnOptions,
    SuperviseOptions, Termination,
};
use serde::{Deserialize, Serialize};

use super::external::{path_with_own_dir, Abandonment};
use super::lineage::Lineage;
use super::AGENTS_DIR;
use crate::accounting::{ChildTotals, Limits};
use crate::settings::RunSettings;
use rlm_protocol::{SubError, SubResult};

/// Name of the spec file of a nested run: `agents/<id>/run.json`.
pub const CHILD_SPEC_FILE: &str = "run.json";

/// The version of [`ChildSpec`] this build writes and reads.
pub const CHILD_SPEC_FORMAT_VERSION: u32 = 1;

/// The exit code reported for a child that could not be started, as a shell does.
const NOT_STARTABLE: i32 = 126;

/// Bytes of a child's stdout kept (it prints nothing but errors with `-q`).
const CHILD_STDOUT_CAP_BYTES: usize = 64 * 1024;

/// What a parent hands a nested run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildSpec {
    /// [`CHILD_SPEC_FORMAT_VERSION`].
    #[serde(rename = "formatVersion")]
    pub format_version: u32,
    /// The child's settings.
    pub settings: RunSettings,
    /// The child's task.
    pub query: String,
    /// The variable holding its context, if any.
    pub context_var: Option<String>,
}

/// A spec file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ChildSpecError {
    /// The file could not be read or written.
    #[error("failed to {action} the nested run's spec {}: {source}", path.display())]
    Io {
        /// `read` or `write`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The file is not a spec this build understands.
    #[error("failed to parse the nested run's spec {}: {source}; it must be written by the same version of rlm-orchestrate", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

impl ChildSpec {
    /// Writes the spec to `path` (its directory created `0700`, the file `0600`).
    pub fn write(&self, path: &Path) -> Result<(), ChildSpecError> {
        let io_error = |source| ChildSpecError::Io {
            action: "write",
            path: path.to_owned(),
            source,
        };
        let text = serde_json::to_vec_pretty(self).map_err(|e| io_error(io::Error::other(e)))?;
        write_private(path, &text).map_err(|e| io_error(e.source))
    }

    /// Reads a spec written by [`ChildSpec::write`].
    pub fn read(path: &Path) -> Result<Self, ChildSpecError> {
        let text = fs::read_to_string(path).map_err(|source| ChildSpecError::Io {
            action: "read",
            path: path.to_owned(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| ChildSpecError::Parse {
            path: path.to_owned(),
            source,
        })
    }
}

/// What a finished child used, for the parent's totals (a failure reports nothing but
/// its depth).
pub fn child_totals(result: &SubResult, child_depth: u32) -> ChildTotals {
    match result {
        SubResult::Answer(answer) => ChildTotals {
            totals: answer.totals,
            depth_reached: answer.depth_reached.max(child_depth),
        },
        SubResult::Error(_) => ChildTotals {
            depth_reached: child_depth,
            ..ChildTotals::default()
        },
    }
}

/// Writes a run's result where its parent waits for it (`lineage.result_key`, scope
/// `agent:<parent id>`). Nothing to do for a run no parent waits for.
pub fn publish(result: &SubResult, store: &Store, lineage: &Lineage) -> Result<(), StoreError> {
    let Some(key) = &lineage.result_key else {
        return Ok(());
    };
    let scope = match &lineage.parent_id {
        Some(parent) => parent.scope(),
        None => GLOBAL_SCOPE.to_owned(),
    };
    let value = serde_json::to_value(result).map_err(|source| StoreError::Json {
        action: "serialise",
        key: key.clone(),
        source,
    })?;
    store.set(key, value, SetOptions::default().scope(scope))?;
    Ok(())
}

/// How `sub_rlm` starts child runs: the program, and the settings children derive
/// theirs from.
#[derive(Debug, Clone)]
pub struct SubRlmLauncher {
    /// The `rlm-orchestrate` executable.
    pub program: PathBuf,
    /// The parent's settings ([`RunSettings::for_child`] makes each child's).
    pub settings: RunSettings,
    /// Environment variables the children need and the user configured (the
    /// sub-model's API key variable).
    pub pass_env: Vec<String>,
    /// `--agent-timeout`.
    pub timeout: Duration,
}

/// One child run to start.
#[derive(Debug, Clone)]
pub struct ChildRequest {
    /// The child's lineage (its id, its parent's, its depth, its result key).
    pub lineage: Lineage,
    /// The child's task.
    pub query: String,
    /// The variable holding its context, if any.
    pub context_var: Option<String>,
    /// Its budgets: what is left of the parent's.
    pub limits: Limits,
    /// The tree's shared budget, which it reserves and settles its calls in.
    pub budget_ledger: Option<std::path::PathBuf>,
    /// Ends the child (and its descendants) when cancelled.
    pub cancel: Option<CancellationToken>,
    /// Set when the code that waited for the child ended first (its cell timed out):
    /// the child stopped through `cancel` then reports a timeout of the cell.
    pub abandoned: Option<Abandonment>,
}

/// How a child run went.
#[derive(Debug, Clone)]
pub struct ChildOutcome {
    /// Its pid (0 if it could not start).
    pub pid: u32,
    /// What it reported, or the failure observed here.
    pub result: SubResult,
    /// How its process ended.
    pub termination: Termination,
    /// Wall time.
    pub duration: Duration,
}

/// Runs one child `rlm-orchestrate run` to completion under supervision and reads
/// the result it wrote. Never fails: problems end up in a [`SubResult::Error`], which
/// is then its `sub-result-<id>` too (a child stopped by a timeout, its cell's or its
/// own, or cancelled, wrote none that says so).
pub async fn run_child(
    launcher: &SubRlmLauncher,
    store: Arc<Store>,
    request: ChildRequest,
) -> ChildOutcome {
    let not_started = |error: String| ChildOutcome {
        pid: 0,
        result: SubResult::Error(SubError::not_started(
            format!("the sub-run could not start: {error}"),
            NOT_STARTABLE,
        )),
        termination: Termination::Exited(NOT_STARTABLE),
        duration: Duration::ZERO,
    };
    let Some(key) = request.lineage.result_key.clone() else {
        return not_started("the child has no result key".to_owned());
    };
    let data_dir = store.data_dir().to_owned();
    let spec_path = data_dir
        .join(AGENTS_DIR)
        .join(request.lineage.agent_id.as_str())
        .join(CHILD_SPEC_FILE);
    let spec = ChildSpec {
        format_version: CHILD_SPEC_FORMAT_VERSION,
        settings: RunSettings {
            budget_ledger: request.budget_ledger.clone(),
            ..launcher.settings.for_child(request.limits)
        },
        query: request.query.clone(),
        context_var: request.context_var.clone(),
    };
    let written = {
        let path = spec_path.clone();
        tokio::task::spawn_blocking(move || spec.write(&path)).await
    };
    match written {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return not_started(error.to_string()),
        Err(error) => return not_started(format!("writing its spec failed: {error}")),
    }
    let args: Vec<OsString> = vec![
        "-q".into(),
        "run".into(),
        "--child-spec".into(),
        spec_path.into_os_string(),
    ];
    let mut spawn = SpawnOptions {
        program: launcher.program.clone().into_os_string(),
        args,
        env: child_environment(launcher, &request.lineage, &data_dir),
        cwd: None,
        parent_death_signal: true,
    };
    let runner = &launcher.settings.runner;
    runner.wrap(&mut spawn, &request.lineage.agent_id);
    let options = SuperviseOptions {
        timeout: Some(launcher.timeout),
        cancel: request.cancel.clone(),
        stdout_cap: CHILD_STDOUT_CAP_BYTES,
        ..SuperviseOptions::default()
    };
    let job = runner.guard(&request.lineage.agent_id);
    let supervised = match run_supervised(spawn, options).await {
        Ok(supervised) => supervised,
        Err(e) => {
            job.finished(); // it never started
            return not_started(format!("{e}: {}", e.source));
        }
    };
    if !matches!(
        supervised.termination,
        Termination::TimedOut | Termination::Cancelled
    ) {
        job.finished();
    }
    // What the child printed reaches the model and the trace scrubbed, like an agent's.
    let stderr_tail = rlm_process::redact_secrets(&supervised.stderr_tail).into_owned();
    let scheduler_failure = runner.failure(&stderr_tail);
    let (reader, read_key) = (Arc::clone(&store), key.clone());
    let stored = tokio::task::spawn_blocking(move || reader.get(&read_key).ok())
        .await
        .ok()
        .flatten()
        .and_then(|value| serde_json::from_value::<SubResult>((*value).clone()).ok());
    // A failure the child reported stands when it exited normally; killed before it
    // could say anything (timeout, cancel, crash), or having written something that is
    // not a result, it failed the way its process ended.
    let observed = || {
        let error = match &scheduler_failure {
            Some(failure) => format!(
                "{failure} (the sub-run {}); the scheduler, not the sub-run, ended it",
                supervised.termination
            ),
            None => format!("the sub-run {}", supervised.termination),
        };
        let mut failure = SubError {
            error,
            stderr_tail: stderr_tail.clone(),
            slurm: scheduler_failure.clone(),
            ..SubError::default()
        };
        match supervised.termination {
            Termination::TimedOut => {
                failure.timed_out = true;
                failure.timeout_secs = Some(launcher.timeout.as_secs_f64());
                failure.error.push_str(&format!(
                    " after {} s and was stopped; give it a smaller task or raise --agent-timeout",
                    launcher.timeout.as_secs_f64()
                ));
            }
            Termination::Cancelled => match request.abandoned.as_ref() {
                Some(abandoned) if abandoned.token.is_cancelled() => {
                    super::outcome::stopped_with_its_cell(
                        &mut failure,
                        "sub-run",
                        abandoned.cell_timeout,
                        launcher.timeout,
                        supervised.duration,
                    );
                }
                _ => failure.cancelled = true,
            },
            _ => {}
        }
        SubResult::Error(failure)
    };
    let result = match stored {
        Some(result @ SubResult::Answer(_)) => result,
        Some(result @ SubResult::Error(_)) if supervised.termination.success() => result,
        Some(SubResult::Error(_)) | None => {
            // What the model is told is what `sub-result-<id>` holds.
            let result = observed();
            let (written, lineage) = (result.clone(), request.lineage.clone());
            let published =
                tokio::task::spawn_blocking(move || publish(&written, &store, &lineage)).await;
            if !matches!(published, Ok(Ok(()))) {
                tracing::warn!(key, "could not store a sub-run's result");
            }
            result
        }
    };
    ChildOutcome {
        pid: supervised.pid,
        result,
        termination: supervised.termination,
        duration: supervised.duration,
    }
}

/// A child's environment: the inherited basics (with this binary's directory on
/// `PATH`), its lineage, and the variables the launcher passes (the sub-model's key).
/// Nothing else.
fn child_environment(
    launcher: &SubRlmLauncher,
    lineage: &Lineage,
    data_dir: &Path,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> =
        inherited_environment(&AllowList::BASE, &launcher.pass_env)
            .into_iter()
            .map(|(name, value)| {
                let value = if name == "PATH" {
                    path_with_own_dir(value)
                } else {
                    value
                };
                (name, value)
            })
            .collect();
    env.extend(lineage.env_vars(data_dir));
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::AgentId;
    use crate::provider::{ProviderConfig, ProviderKind};
    use serde_json::json;

    #[test]
    fn results_read_back_in_both_shapes() {
        let answered: SubResult = serde_json::from_value(json!({
            "status": "answer",
            "result": "42", "forced": false, "run_id": "r", "iterations": 2,
            "usage": {"prompt_tokens": 3, "completion_tokens": 4},
            "cost_usd": 0.5, "sub_agents": 2, "depth_reached": 2, "llm_calls": 3
        }))
        .unwrap();
        let totals = child_totals(&answered, 1);
        assert_eq!(totals.totals.usage.total(), 7);
        assert_eq!(totals.depth_reached, 2);
        assert_eq!(totals.totals.sub_agents, 2);
        let failed: SubResult =
            serde_json::from_value(json!({"status": "error", "error": "boom"})).unwrap();
        assert!(matches!(&failed, SubResult::Error(f) if f.error == "boom"));
        assert_eq!(child_totals(&failed, 1).depth_reached, 1);
        assert_eq!(
            serde_json::to_value(&failed).unwrap(),
            json!({"status": "error", "error": "boom", "stderr_tail": ""})
        );
    }

    #[test]
    fn a_spec_round_trips_through_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agents").join("c1").join(CHILD_SPEC_FILE);
        let spec = ChildSpec {
            format_version: CHILD_SPEC_FORMAT_VERSION,
            settings: RunSettings::new(dir.path(), ProviderConfig::new(ProviderKind::OpenAi, "m")),
            query: "a task that never shows on a command line".into(),
            context_var: Some("sub-context-c1".into()),
        };
        spec.write(&path).unwrap();
        assert_eq!(ChildSpec::read(&path).unwrap(), spec);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        fs::write(&path, "{\"formatVersion\": 1}").unwrap();
        let error = ChildSpec::read(&path).unwrap_err().to_string();
        assert!(error.contains("missing field"), "{error}");
        let _ = AgentId::generate();
    }
}

//! `spawn_agent`: one external agent on a task of its own, so that a dropped call
//! (its cell timed out, the run was interrupted) still ends the agent and records its
//! result.

use std::sync::Arc;

use rlm_context_store::StoreError;
use serde_json::Value;

use rlm_protocol::host_call::{AgentJob, HostError};

use super::detached::{end_status, StopOnDrop};
use super::serve::{RunHost, AGENT_STDOUT_CAP_BYTES};
use crate::agents::{run_external_agent, Abandonment, AgentRef, ExternalAgentSpec};
use crate::cache::CallKey;
use crate::events::{AgentMode, CachedCall, EventData, SubAgentFinished, SubAgentSpawned};
use crate::ids::AgentId;
use crate::provider::Usage;

impl RunHost {
    /// `spawn_agent`: the external agent command on `job.task` with the variables
    /// `job.refs` passed by file path. Returns its answer, or the error object
    /// describing how it failed (also stored as its `sub-result-<id>`).
    pub(super) async fn spawn_agent(&self, job: &AgentJob) -> Result<Value, HostError> {
        let Some(program) = &self.settings.delegation.agent else {
            return Err(HostError::RespondToModel("no external agent is configured: start the run with --agent claude (or codex, llm) or --agent-cmd TEMPLATE".to_owned()));
        };
        let confined = self.settings.delegation.agent_sandbox.is_some();
        let command = program.command(confined);
        let keys = job.refs.clone();
        // Each reference, persisted for the agent, with its sha256 for the cache key
        // (no trip to a blocking thread for an agent given none).
        let described = if keys.is_empty() {
            Vec::new()
        } else {
            self.blocking(move |store| {
                keys.iter()
                    .map(|key| {
                        let agent_ref = AgentRef::from_store(store, key)?;
                        let sha = crate::cache::variable_digest(store, key)?;
                        Ok((agent_ref, sha))
                    })
                    .collect::<Result<Vec<_>, StoreError>>()
            })
            .await?
        };
        let mut parts: Vec<&str> = vec![command.template(), &job.task];
        parts.extend(described.iter().map(|(_, sha)| sha.as_str()));
        let cache_key = CallKey::new(CachedCall::SpawnAgent, &parts);
        if let Some(answer) = self.cache.get(&cache_key).await {
            self.cache_hit(CachedCall::SpawnAgent, &cache_key);
            return Ok(answer);
        }
        if let Some(reason) = self.accounting.exhausted() {
            return Err(HostError::RespondToModel(format!(
                "no agent started: {reason}; answer from what you have"
            )));
        }
        // Held for the agent's life; a nested run waiting here holds no other slot. A
        // call dropped while it waits here started nothing.
        let slot = match &self.settings.delegation.agent_slots {
            Some(slots) => Some(slots.acquire().await.map_err(|error| {
                HostError::RespondToModel(format!(
                    "no agent started: --max-agents could not take a slot: {error}"
                ))
            })?),
            None => None,
        };
        let lineage = self.settings.lineage.child(AgentId::generate());
        let agent_id = lineage.agent_id.clone();
        self.accounting.record_sub_agent();
        self.sink.emit(EventData::SubAgentSpawned(SubAgentSpawned {
            child_agent_id: agent_id.clone(),
            mode: AgentMode::SpawnAgent,
            pid: None,
            task: job.task.clone(),
        }));
        let stop = StopOnDrop::for_run(&self.settings.cancel);
        let spec = ExternalAgentSpec {
            lineage,
            data_dir: self.store.data_dir().to_owned(),
            task: job.task.clone(),
            refs: described
                .into_iter()
                .map(|(agent_ref, _)| agent_ref)
                .collect(),
            timeout: self.settings.delegation.agent_timeout,
            stdout_cap: AGENT_STDOUT_CAP_BYTES,
            pass_env: program.pass_env.clone(),
            set_env: program
                .set_env(confined)
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect(),
            rlm_bin: self.settings.delegation.rlm_bin.clone(),
            confined_read: program.preset.confined_read.clone(),
            sandbox: self.settings.delegation.agent_sandbox.clone(),
            runner: self.settings.delegation.runner.clone(),
            cancel: Some(stop.agent.clone()),
            abandoned: Some(Abandonment {
                token: stop.abandoned.clone(),
                cell_timeout: self.settings.delegation.cell_timeout,
            }),
        };
        // On a task of its own: if this call is dropped (its cell timed out, the REPL
        // went away), `stop` ends the agent and the task still records its result
        // and its end.
        let command = command.clone();
        let store = Arc::clone(&self.store);
        let sink = self.sink.clone();
        let abandoned = stop.abandoned.clone();
        let agent = self.agents.spawn(async move {
            let _slot = slot;
            let outcome = run_external_agent(&command, spec, store).await;
            sink.emit(EventData::SubAgentFinished(SubAgentFinished {
                child_agent_id: agent_id,
                status: end_status(&outcome.termination, &abandoned),
                duration_ms: outcome.duration.as_millis() as u64,
                usage: Usage::default(),
            }));
            outcome
        });
        let outcome = agent.await.map_err(|error| {
            HostError::Fatal(format!("supervising an external agent failed: {error}"))
        })?;
        stop.disarm();
        if outcome.ok {
            self.cache
                .put(&cache_key, CachedCall::SpawnAgent, &outcome.value)
                .await;
        }
        Ok(outcome.value)
    }
}

//! The settings of one run's host: how the run delegates (fixed by the configuration,
//! shared by every run of a session) and what is the run's own (its place in the tree,
//! its cancellation). The host serves the model's calls by their own arguments: it is
//! not given the run's task, so nothing it does can depend on the task's words.

use std::time::Duration;

use rlm_process::CancellationToken;

use crate::agents::{AgentProgram, AgentSandbox, Lineage, SubRlmLauncher};

/// How a run delegates work: what its sub-calls, nested runs and external agents may
/// do. Fixed by the configuration; every run of a session shares it.
#[derive(Debug, Clone)]
pub struct Delegation {
    /// `--max-parallel`.
    pub max_parallel: usize,
    /// `--sub-context-chars`: the longest prompt a sub-call may send.
    pub sub_context_chars: usize,
    /// `--max-depth`.
    pub max_depth: u32,
    /// Answer identical sub-calls from the store (`--no-cache` turns it off).
    pub cache: bool,
    /// How `sub_rlm` starts child runs; `None` makes it a plain sub-model call.
    pub sub_rlm: Option<SubRlmLauncher>,
    /// The external agent `spawn_agent` runs (`--agent` or `--agent-cmd`), with the
    /// variables it may see.
    pub agent: Option<AgentProgram>,
    /// The `rlm-orchestrate` executable agents are told to use (`RLM_BIN`).
    pub rlm_bin: Option<std::path::PathBuf>,
    /// `--agent-timeout`.
    pub agent_timeout: Duration,
    /// `--exec-timeout`: a code cell's limit, which also bounds the agents it waits
    /// on (an agent still running when its cell times out is stopped, and its result
    /// says so).
    pub cell_timeout: Duration,
    /// `--agent-sandbox on`: how external agents are confined.
    pub agent_sandbox: Option<AgentSandbox>,
    /// `--max-agents`: external agents running at once across the tree.
    pub agent_slots: Option<crate::slots::Slots>,
    /// `--runner`: how external agents start.
    pub runner: crate::runner::Runner,
}

/// The settings of one run's host: how it delegates, where the run stands in the
/// tree, and what ends its sub-agents.
#[derive(Debug, Clone)]
pub struct HostSettings {
    /// How the run delegates (from the configuration).
    pub delegation: Delegation,
    /// This run's place in the tree (its agent id is the parent id of its sub-agents).
    pub lineage: Lineage,
    /// Ends every sub-agent of the run (Ctrl-C, SIGTERM).
    pub cancel: CancellationToken,
}

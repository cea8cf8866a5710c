//! One whole run: open the store, load the context, start the environment, run the
//! loop, and leave a trace (`events.jsonl`, `summary.json`) whatever happens.
//!
//! A run is a [`Session`] of one query; this module holds what both share: the
//! configuration, the report and the errors.
//!
//! Bad input is detected while loading the context, before any model is asked and
//! before any stored variable is touched; it comes back as [`RunError::BadInput`].

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rlm_context_store::StoreError;
use serde::Serialize;

use crate::accounting::Limits;
use crate::agents::AgentCommand;
use crate::context::{ContextError, ContextSpec};
use crate::env::{EnvConfig, EnvError, Environment, HistoryEntry, Host};
use crate::events::{EventListener, TraceError};
use crate::host::Model;
use crate::provider::Usage;
use crate::rlm::{LoopError, LoopSettings};
use crate::session::Session;
use crate::subrlm::SubRlmLauncher;
use rlm_process::CancellationToken;

/// Starts an environment for a run, given its configuration and host.
pub type EnvFactory = Box<
    dyn FnOnce(
            EnvConfig,
            Arc<dyn Host>,
        )
            -> Pin<Box<dyn Future<Output = Result<Box<dyn Environment>, EnvError>> + Send>>
        + Send,
>;

/// Everything a run needs besides the models and the environment.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The task ([`Session::start`] ignores it: a session is given each query).
    pub query: String,
    /// Where the context comes from.
    pub context: ContextSpec,
    /// The data directory.
    pub data_dir: PathBuf,
    /// Store memory ceiling.
    pub memory_ceiling_bytes: u64,
    /// Loop settings (depth, iterations, output shaping, schema).
    pub loop_settings: LoopSettings,
    /// Host settings (parallelism, sub-call limits).
    pub max_parallel: usize,
    /// `--sub-context-chars`.
    pub sub_context_chars: usize,
    /// Budgets.
    pub limits: Limits,
    /// `--exec-timeout`.
    pub exec_timeout: Duration,
    /// Agent id of this process (from `RLM_AGENT_ID`, else new).
    pub agent_id: String,
    /// Parent agent id (from `RLM_PARENT_ID`).
    pub parent_id: Option<String>,
    /// Memoise sub-calls in the store (`--no-cache` turns it off).
    pub cache: bool,
    /// How `sub_rlm` starts child runs; `None` makes it a plain sub-model call.
    pub sub_rlm: Option<SubRlmLauncher>,
    /// `--agent-cmd`, parsed.
    pub agent_command: Option<AgentCommand>,
    /// `--agent-env`.
    pub agent_env: Vec<String>,
    /// `--agent-timeout`.
    pub agent_timeout: Duration,
    /// Cancelled on Ctrl-C / SIGTERM: the run stops and every sub-agent is ended (in a
    /// session: the running query and every later one).
    pub cancel: CancellationToken,
    /// Earlier queries (persistent sessions): what `history` starts with.
    pub history: Vec<HistoryEntry>,
}

/// What a finished run reports (`--json` prints it).
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The answer.
    pub answer: String,
    /// The run id.
    pub run_id: String,
    /// True when the answer was forced.
    pub forced: bool,
    /// Iterations used.
    pub iterations: u32,
    /// Deepest depth reached by this run and its descendants.
    pub depth_reached: u32,
    /// Sub-agents started.
    pub sub_agents: u64,
    /// Tokens used by the run and its descendants.
    pub usage: Usage,
    /// Model calls made by the run and its descendants.
    pub llm_calls: u64,
    /// Cost, when prices are configured.
    pub cost_usd: Option<f64>,
    /// The SUBMIT payload, when the answer came from SUBMIT.
    #[serde(skip_serializing_if = "Option::is_none")]
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

/// Runs one query to its answer: a [`Session`] of one query, closed afterwards.
pub async fn run(
    config: RunConfig,
    root: Model,
    sub: Model,
    env_factory: EnvFactory,
    listeners: Vec<EventListener>,
) -> Result<RunReport, RunError> {
    let query = config.query.clone();
    let mut session = Session::start(config, root, sub, env_factory, listeners).await?;
    let outcome = session.query(&query, None).await;
    session.close().await;
    outcome
}

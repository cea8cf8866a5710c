//! [`RunConfig`]: everything a run (or a session of runs) works with, assembled — the
//! models, the environment's factory, the loop's settings ([`LoopSettings`]) and the
//! host's ([`Delegation`]) each as one part that layer takes whole, the lineage and the
//! cancellation token. [`crate::launch`] builds one from [`RunSettings`](crate::settings::RunSettings).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rlm_process::CancellationToken;

use crate::accounting::Limits;
use crate::agents::Lineage;
use crate::context::ContextSpec;
use crate::env::{EnvironmentFactory, HistoryEntry};
use crate::host::{Delegation, Model};
use crate::rlm::LoopSettings;

/// Everything a run needs.
#[derive(Clone)]
pub struct RunConfig {
    /// The root model.
    pub root: Model,
    /// The model of sub-calls.
    pub sub: Model,
    /// Starts the environment the model's code runs in.
    pub env: Arc<dyn EnvironmentFactory>,
    /// Where the context comes from.
    pub context: ContextSpec,
    /// The data directory.
    pub data_dir: PathBuf,
    /// Store memory ceiling.
    pub memory_ceiling_bytes: u64,
    /// Loop settings (iterations, output shaping, schema, depth).
    pub loop_settings: LoopSettings,
    /// How its runs delegate: sub-calls, nested runs, external agents (the host's part).
    pub delegation: Delegation,
    /// Budgets.
    pub limits: Limits,
    /// `--exec-timeout`.
    pub exec_timeout: Duration,
    /// Where this process stands in the tree, when a parent started it (`RLM_*`
    /// variables); `None` for a root run, whose agent id is `root-<session id>`.
    pub lineage: Option<Lineage>,
    /// A nested run's tree budget (see [`crate::accounting::TreeBudget`]); a root run
    /// with a call, token or cost limit creates its own.
    pub budget_ledger: Option<PathBuf>,
    /// Cancelled on Ctrl-C / SIGTERM: the run stops and every sub-agent is ended (in a
    /// session: the running query and every later one).
    pub cancel: CancellationToken,
    /// Earlier queries (persistent sessions): what `history` starts with.
    pub history: Vec<HistoryEntry>,
}

impl std::fmt::Debug for RunConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunConfig")
            .field("root", &self.root)
            .field("sub", &self.sub)
            .field("env", &self.env.kind())
            .field("data_dir", &self.data_dir)
            .field("lineage", &self.lineage)
            .finish_non_exhaustive()
    }
}

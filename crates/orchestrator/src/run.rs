//! One whole run: open the store, load the context, start the environment, run the
//! loop, and leave a trace (`events.jsonl`, `summary.json`) whatever happens.
//!
//! Bad input is detected while loading the context, before any model is asked and
//! before any stored variable is touched; it comes back as [`RunError::BadInput`].

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rlm_context_store::{Store, StoreError, StoreOptions};
use serde::Serialize;
use serde_json::json;

use crate::accounting::{Accounting, Limits};
use crate::agents::AgentCommand;
use crate::context::{load_context, ContextError, ContextKeys, ContextSpec};
use crate::env::{EnvConfig, EnvError, Environment, HistoryEntry, Host};
use crate::events::{new_run_id, EventData, EventListener, EventSink, RunIdentity, TraceError};
use crate::host::{HostSettings, Model, RunHost};
use crate::provider::Usage;
use crate::rlm::{run_loop, LoopError, LoopParts, LoopSettings};
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
    /// The task.
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
    /// Cancelled on Ctrl-C / SIGTERM: the run stops and every sub-agent is ended.
    pub cancel: CancellationToken,
    /// Earlier queries (persistent sessions).
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

/// Runs one query to its answer.
pub async fn run(
    config: RunConfig,
    root: Model,
    sub: Model,
    env_factory: EnvFactory,
    listeners: Vec<EventListener>,
) -> Result<RunReport, RunError> {
    let started = Instant::now();
    let store_options = StoreOptions {
        memory_ceiling_bytes: config.memory_ceiling_bytes,
        ..StoreOptions::default()
    };
    let data_dir = config.data_dir.clone();
    let store = Arc::new(blocking(move || Store::open_with(data_dir, store_options)).await??);

    let run_id = new_run_id();
    let (context, context_info) = if config.context.is_empty() {
        (None, None)
    } else {
        let store = Arc::clone(&store);
        let spec = config.context.clone();
        let keys = ContextKeys {
            prefix: format!("run-{run_id}-context"),
            scope: format!("session:{run_id}"),
        };
        let loaded = blocking(move || load_context(&store, &spec, &keys)).await??;
        (Some(loaded.source), Some(loaded.info))
    };

    let depth = config.loop_settings.depth;
    let identity = RunIdentity {
        run_id: run_id.clone(),
        depth,
        agent_id: config.agent_id.clone(),
        parent_id: config.parent_id.clone(),
    };
    let sink = EventSink::create(store.data_dir(), identity, listeners)?;
    sink.emit(EventData::RunStarted {
        task: config.query.clone(),
        model: root.provider.model().to_owned(),
        env: "python".into(),
        context: context_info
            .as_ref()
            .and_then(|i| serde_json::to_value(i).ok()),
        pid: std::process::id(),
    });

    let accounting = Arc::new(Accounting::new(config.limits));
    let host = Arc::new(RunHost::new(
        Arc::clone(&store),
        sub,
        sink.clone(),
        Arc::clone(&accounting),
        HostSettings {
            max_parallel: config.max_parallel,
            sub_context_chars: config.sub_context_chars,
            depth,
            max_depth: config.loop_settings.max_depth,
            scope: format!("agent:{}", config.agent_id),
            cache: config.cache,
            agent_id: config.agent_id.clone(),
            sub_rlm: config.sub_rlm.clone(),
            agent_command: config.agent_command.clone(),
            agent_env: config.agent_env.clone(),
            agent_timeout: config.agent_timeout,
            cancel: config.cancel.clone(),
        },
    ));
    let env_config = EnvConfig {
        data_dir: store.data_dir().to_owned(),
        context,
        query: config.query.clone(),
        history: config.history.clone(),
        exec_timeout: config.exec_timeout,
    };
    let mut env = match env_factory(env_config, host).await {
        Ok(env) => env,
        Err(e) => {
            finish(
                &sink,
                &accounting,
                "failed",
                None,
                0,
                started,
                Some(&e.to_string()),
            );
            return Err(e.into());
        }
    };

    let parts = LoopParts {
        model: &root,
        env: env.as_mut(),
        sink: &sink,
        accounting: &accounting,
    };
    let run_loop = run_loop(
        &config.query,
        context_info.as_ref(),
        config.history.len(),
        parts,
        &config.loop_settings,
    );
    let result = tokio::select! {
        result = run_loop => Some(result),
        () = config.cancel.cancelled() => None,
    };
    env.shutdown().await;
    let Some(result) = result else {
        // Sub-agents watch the same token and are being ended by their supervisors.
        finish(
            &sink,
            &accounting,
            "cancelled",
            None,
            0,
            started,
            Some("the run was cancelled (Ctrl-C or SIGTERM)"),
        );
        return Err(RunError::Cancelled {
            run_dir: sink.dir().to_owned(),
        });
    };
    match result {
        Ok(outcome) => {
            let status = if outcome.forced { "forced" } else { "answered" };
            finish(
                &sink,
                &accounting,
                status,
                Some(&outcome.answer),
                outcome.iterations,
                started,
                None,
            );
            let totals = accounting.totals();
            Ok(RunReport {
                answer: outcome.answer,
                run_id,
                forced: outcome.forced,
                iterations: outcome.iterations,
                depth_reached: depth.max(totals.depth_reached),
                sub_agents: totals.sub_agents,
                llm_calls: totals.llm_calls,
                usage: totals.usage,
                cost_usd: totals.cost_known.then_some(totals.cost_usd),
                submitted: outcome.submitted,
                run_dir: sink.dir().to_owned(),
            })
        }
        Err(source) => {
            finish(
                &sink,
                &accounting,
                "failed",
                None,
                0,
                started,
                Some(&source.to_string()),
            );
            Err(RunError::Loop {
                source,
                run_dir: sink.dir().to_owned(),
            })
        }
    }
}

/// Emits `run_finished` and writes `summary.json`.
fn finish(
    sink: &EventSink,
    accounting: &Accounting,
    status: &str,
    answer: Option<&str>,
    iterations: u32,
    started: Instant,
    error: Option<&str>,
) {
    if let Some(message) = error {
        sink.emit(EventData::Error {
            message: message.to_owned(),
        });
    }
    let totals = accounting.totals();
    let cost = totals.cost_known.then_some(totals.cost_usd);
    let duration_ms = started.elapsed().as_millis() as u64;
    sink.emit(EventData::RunFinished {
        status: status.to_owned(),
        answer: answer.map(str::to_owned),
        iterations,
        usage: totals.usage,
        cost_usd: cost,
        duration_ms,
    });
    let identity = sink.identity();
    let summary = json!({
        "run_id": identity.run_id,
        "agent_id": identity.agent_id,
        "parent_id": identity.parent_id,
        "depth": identity.depth,
        "status": status,
        "answer": answer,
        "error": error,
        "iterations": iterations,
        "llm_calls": totals.llm_calls,
        "sub_agents": totals.sub_agents,
        "usage": totals.usage,
        "cost_usd": cost,
        "duration_ms": duration_ms,
    });
    if let Err(e) = sink.write_summary(&summary) {
        tracing::warn!("{e}");
    }
}

/// Runs blocking store work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, RunError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        RunError::Env(EnvError::Broken {
            language: "store",
            message: format!("a store task panicked: {e}"),
        })
    })
}

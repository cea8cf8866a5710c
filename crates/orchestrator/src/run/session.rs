//! A persistent session: several queries over one store and one REPL.
//!
//! Each query is a run of its own — its own run id, trace (`runs/<run-id>/`),
//! accounting, budgets and cancellation — but the environment persists between them:
//! variables the model defined stay, `history` grows by one `{query, answer}` per
//! answered query, and a query may bring a new context that is loaded into its own
//! slot (`contexts[i]`, `context_<i>`; `context` is the latest). `rlm-orchestrate
//! repl` is built on it; a single `rlm-orchestrate run` is a one-query session
//! ([`super::run`]).
//!
//! The environment starts with the first query, once that run's trace exists, so a
//! REPL that cannot start is recorded in the trace like any other failure. Bad input
//! (a context that cannot be loaded) is found before a run starts: nothing is asked
//! and no run directory is made.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use rlm_context_store::{Store, StoreOptions};
use rlm_process::CancellationToken;
use serde::Serialize;

use super::{RunConfig, RunError, RunReport};
use crate::accounting::{Accounting, Totals, TreeBudget};
use crate::agents::Lineage;
use crate::context::{load_context, ContextInfo, ContextKeys, ContextSpec, LoadedContext};
use crate::env::{ContextSource, EnvConfig, EnvError, HistoryEntry, ReplVariable, Started};
use crate::events::{
    EventData, EventListener, EventSink, RunFinished, RunIdentity, RunStarted, RunStatus,
    RunSummaryFile, SUMMARY_FORMAT_VERSION,
};
use crate::host::{Host, HostCall, HostError, HostReply, HostSettings, RunHost};
use crate::ids::{AgentId, RunId};
use crate::prompt::SessionState;
use crate::rlm::{run_loop, HistoryArchive, LoopError, LoopOutcome, LoopParts};
use rlm_protocol::RunTotals;

/// What a session remembers of one of its runs (`:runs` in the REPL).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunRecord {
    /// The run id (its trace is `runs/<run-id>/`).
    pub run_id: RunId,
    /// How it ended, as in `summary.json`.
    pub status: RunStatus,
    /// The query.
    pub task: String,
}

/// Cancels the query a [`Session`] is running, from another task (Ctrl-C): its loop
/// stops, its sub-agents are ended, and the session and its REPL stay usable.
#[derive(Debug, Clone, Default)]
pub struct QueryCanceller {
    current: Arc<Mutex<Option<CancellationToken>>>,
}

impl QueryCanceller {
    /// Cancels the running query; `false` when no query is running.
    pub fn cancel(&self) -> bool {
        match self.lock().as_ref() {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// True while a query runs.
    pub fn is_running(&self) -> bool {
        self.lock().is_some()
    }

    fn set(&self, token: Option<CancellationToken>) {
        *self.lock() = token;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<CancellationToken>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The host the environment is given: it serves each call with the host of the query
/// that is running, so sub-calls are accounted and traced in that query's run.
#[derive(Default)]
struct SessionHost {
    current: Mutex<Option<Arc<RunHost>>>,
}

impl SessionHost {
    fn set(&self, host: Option<Arc<RunHost>>) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = host;
    }
}

#[async_trait::async_trait]
impl Host for SessionHost {
    async fn call(&self, call: HostCall) -> Result<HostReply, HostError> {
        let host = self
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match host {
            Some(host) => host.call(call).await,
            None => Err(HostError::RespondToModel(format!(
                "{} is not available: no query is running in this session",
                call.method()
            ))),
        }
    }
}

/// How the loop of one query ended.
enum Ending {
    Done(LoopOutcome),
    Cancelled,
    Env(EnvError),
    Loop(LoopError),
}

/// Several queries over one store and one persistent environment (see the module docs).
pub struct Session {
    config: RunConfig,
    store: Arc<Store>,
    listeners: Vec<EventListener>,
    host: Arc<SessionHost>,
    env: Option<Started>,
    /// Why the environment could not start, once it failed to.
    start_failure: Option<String>,
    id: RunId,
    /// This process's place in the tree (a root's agent id is `root-<session id>`).
    lineage: Lineage,
    next_run_id: RunId,
    /// The context given at start, loaded into slot 0 when the environment starts.
    initial_context: Option<ContextSource>,
    /// What the model is told about each slot loaded so far.
    contexts: Vec<ContextInfo>,
    history: Vec<HistoryEntry>,
    runs: Vec<RunRecord>,
    totals: Totals,
    canceller: QueryCanceller,
}

impl Session {
    /// Opens the store and loads `config.context` (the first slot); the environment
    /// starts with the first query. `config.history` seeds `history`; `config.cancel`
    /// cancels the running query and every later one.
    pub async fn start(config: RunConfig, listeners: Vec<EventListener>) -> Result<Self, RunError> {
        // Each server is asked what it is while the store opens, the context loads and
        // the environment starts (or not at all: a record kept from an earlier run).
        config.root.window.start_discovery();
        config.sub.window.start_discovery();
        let store_options = StoreOptions {
            memory_ceiling_bytes: config.memory_ceiling_bytes,
            ..StoreOptions::default()
        };
        let data_dir = config.data_dir.clone();
        let store = Arc::new(blocking(move || Store::open_with(data_dir, store_options)).await??);
        // The session is known by its first run's id.
        let id = RunId::generate();
        let lineage = config
            .lineage
            .clone()
            .unwrap_or_else(|| Lineage::root(AgentId::root(&id)));
        let (initial_context, contexts) = if config.context.is_empty() {
            (None, Vec::new())
        } else {
            let keys = ContextKeys {
                prefix: format!("run-{id}-context"),
                scope: format!("session:{id}"),
            };
            let loaded = load(&store, config.context.clone(), keys, config.cancel.clone()).await?;
            (Some(loaded.source), vec![loaded.info])
        };
        Ok(Self {
            history: config.history.clone(),
            config,
            store,
            listeners,
            host: Arc::default(),
            env: None,
            start_failure: None,
            next_run_id: id.clone(),
            id,
            lineage,
            initial_context,
            contexts,
            runs: Vec::new(),
            totals: Totals::default(),
            canceller: QueryCanceller::default(),
        })
    }

    /// Runs one query to its answer, as a run of its own. `extra_context`, when given,
    /// is loaded into a new slot first (a bad one fails with [`RunError::BadInput`]
    /// before anything is asked). An answered query is appended to `history`.
    pub async fn query(
        &mut self,
        text: &str,
        extra_context: Option<ContextSpec>,
    ) -> Result<RunReport, RunError> {
        let started = Instant::now();
        let cancel = self.config.cancel.child_token();
        let new_context = match extra_context.filter(|spec| !spec.is_empty()) {
            None => None,
            Some(spec) => {
                let keys = ContextKeys {
                    prefix: format!("run-{}-slot-{}", self.next_run_id, self.contexts.len()),
                    scope: format!("session:{}", self.id),
                };
                // Cancelling the query stops its context load too.
                self.canceller.set(Some(cancel.clone()));
                let loaded = load(&self.store, spec, keys, cancel.clone()).await;
                self.canceller.set(None);
                Some(loaded?)
            }
        };
        let run_id = std::mem::replace(&mut self.next_run_id, RunId::generate());
        let (new_source, info) = match new_context {
            Some(loaded) => (Some(loaded.source), Some(loaded.info)),
            None => (None, self.contexts.last().cloned()),
        };
        let state = SessionState {
            history_len: self.history.len(),
            context_slots: self.contexts.len() + usize::from(new_source.is_some()),
        };

        let depth = self.lineage.depth;
        let identity = RunIdentity {
            run_id: run_id.clone(),
            depth,
            agent_id: self.lineage.agent_id.clone(),
            parent_id: self.lineage.parent_id.clone(),
        };
        let sink = EventSink::create(self.store.data_dir(), identity, self.listeners.clone())?;
        // The windows known now (configured, kept from an earlier run, or found
        // already); one whose server is still being asked follows as `window_found`.
        let context_window = self.config.root.window.known();
        let sub_context_window = self.config.sub.window.known();
        let said = super::found::Said {
            root: context_window.is_some(),
            sub: sub_context_window.is_some(),
        };
        sink.emit(EventData::RunStarted(RunStarted {
            task: text.to_owned(),
            model: self.config.root.provider.model().to_owned(),
            env: self.config.env.kind(),
            context: info.as_ref().and_then(|i| serde_json::to_value(i).ok()),
            pid: std::process::id(),
            context_window,
            sub_context_window,
        }));
        let found = super::found::report_windows(&self.config.root, &self.config.sub, said, &sink);
        let accounting = Arc::new(Accounting::with_tree(
            self.config.limits,
            self.tree_budget(&run_id),
            self.lineage.agent_id.as_str(),
        ));
        let run_host = Arc::new(RunHost::new(
            Arc::clone(&self.store),
            self.config.sub.clone(),
            sink.clone(),
            Arc::clone(&accounting),
            self.host_settings(cancel.clone()),
        ));
        self.host.set(Some(Arc::clone(&run_host)));
        self.canceller.set(Some(cancel.clone()));

        let ending = self
            .run_one(
                text,
                new_source,
                info.as_ref(),
                state,
                &sink,
                &accounting,
                &cancel,
            )
            .await;

        // Every agent that started ends with a result and an end in the trace before
        // the run records its own (a cell that timed out, or Ctrl-C, stopped them).
        if !run_host.agents_settled().await {
            tracing::warn!("some external agents had not ended when the run did");
        }
        drop(run_host);
        // A window still being asked for is waited for (briefly), unless the run was
        // cancelled: then it is not reported.
        if cancel.is_cancelled() {
            drop(found);
        } else {
            found.finish(super::found::REPORT_WAIT).await;
        }
        self.canceller.set(None);
        self.host.set(None);
        // A run that answered without a forced answer gives back the call it held.
        accounting.release_final();
        let totals = accounting.totals();
        self.add_totals(&totals);
        // A run that ends without an answer is recorded the same way whatever the cause.
        let finish_unanswered = |status: RunStatus, message: &str| {
            finish(&sink, &accounting, status, None, 0, started, Some(message));
        };
        let (status, result) = match ending {
            Ending::Done(outcome) => {
                let status = if outcome.forced {
                    RunStatus::Forced
                } else {
                    RunStatus::Answered
                };
                finish(
                    &sink,
                    &accounting,
                    status,
                    Some(&outcome.answer),
                    outcome.iterations,
                    started,
                    None,
                );
                self.remember(text, &outcome.answer).await;
                let report = RunReport {
                    answer: outcome.answer,
                    run_id: run_id.clone(),
                    forced: outcome.forced,
                    iterations: outcome.iterations,
                    depth_reached: depth.max(totals.depth_reached),
                    totals: totals.run_totals(),
                    submitted: outcome.submitted,
                    run_dir: sink.dir().to_owned(),
                };
                (status, Ok(report))
            }
            Ending::Cancelled => {
                // Sub-agents watch the same token and are being ended by their supervisors.
                finish_unanswered(
                    RunStatus::Cancelled,
                    "the run was cancelled (Ctrl-C or SIGTERM)",
                );
                let run_dir = sink.dir().to_owned();
                (RunStatus::Cancelled, Err(RunError::Cancelled { run_dir }))
            }
            Ending::Env(error) => {
                finish_unanswered(RunStatus::Failed, &error.to_string());
                (RunStatus::Failed, Err(error.into()))
            }
            Ending::Loop(source) => {
                finish_unanswered(RunStatus::Failed, &source.to_string());
                let run_dir = sink.dir().to_owned();
                (RunStatus::Failed, Err(RunError::Loop { source, run_dir }))
            }
        };
        self.runs.push(RunRecord {
            run_id,
            status,
            task: text.to_owned(),
        });
        result
    }

    /// Readies the environment for this query, then runs the loop until it ends or the
    /// query is cancelled.
    #[expect(
        clippy::too_many_arguments,
        reason = "the parts of one run, borrowed for its duration"
    )]
    async fn run_one(
        &mut self,
        text: &str,
        new_source: Option<ContextSource>,
        info: Option<&ContextInfo>,
        state: SessionState,
        sink: &EventSink,
        accounting: &Accounting,
        cancel: &CancellationToken,
    ) -> Ending {
        let new_info = new_source.is_some().then(|| info.cloned()).flatten();
        // Not raced with `cancel`: abandoning it half-way would leave the REPL and the
        // session disagreeing about the context slots. Its waits are bounded, and a
        // cancelled query stops right after.
        if let Err(error) = self.ready_env(text, new_source).await {
            return Ending::Env(error);
        }
        self.contexts.extend(new_info);
        if cancel.is_cancelled() {
            return Ending::Cancelled;
        }
        let Some(env) = self.env.as_mut() else {
            return Ending::Env(self.not_started());
        };
        for message in env.env_mut().take_notices() {
            sink.emit(EventData::Warning { message });
        }
        let archive = HistoryArchive {
            store: Arc::clone(&self.store),
            key: format!("run-{}-history", sink.identity().run_id),
            scope: self.lineage.agent_id.scope(),
        };
        let parts = LoopParts {
            model: &self.config.root,
            env: env.by_capability(),
            sink,
            accounting,
            archive: Some(archive),
        };
        // The system prompt names the largest piece a sub-call takes: the smaller of
        // --sub-context-chars and what the sub-model's window holds.
        let mut loop_settings = self.config.loop_settings.clone();
        let sub_window = &self.config.sub.window;
        let (chars_per_token, _) = sub_window.estimator.calibration();
        // Not waited for: while the server is being asked, the table's or the
        // default window (no larger than the default) sizes it.
        let window_chars = (sub_window.budget_for(0).await as f64 * chars_per_token * 0.9) as usize;
        loop_settings.sub_context_chars = loop_settings.sub_context_chars.min(window_chars);
        let looped = run_loop(text, info, state, parts, &loop_settings);
        let result = tokio::select! {
            result = looped => Some(result),
            () = cancel.cancelled() => None,
        };
        match result {
            Some(Ok(outcome)) => Ending::Done(outcome),
            Some(Err(error)) => Ending::Loop(error),
            None => {
                // Only this query was cancelled: interrupt code it left running so the
                // REPL is idle (and keeps its variables) for the next one. When the
                // whole session is cancelled it is about to be closed instead.
                if !self.config.cancel.is_cancelled() {
                    if let Err(error) = env.env_mut().recover().await {
                        tracing::warn!(%error, "the REPL did not recover from the cancelled query");
                    }
                }
                Ending::Cancelled
            }
        }
    }

    /// Starts the environment (first query) or tells it about the next query.
    async fn ready_env(
        &mut self,
        text: &str,
        new_source: Option<ContextSource>,
    ) -> Result<(), EnvError> {
        if let Some(env) = self.env.as_mut() {
            return env.env_mut().next_query(text, new_source).await;
        }
        if self.start_failure.is_some() {
            return Err(self.not_started());
        }
        let env_config = EnvConfig {
            data_dir: self.store.data_dir().to_owned(),
            context: self.initial_context.clone(),
            query: text.to_owned(),
            history: self.history.clone(),
            exec_timeout: self.config.exec_timeout,
            depth: self.config.loop_settings.depth,
            max_depth: self.config.loop_settings.max_depth,
            sub_context_chars: self.config.delegation.sub_context_chars,
            lazy_above: self.config.context.lazy.lazy_above(),
        };
        let host: Arc<dyn Host> = self.host.clone();
        let env = match self.config.env.start(env_config, host).await {
            Ok(env) => self.env.insert(env),
            Err(error) => {
                self.start_failure = Some(error.to_string());
                return Err(error);
            }
        };
        match new_source {
            Some(source) => env.env_mut().next_query(text, Some(source)).await,
            None => Ok(()),
        }
    }

    /// The budget this run shares with its tree: its parent's, or a new one when it is
    /// a root run with a call, token or cost limit (each query of a session is a root).
    fn tree_budget(&self, run_id: &RunId) -> Option<TreeBudget> {
        if let Some(path) = &self.config.budget_ledger {
            return Some(TreeBudget::open(path));
        }
        if !self.config.limits.has_budget() {
            return None;
        }
        match TreeBudget::create(self.store.data_dir(), run_id.as_str(), self.config.limits) {
            Ok(tree) => Some(tree),
            Err(error) => {
                tracing::warn!(%error, "could not create the tree budget; nested runs get what is left at their start");
                None
            }
        }
    }

    fn not_started(&self) -> EnvError {
        EnvError::Broken {
            env: self.config.env.kind(),
            message: format!(
                "it failed to start earlier in this session ({})",
                self.start_failure.as_deref().unwrap_or("unknown error")
            ),
        }
    }

    fn host_settings(&self, cancel: CancellationToken) -> HostSettings {
        let config = &self.config;
        HostSettings {
            delegation: config.delegation.clone(),
            lineage: self.lineage.clone(),
            cancel,
        }
    }

    /// Appends an answered query to `history`, here and in the REPL.
    async fn remember(&mut self, query: &str, answer: &str) {
        let entry = HistoryEntry {
            query: query.to_owned(),
            answer: answer.to_owned(),
        };
        if let Some(env) = self.env.as_mut() {
            if let Err(error) = env.env_mut().push_history(entry.clone()).await {
                tracing::warn!(%error, "could not add the answer to the REPL's history");
            }
        }
        self.history.push(entry);
    }

    fn add_totals(&mut self, run: &Totals) {
        let totals = &mut self.totals;
        totals.usage.add(run.usage);
        totals.llm_calls += run.llm_calls;
        totals.cost_usd += run.cost_usd;
        totals.cost_known |= run.cost_known;
        totals.sub_agents += run.sub_agents;
        totals.depth_reached = totals.depth_reached.max(run.depth_reached);
    }

    /// The session's id (its first run's id; contexts are stored in scope
    /// `session:<id>`).
    pub fn id(&self) -> &RunId {
        &self.id
    }

    /// This process's place in the tree: its agent id (`root-<session id>` for a root
    /// run) is the scope of the variables the model's code writes.
    pub fn lineage(&self) -> &Lineage {
        &self.lineage
    }

    /// The store the session works on.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Earlier queries and their answers, oldest first (what `history` holds).
    pub fn history(&self) -> &[HistoryEntry] {
        &self.history
    }

    /// The session's runs, oldest first.
    pub fn runs(&self) -> &[RunRecord] {
        &self.runs
    }

    /// What the model was told about each context slot, oldest first.
    pub fn contexts(&self) -> &[ContextInfo] {
        &self.contexts
    }

    /// Usage of every query so far, sub-calls and sub-agents included.
    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// A handle that cancels the running query from another task.
    pub fn canceller(&self) -> QueryCanceller {
        self.canceller.clone()
    }

    /// The variables the model defined in the REPL (none before the first query).
    pub async fn variables(&mut self) -> Result<Vec<ReplVariable>, EnvError> {
        match self.env.as_mut() {
            Some(Started::Code(repl)) => repl.variables().await,
            Some(Started::Tools(_)) | None => Ok(Vec::new()),
        }
    }

    /// Stops the environment and every process it started.
    pub async fn close(mut self) {
        if let Some(env) = self.env.as_mut() {
            env.env_mut().shutdown().await;
        }
    }
}

/// Loads a context into the store off the async threads; `cancel` stops it.
async fn load(
    store: &Arc<Store>,
    spec: ContextSpec,
    keys: ContextKeys,
    cancel: CancellationToken,
) -> Result<LoadedContext, RunError> {
    let store = Arc::clone(store);
    Ok(blocking(move || load_context(&store, &spec, &keys, &cancel)).await??)
}

/// Emits `run_finished` and writes `summary.json`.
fn finish(
    sink: &EventSink,
    accounting: &Accounting,
    status: RunStatus,
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
    let trace_incomplete = sink.trace_incomplete();
    sink.emit(EventData::RunFinished(RunFinished {
        status,
        answer: answer.map(str::to_owned),
        iterations,
        usage: totals.usage,
        cost_usd: cost,
        duration_ms,
        trace_incomplete: trace_incomplete.clone(),
    }));
    let identity = sink.identity();
    let summary = RunSummaryFile {
        format_version: SUMMARY_FORMAT_VERSION,
        run_id: identity.run_id.clone(),
        agent_id: identity.agent_id.clone(),
        parent_id: identity.parent_id.clone(),
        depth: identity.depth,
        status,
        answer: answer.map(str::to_owned),
        error: error.map(str::to_owned),
        iterations,
        totals: RunTotals {
            cost_usd: cost,
            ..totals.run_totals()
        },
        duration_ms,
        trace_incomplete,
    };
    if let Err(e) = sink.write_summary(&summary) {
        tracing::warn!("{e}");
    }
}

/// Runs blocking store work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, RunError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| RunError::Panicked {
            task: "store",
            message: e.to_string(),
        })
}

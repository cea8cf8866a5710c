//! The `python` environment: a persistent `python3` kernel running the embedded driver.
//!
//! Model code runs in a child process (its own process group, parent-death signal,
//! killed on drop) that speaks JSON lines with the orchestrator (see [`protocol`] and
//! `python/driver/`). The kernel reads `context` straight from the variable files, so the
//! context never crosses the pipe; everything that needs a model, the store or a
//! sub-agent is a `host_call` served by the [`Host`].
//!
//! Behaviour the loop relies on:
//! - The last expression of a cell is echoed like a REPL (`repr`, unless `None`);
//!   everything else follows plain `exec` semantics.
//! - Captured stdout/stderr are capped at [`PythonOptions::output_cap_bytes`] each,
//!   with a marker; C-level and subprocess output is captured too, in order. The
//!   capture files themselves never hold more than
//!   [`PythonOptions::capture_limit_bytes`]: past it the orchestrator empties them
//!   (whatever writes to them, a background process included) and says so in the
//!   output.
//! - The kernel is not trusted with the protocol: a message longer than
//!   [`PythonOptions::max_message_bytes`], one that is not JSON or lacks the kernel's
//!   token (model code writing to the protocol fd, a forged `final`), and a kernel
//!   whose own fds the code closed (`os.close(7)`) are protocol errors: the kernel is
//!   replaced at once and the execution's error says why, never a timeout. Host calls
//!   from a forked process (`multiprocessing`, `os.fork`) fail at once with a
//!   `HostError` that says to use threads.
//! - Past [`EnvConfig::exec_timeout`] the kernel gets SIGINT (a `KeyboardInterrupt` in
//!   the code; variables survive, `timed_out` is set). If it does not answer within
//!   [`PythonOptions::interrupt_grace`], its process group is killed and a new kernel
//!   started: `timed_out` and `restarted` are both set.
//! - A kernel that dies (`os._exit`, a segfault) fails the running execution with its
//!   exit status and stderr tail; a new kernel is started at once and the next
//!   execution reports `restarted`.
//! - Persistent sessions ([`Environment::next_query`]): each new context is loaded
//!   into its own slot; a restarted kernel reloads every slot and the whole `history`.
//!   An execution abandoned by a cancelled query is interrupted by
//!   [`Environment::recover`] (or before the next request), so the kernel is idle
//!   again and keeps its variables when the code yields to the interrupt.
//! - Start-up is lazy: [`PythonEnv::start`] spawns the kernel and returns at once
//!   (~50 ms of interpreter start and the context load overlap the first model call);
//!   the first execution waits for `ready`.

mod capture;
mod confine;
mod kernel;
mod protocol;
#[cfg(test)]
mod protocol_fuzz;
mod reader;

pub use self::confine::KernelSandbox;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use kernel::KernelInfo;

use self::kernel::{Kernel, Waited};
use self::protocol::{ExecReply, FinalVarReply, ListVarsReply, NextQueryReply, Request};
use rlm_env::Host;
use rlm_env::CHUNK_CHARS;
use rlm_env::{system_prompt, EnvGuide, PromptFeatures};
use rlm_env::{
    CodeRepl, ContextSource, EnvConfig, EnvError, EnvKind, Environment, EnvironmentFactory,
    ExecOutcome, HistoryEntry, ReplVariable, Started,
};

/// Fence tags whose code runs here besides `repl`.
const FENCE_TAGS: &[&str] = &["python", "py", "python3"];

/// What the system prompt says about the Python REPL and its helpers.
pub fn guide(features: PromptFeatures) -> EnvGuide {
    let chars = features.sub_context_chars;
    let mut delegate = format!(
        "llm_query(prompt, context=piece) asks a sub-model about a piece of at most about {chars} characters; llm_query_parallel([...]) asks about many pieces at once; sub_rlm(query, context=piece) runs a nested RLM over a large piece and sub_rlm_parallel([(query, piece), ...]) runs several at once"
    );
    if features.agents {
        delegate.push_str(
            "; spawn_agent(task, refs=[keys]) runs the external agent on stored variables",
        );
    }
    delegate.push('.');
    let mut helpers = vec![
        format!("context, context_chunks (the context in pieces of {CHUNK_CHARS} characters), query, history"),
        "peek(var, start=0, end=10)  search(var, pattern, regex=False, max_results=10)".to_owned(),
        "summarize(var, max_tokens=500)  find_relevant(var, query, top_k=5)".to_owned(),
        "llm_query(prompt, context=None)  llm_query_parallel(prompts)  sub_rlm(query, context=None)  sub_rlm_parallel(jobs)".to_owned(),
    ];
    if features.agents {
        helpers.push("spawn_agent(task, refs=None)  spawn_agents([(task, refs), ...])".to_owned());
    }
    helpers.push(
        "store.set(key, value)  store.get(key)  store.ref(key)  store.list()  store.delete(key)"
            .to_owned(),
    );
    helpers.push("SHOW_VARS()  FINAL_VAR(name)  SUBMIT(obj)".to_owned());
    EnvGuide {
        language: "Python",
        how_code_runs:
            "Every block runs in the same persistent REPL and you then see what it printed."
                .to_owned(),
        delegate,
        store_note: "store.set(key, value) stores one where sub-agents can read it by reference."
            .to_owned(),
        helpers,
    }
}

/// Default for [`PythonOptions::output_cap_bytes`].
pub const OUTPUT_CAP_BYTES: usize = 1 << 20;
/// Default for [`PythonOptions::interrupt_grace`].
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(2);
/// Default for [`PythonOptions::ready_timeout`].
pub const READY_TIMEOUT: Duration = Duration::from_secs(300);
/// Default for [`PythonOptions::max_message_bytes`]: room for a large `FINAL_VAR`
/// or `store.set` value, far below what would strain the orchestrator's memory.
pub const MAX_MESSAGE_BYTES: usize = 128 << 20;
/// Default for [`PythonOptions::capture_limit_bytes`].
pub const CAPTURE_LIMIT_BYTES: usize = 16 << 20;
/// Default for [`PythonOptions::stderr_tail_bytes`].
pub const STDERR_TAIL_BYTES: usize = 8 * 1024;
/// How often an abandoned execution is interrupted again until it stops.
const INTERRUPT_REPEAT: Duration = Duration::from_millis(100);
/// How long `shutdown` waits at each step (exit on request, then SIGTERM).
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// How the kernel process is run.
#[derive(Debug, Clone)]
pub struct PythonOptions {
    /// The interpreter (default `python3`, looked up in `PATH`).
    pub python: PathBuf,
    /// How long the kernel may take to start and load `context`.
    pub ready_timeout: Duration,
    /// After the SIGINT of a timeout, how long to wait before killing and restarting.
    pub interrupt_grace: Duration,
    /// Bytes kept of each of stdout and stderr per execution.
    pub output_cap_bytes: usize,
    /// The most bytes a capture file may hold before the orchestrator empties it
    /// (never less than `output_cap_bytes`).
    pub capture_limit_bytes: usize,
    /// The longest message the kernel may send (a longer one is a protocol error; the
    /// driver refuses to send one, so model code gets a `HostError` instead).
    pub max_message_bytes: usize,
    /// Bytes kept of the kernel's stderr outside executions, for error messages.
    pub stderr_tail_bytes: usize,
    /// Extra environment variables to inherit by name (the kernel's environment is
    /// cleared and rebuilt; API keys are never passed unless named here).
    pub pass_env: Vec<String>,
    /// Extra environment variables to set.
    pub env: Vec<(String, String)>,
    /// Working directory of the kernel (default: the orchestrator's).
    pub working_dir: Option<PathBuf>,
    /// Read size of the chunked text loader (tests use tiny chunks to exercise
    /// boundaries; default 1 MiB).
    pub load_chunk_bytes: Option<usize>,
    /// `--sandbox`: how the kernel is confined (default: not at all; the command
    /// line's default is `auto`).
    pub sandbox: KernelSandbox,
}

impl From<PathBuf> for PythonOptions {
    /// Default options with this interpreter.
    fn from(python: PathBuf) -> Self {
        Self {
            python,
            ..Self::default()
        }
    }
}

impl Default for PythonOptions {
    fn default() -> Self {
        Self {
            python: PathBuf::from("python3"),
            ready_timeout: READY_TIMEOUT,
            interrupt_grace: INTERRUPT_GRACE,
            output_cap_bytes: OUTPUT_CAP_BYTES,
            capture_limit_bytes: CAPTURE_LIMIT_BYTES,
            max_message_bytes: MAX_MESSAGE_BYTES,
            stderr_tail_bytes: STDERR_TAIL_BYTES,
            pass_env: Vec::new(),
            env: Vec::new(),
            working_dir: None,
            load_chunk_bytes: None,
            sandbox: KernelSandbox::off(),
        }
    }
}

impl PythonOptions {
    /// The most bytes a capture file may hold: `capture_limit_bytes`, at least the cap.
    pub fn capture_limit(&self) -> u64 {
        self.capture_limit_bytes.max(self.output_cap_bytes) as u64
    }
}

/// Starts [`PythonEnv`]s with fixed [`PythonOptions`].
#[derive(Debug, Clone)]
pub struct PythonFactory {
    options: PythonOptions,
}

impl PythonFactory {
    /// A factory of kernels run with `options`.
    pub fn new(options: PythonOptions) -> Self {
        Self { options }
    }
}

#[async_trait::async_trait]
impl EnvironmentFactory for PythonFactory {
    fn kind(&self) -> EnvKind {
        EnvKind::Python
    }

    async fn start(&self, config: EnvConfig, host: Arc<dyn Host>) -> Result<Started, EnvError> {
        let env = PythonEnv::start(config, host, self.options.clone()).await?;
        Ok(Started::Code(Box::new(env)))
    }
}

/// A persistent Python REPL (see the module docs).
pub struct PythonEnv {
    config: EnvConfig,
    options: PythonOptions,
    host: Arc<dyn Host>,
    kernel: Option<Kernel>,
    history: Vec<HistoryEntry>,
    /// How many entries of `history` the current kernel holds (from its `init`, or
    /// pushed since): one answered before it was ready is pushed once it is.
    kernel_history: usize,
    /// Context slots added after `config.context` (persistent sessions).
    more_contexts: Vec<ContextSource>,
    /// The id of an execution whose caller went away before its result (a cancelled
    /// query); it is interrupted before the kernel is used again.
    running: Option<u64>,
    /// The model has not yet been told that its variables were lost.
    lost_state: bool,
    /// A kernel has been ready before (start errors after that are `Broken`).
    ever_ready: bool,
    restarts: u32,
    /// What the user should hear about this environment (e.g. partial confinement).
    notices: Vec<String>,
}

impl PythonEnv {
    /// Spawns the kernel and returns without waiting for it to load `context`; the
    /// first [`CodeRepl::execute`] (or [`PythonEnv::wait_ready`]) waits. `options`
    /// is a [`PythonOptions`] or just the interpreter's path. Must be called within a
    /// tokio runtime (and not from `spawn_blocking`: the kernel's parent-death signal
    /// is tied to the spawning thread).
    pub async fn start(
        config: EnvConfig,
        host: Arc<dyn Host>,
        options: impl Into<PythonOptions>,
    ) -> Result<Self, EnvError> {
        let options = options.into();
        let history = config.history.clone();
        let notices = confine::auto_gaps_notice(&options.sandbox)
            .into_iter()
            .collect();
        let mut env = Self {
            notices,
            config,
            options,
            host,
            kernel: None,
            kernel_history: history.len(),
            history,
            more_contexts: Vec::new(),
            running: None,
            lost_state: false,
            ever_ready: false,
            restarts: 0,
        };
        env.kernel = Some(env.spawn_kernel()?);
        Ok(env)
    }

    /// Waits until the kernel has loaded `context` and reports what it said.
    pub async fn wait_ready(&mut self) -> Result<KernelInfo, EnvError> {
        self.ensure_ready().await?;
        self.kernel
            .as_ref()
            .and_then(Kernel::info)
            .cloned()
            .ok_or_else(|| self.broken("the kernel is not running"))
    }

    /// The running kernel's pid, if one is running.
    pub fn pid(&self) -> Option<u32> {
        self.kernel.as_ref().map(Kernel::pid)
    }

    /// What the current kernel reported when it became ready.
    pub fn kernel_info(&self) -> Option<&KernelInfo> {
        self.kernel.as_ref().and_then(Kernel::info)
    }

    /// How many times the kernel was replaced after a crash or a stuck timeout.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    fn spawn_kernel(&self) -> Result<Kernel, EnvError> {
        Kernel::spawn(
            &self.config,
            &self.history,
            &self.more_contexts,
            &self.options,
            Arc::clone(&self.host),
        )
        .map_err(|message| self.start_error(message))
    }

    fn start_error(&self, message: String) -> EnvError {
        if self.ever_ready {
            self.broken(format!("restarting it failed: {message}"))
        } else {
            EnvError::Start {
                env: EnvKind::Python,
                command: self.options.python.display().to_string(),
                message,
            }
        }
    }

    fn broken(&self, message: impl Into<String>) -> EnvError {
        EnvError::Broken {
            env: EnvKind::Python,
            message: message.into(),
        }
    }

    /// Replaces a dead or stuck kernel; the model will be told its variables are lost.
    fn replace_kernel(&mut self) -> Result<(), EnvError> {
        self.kernel = None;
        self.running = None;
        self.restarts += 1;
        self.lost_state = true;
        self.kernel_history = self.history.len();
        self.kernel = Some(self.spawn_kernel()?);
        Ok(())
    }

    /// Makes sure a live, ready kernel exists (restarting a dead one). Returns whether
    /// the model still has to be told that its variables were lost.
    async fn ensure_ready(&mut self) -> Result<bool, EnvError> {
        self.settle().await?;
        let dead = match &mut self.kernel {
            Some(kernel) => kernel.has_died(),
            None => true,
        };
        if dead {
            self.replace_kernel()?;
        }
        let limit = self.options.ready_timeout;
        let ready = match self.kernel.as_mut() {
            Some(kernel) => kernel.wait_ready(limit).await.map(|_| ()),
            None => Err("no kernel".to_owned()),
        };
        if let Err(message) = ready {
            self.kernel = None;
            return Err(self.start_error(message));
        }
        self.ever_ready = true;
        self.deliver_history().await;
        Ok(std::mem::take(&mut self.lost_state))
    }

    /// The live kernel for a query about state (no restart: a dead kernel has no
    /// variables, and restarting here would swallow the "variables lost" notice).
    async fn live_kernel(&mut self) -> Option<&mut Kernel> {
        if let Err(error) = self.settle().await {
            tracing::warn!(%error, "the Python kernel could not be brought back to idle");
            return None;
        }
        let limit = self.options.ready_timeout;
        let kernel = self.kernel.as_mut()?;
        if kernel.has_died() || kernel.wait_ready(limit).await.is_err() {
            return None;
        }
        self.kernel.as_mut()
    }

    /// Interrupts an execution abandoned by its caller (a cancelled query):
    /// its result is awaited for the interrupt grace period, after which the kernel is
    /// replaced (and the model will be told its variables are lost).
    async fn settle(&mut self) -> Result<(), EnvError> {
        let Some(id) = self.running.take() else {
            return Ok(());
        };
        let deadline = Instant::now() + self.options.interrupt_grace;
        let Some(kernel) = self.kernel.as_mut() else {
            return Ok(());
        };
        let mut waited = kernel.wait_result(id, Duration::ZERO).await;
        // Repeated: a SIGINT that arrives before the kernel has started the code is
        // ignored by the driver (it interrupts only running user code).
        while matches!(waited, Waited::TimedOut) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            kernel.interrupt();
            kernel.cancel_host_calls("cancelled: the query was cancelled");
            waited = kernel.wait_result(id, left.min(INTERRUPT_REPEAT)).await;
        }
        match waited {
            Waited::Reply(_) => Ok(()),
            Waited::Closed | Waited::TimedOut | Waited::Broken(_) => {
                tracing::warn!(
                    pid = kernel.pid(),
                    "the Python kernel did not stop the cancelled code; restarting it"
                );
                self.replace_kernel()
            }
        }
    }

    /// Pushes the entries of `history` the kernel does not hold yet.
    async fn deliver_history(&mut self) {
        while let Some(entry) = self.history.get(self.kernel_history).cloned() {
            let (query, answer) = (entry.query.as_str(), entry.answer.as_str());
            let delivered = self
                .query(|id| Request::PushHistory { id, query, answer })
                .await;
            if delivered.is_none() {
                return; // the kernel was replaced, and its successor has it all
            }
            self.kernel_history += 1;
        }
    }

    /// Sends a state query and waits (bounded) for its reply; a stuck kernel is
    /// replaced.
    async fn query<'a>(
        &mut self,
        build: impl FnOnce(u64) -> Request<'a>,
    ) -> Option<serde_json::Value> {
        let limit = self.config.exec_timeout;
        let kernel = self.live_kernel().await?;
        let id = kernel.send(build)?;
        match kernel.wait_result(id, limit).await {
            Waited::Reply(body) => Some(body),
            Waited::Closed => {
                let report = kernel.death_report().await;
                tracing::warn!(%report, "the Python kernel died");
                let _ = self.replace_kernel();
                None
            }
            Waited::TimedOut => {
                tracing::warn!("the Python kernel did not answer a state query; restarting it");
                let _ = self.replace_kernel();
                None
            }
            Waited::Broken(problem) => {
                tracing::warn!(%problem, "the Python kernel broke the protocol; restarting it");
                let _ = self.replace_kernel();
                None
            }
        }
    }
}

/// The outcome of an `exec` reply, and why the kernel cannot go on if it cannot.
fn outcome_from(body: serde_json::Value) -> (ExecOutcome, Option<String>) {
    match serde_json::from_value::<ExecReply>(body) {
        Ok(reply) => (
            ExecOutcome {
                stdout: reply.stdout,
                stderr: reply.stderr,
                error: reply.error,
                final_answer: reply.final_answer,
                timed_out: reply.interrupted,
                ..ExecOutcome::default()
            },
            reply.broken,
        ),
        Err(error) => (
            ExecOutcome {
                error: Some(format!(
                    "the Python kernel sent an unreadable result: {error}"
                )),
                ..ExecOutcome::default()
            },
            None,
        ),
    }
}

/// What the model reads when its kernel had to be replaced because of `why`.
fn restart_notice(why: &str) -> String {
    format!(
        "The Python REPL could not go on: {why}.\n\
         It has been restarted; every variable you defined is lost \
         (`context` and the helpers are loaded again). Do not write to, close or \
         replace the REPL's own file descriptors (3 to 8)."
    )
}

/// Appends `notice` to an optional error text.
fn add_error(error: &mut Option<String>, notice: String) {
    *error = Some(match error.take() {
        Some(text) if !text.is_empty() => format!("{}\n{notice}", text.trim_end()),
        _ => notice,
    });
}

#[async_trait::async_trait]
impl Environment for PythonEnv {
    fn kind(&self) -> EnvKind {
        EnvKind::Python
    }

    fn system_prompt(&self, features: PromptFeatures) -> String {
        system_prompt(&guide(features))
    }

    fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    async fn push_history(&mut self, entry: HistoryEntry) -> Result<(), EnvError> {
        self.history.push(entry);
        // A kernel still starting gets it once ready (`ensure_ready`), so a query
        // answered without code does not wait for Python to start; a kernel started
        // later gets the whole history in its `init`.
        if self.kernel.as_ref().is_some_and(Kernel::is_ready) {
            self.deliver_history().await;
        }
        Ok(())
    }

    async fn next_query(
        &mut self,
        query: &str,
        context: Option<ContextSource>,
    ) -> Result<(), EnvError> {
        self.config.query = query.to_owned();
        let added = context.is_some();
        // Recorded first: a kernel (re)started from here on loads it in its `init`.
        self.more_contexts.extend(context.clone());
        let restarts = self.restarts;
        let ready = self.ensure_ready().await;
        let owed = match ready {
            Ok(owed) => owed,
            Err(error) => {
                if added {
                    self.more_contexts.pop();
                }
                return Err(error);
            }
        };
        self.lost_state |= owed;
        if self.restarts != restarts {
            return Ok(()); // the new kernel got the query and every slot in `init`
        }
        let limit = self.options.ready_timeout;
        let Some(kernel) = self.kernel.as_mut() else {
            return Err(self.broken("the kernel is not running"));
        };
        let sent = kernel.send(|id| Request::NextQuery {
            id,
            query,
            context: context.as_ref(),
        });
        let waited = match sent {
            Some(id) => kernel.wait_result(id, limit).await,
            None => Waited::Closed,
        };
        match waited {
            Waited::Reply(body) => {
                let error = match serde_json::from_value::<NextQueryReply>(body) {
                    Ok(reply) => reply.error,
                    Err(e) => Some(format!("unreadable reply ({e})")),
                };
                match error {
                    None => Ok(()),
                    Some(message) => {
                        if added {
                            self.more_contexts.pop();
                        }
                        Err(EnvError::Request {
                            env: EnvKind::Python,
                            action: if added {
                                "load the new context"
                            } else {
                                "start the next query"
                            },
                            message,
                        })
                    }
                }
            }
            Waited::Closed => {
                let report = kernel.death_report().await;
                tracing::warn!(%report, "the Python kernel died while starting a query");
                self.replace_kernel()
            }
            Waited::TimedOut => {
                tracing::warn!("the Python kernel did not answer next_query; restarting it");
                self.replace_kernel()
            }
            Waited::Broken(problem) => {
                tracing::warn!(%problem, "the Python kernel broke the protocol; restarting it");
                self.replace_kernel()
            }
        }
    }

    async fn recover(&mut self) -> Result<(), EnvError> {
        self.settle().await
    }

    async fn shutdown(&mut self) {
        match self.kernel.take() {
            Some(kernel) if kernel.is_ready() => kernel.shutdown(SHUTDOWN_GRACE).await,
            // A kernel never used holds nothing: it is ended at once (its process group
            // killed) instead of waited for, so a run answered without code does not
            // wait for Python to finish starting (BENCHMARKS.md, nested runs).
            Some(kernel) => drop(kernel),
            None => {}
        }
    }
}

#[async_trait::async_trait]
impl CodeRepl for PythonEnv {
    fn fence_tags(&self) -> &'static [&'static str] {
        FENCE_TAGS
    }

    async fn execute(&mut self, code: &str) -> Result<ExecOutcome, EnvError> {
        let started = Instant::now();
        let restarted = self.ensure_ready().await?;
        let timeout = self.config.exec_timeout;
        let grace = self.options.interrupt_grace;
        let Some(kernel) = self.kernel.as_mut() else {
            return Err(self.broken("the kernel is not running"));
        };
        let waited = match kernel.send(|id| Request::Exec { id, code }) {
            None => (Waited::Closed, None),
            Some(id) => {
                // Cleared below; still set if this future is dropped while waiting.
                self.running = Some(id);
                (kernel.wait_result(id, timeout).await, Some(id))
            }
        };
        let discarded = kernel.take_discarded();
        let capture_limit = kernel.capture_limit();
        let mut outcome = match waited {
            (Waited::Reply(body), _) => {
                let (mut outcome, broken) = outcome_from(body);
                if let Some(why) = broken {
                    tracing::warn!(%why, "the Python kernel is broken; restarting it");
                    self.replace_kernel()?;
                    outcome.final_answer = None;
                    add_error(&mut outcome.error, restart_notice(&why));
                }
                outcome
            }
            (Waited::Broken(problem), _) => {
                tracing::warn!(%problem, "the Python kernel broke the protocol; restarting it");
                self.replace_kernel()?;
                // The notice stays owed: the next execution reports `restarted`.
                ExecOutcome {
                    error: Some(restart_notice(&format!(
                        "{problem}. Did the code write to the REPL's protocol file descriptor?"
                    ))),
                    ..ExecOutcome::default()
                }
            }
            (Waited::Closed, _) => {
                let report = kernel.death_report().await;
                self.replace_kernel()?;
                // The notice stays owed: the next execution reports `restarted`.
                ExecOutcome {
                    error: Some(format!(
                        "The Python REPL process died while running this code: {report}\n\
                         It has been restarted; every variable you defined is lost \
                         (`context` and the helpers are loaded again)."
                    )),
                    ..ExecOutcome::default()
                }
            }
            (Waited::TimedOut, id) => {
                kernel.interrupt();
                kernel.cancel_host_calls("cancelled: the execution timed out");
                let after = match id {
                    Some(id) => kernel.wait_result(id, grace).await,
                    None => Waited::Closed,
                };
                match after {
                    Waited::Reply(body) => {
                        let (mut outcome, broken) = outcome_from(body);
                        outcome.timed_out = true;
                        if let Some(why) = broken {
                            self.replace_kernel()?;
                            outcome.final_answer = None;
                            add_error(&mut outcome.error, restart_notice(&why));
                        }
                        outcome
                    }
                    Waited::Closed | Waited::TimedOut | Waited::Broken(_) => {
                        tracing::warn!(
                            pid = kernel.pid(),
                            "the Python kernel did not recover from the interrupt; restarting it"
                        );
                        self.replace_kernel()?;
                        self.lost_state = false;
                        ExecOutcome {
                            timed_out: true,
                            restarted: true,
                            ..ExecOutcome::default()
                        }
                    }
                }
            }
        };
        self.running = None;
        for ((text, stream), bytes) in [&mut outcome.stdout, &mut outcome.stderr]
            .into_iter()
            .zip(capture::STREAMS)
            .zip(discarded)
        {
            if bytes > 0 {
                text.push_str(&capture::discard_notice(stream, bytes, capture_limit));
            }
        }
        if let Some(message) = self.kernel.as_ref().and_then(Kernel::take_fatal) {
            return Err(EnvError::HostFatal {
                env: EnvKind::Python,
                message,
            });
        }
        outcome.restarted |= restarted;
        outcome.duration = started.elapsed();
        Ok(outcome)
    }

    async fn final_var(&mut self, name: &str) -> Result<Option<String>, EnvError> {
        let name = name.trim().trim_matches(|c| c == '"' || c == '\'');
        let Some(body) = self.query(|id| Request::FinalVar { id, name }).await else {
            return Ok(None);
        };
        Ok(serde_json::from_value::<FinalVarReply>(body)
            .ok()
            .filter(|reply| reply.found)
            .and_then(|reply| reply.value))
    }

    async fn variables(&mut self) -> Result<Vec<ReplVariable>, EnvError> {
        let Some(body) = self.query(|id| Request::ListVars { id }).await else {
            return Ok(Vec::new());
        };
        Ok(serde_json::from_value::<ListVarsReply>(body)
            .map(|reply| reply.vars)
            .unwrap_or_default())
    }
}

//! [`PythonEnv`]: the session a python REPL keeps around its kernel (the query, the
//! context slots and `history` a new kernel gets back), on the restartable-kernel
//! lifecycle of `rlm-env`; the execution of code is `exec.rs`.

use std::sync::Arc;
use std::time::Duration;

use crate::confine;
use crate::guide::guide;
use crate::kernel::{Kernel, KernelInfo, Waited};
use crate::options::PythonOptions;
use crate::protocol::{NextQueryReply, Request};
use rlm_env::{
    system_prompt, ContextSource, EnvConfig, EnvError, EnvKind, Environment, HistoryEntry, Host,
    KernelSeed, PromptFeatures, Restartable,
};

/// How long `shutdown` waits at each step (exit on request, then SIGTERM).
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// A persistent Python REPL (see the crate docs).
pub struct PythonEnv {
    pub(crate) kernel: Restartable<Kernel>,
    /// What the user should hear about this environment (e.g. partial confinement).
    notices: Vec<String>,
}

impl PythonEnv {
    /// Spawns the kernel and returns without waiting for it to load `context`; the
    /// first [`rlm_env::CodeRepl::execute`] (or [`PythonEnv::wait_ready`]) waits.
    /// `options` is a [`PythonOptions`] or just the interpreter's path. Must be called
    /// within a tokio runtime (and not from `spawn_blocking`: the kernel's parent-death
    /// signal is tied to the spawning thread).
    pub async fn start(
        config: EnvConfig,
        host: Arc<dyn Host>,
        options: impl Into<PythonOptions>,
    ) -> Result<Self, EnvError> {
        let options = options.into();
        let notices = confine::auto_gaps_notice(&options.sandbox)
            .into_iter()
            .collect();
        let kernel = Restartable::start(KernelSeed {
            history: config.history.clone(),
            config,
            more_contexts: Vec::new(),
            options,
            host,
        })?;
        Ok(Self { kernel, notices })
    }

    /// Waits until the kernel has loaded `context` and reports what it said.
    pub async fn wait_ready(&mut self) -> Result<KernelInfo, EnvError> {
        self.ensure_ready().await?;
        self.kernel
            .kernel()
            .and_then(Kernel::info)
            .cloned()
            .ok_or_else(|| self.kernel.broken("the kernel is not running"))
    }

    /// The running kernel's pid, if one is running.
    pub fn pid(&self) -> Option<u32> {
        self.kernel.kernel().map(Kernel::pid)
    }

    /// What the current kernel reported when it became ready.
    pub fn kernel_info(&self) -> Option<&KernelInfo> {
        self.kernel.kernel().and_then(Kernel::info)
    }

    /// How many times the kernel was replaced after a crash or a stuck timeout.
    pub fn restarts(&self) -> u32 {
        self.kernel.restarts()
    }

    /// Makes sure a live, ready kernel exists (restarting a dead one). Returns whether
    /// the model still has to be told that its variables were lost.
    pub(crate) async fn ensure_ready(&mut self) -> Result<bool, EnvError> {
        self.kernel.ensure_ready().await?;
        self.deliver_history().await;
        Ok(self.kernel.take_lost_state())
    }

    /// Pushes the entries of `history` the kernel does not hold yet.
    async fn deliver_history(&mut self) {
        loop {
            let held = match self.kernel.kernel() {
                Some(kernel) => kernel.history_len,
                None => return,
            };
            let Some(entry) = self.kernel.seed().history.get(held).cloned() else {
                return;
            };
            let (query, answer) = (entry.query.as_str(), entry.answer.as_str());
            let delivered = self
                .query(|id| Request::PushHistory { id, query, answer })
                .await;
            if delivered.is_none() {
                return; // the kernel was replaced, and its successor has it all
            }
            if let Some(kernel) = self.kernel.kernel_mut() {
                kernel.history_len += 1;
            }
        }
    }

    /// Sends a state query and waits (bounded) for its reply; a stuck kernel is
    /// replaced.
    pub(crate) async fn query<'a>(
        &mut self,
        build: impl FnOnce(u64) -> Request<'a>,
    ) -> Option<serde_json::Value> {
        let limit = self.kernel.seed().config.exec_timeout;
        let kernel = self.kernel.live().await?;
        let id = kernel.send(build)?;
        match kernel.wait_result(id, limit).await {
            Waited::Reply(body) => Some(body),
            Waited::Closed => {
                let report = kernel.death_report().await;
                tracing::warn!(%report, "the Python kernel died");
                let _ = self.kernel.replace();
                None
            }
            Waited::TimedOut => {
                tracing::warn!("the Python kernel did not answer a state query; restarting it");
                let _ = self.kernel.replace();
                None
            }
            Waited::Broken(problem) => {
                tracing::warn!(%problem, "the Python kernel broke the protocol; restarting it");
                let _ = self.kernel.replace();
                None
            }
        }
    }
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
        self.kernel.seed_mut().history.push(entry);
        // A kernel still starting gets it once ready (`ensure_ready`), so a query
        // answered without code does not wait for Python to start; a kernel started
        // later gets the whole history in its `init`.
        if self.kernel.kernel().is_some_and(Kernel::is_ready) {
            self.deliver_history().await;
        }
        Ok(())
    }

    async fn next_query(
        &mut self,
        query: &str,
        context: Option<ContextSource>,
    ) -> Result<(), EnvError> {
        let start = self.kernel.begin_query(query, context.clone());
        let owed = match self.ensure_ready().await {
            Ok(owed) => owed,
            Err(error) => {
                self.kernel.undo_query(&start);
                return Err(error);
            }
        };
        if owed {
            self.kernel.owe_lost_state();
        }
        if self.kernel.restarted_since(&start) {
            return Ok(()); // the new kernel got the query and every slot in `init`
        }
        let limit = self.kernel.seed().options.ready_timeout;
        let Some(kernel) = self.kernel.kernel_mut() else {
            return Err(self.kernel.broken("the kernel is not running"));
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
                    Some(message) => Err(self.kernel.refused(&start, message)),
                }
            }
            Waited::Closed => {
                let report = kernel.death_report().await;
                tracing::warn!(%report, "the Python kernel died while starting a query");
                self.kernel.replace()
            }
            Waited::TimedOut => {
                tracing::warn!("the Python kernel did not answer next_query; restarting it");
                self.kernel.replace()
            }
            Waited::Broken(problem) => {
                tracing::warn!(%problem, "the Python kernel broke the protocol; restarting it");
                self.kernel.replace()
            }
        }
    }

    async fn recover(&mut self) -> Result<(), EnvError> {
        self.kernel.settle().await
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

//! The lifecycle every code REPL's kernel shares, written once: spawn it, tell a start
//! failure from a kernel that broke later, replace a dead or stuck one (the model is
//! then told its variables are gone), wait until it is ready, and settle an execution
//! whose caller went away before it can be used again.
//!
//! A kernel (the python process, the js engine thread) implements [`Kernel`]: how to
//! start one from a [`KernelSeed`], whether it died, how to wait for it and how to stop
//! abandoned code. [`Restartable`] holds the seed and the current kernel and does the
//! rest, so each environment keeps only what its language needs.

use std::fmt::Display;
use std::sync::Arc;

use crate::environment::{EnvConfig, EnvError};
use crate::host::Host;
use crate::kind::EnvKind;
use rlm_protocol::{ContextSource, HistoryEntry};

/// Everything a new kernel starts from, kept up to date so that a replacement gets
/// back the query, every context slot and the whole `history`.
pub struct KernelSeed<O> {
    /// The environment's configuration (its `query` is the current one).
    pub config: EnvConfig,
    /// Every `{query, answer}` pair so far.
    pub history: Vec<HistoryEntry>,
    /// Context slots added after `config.context` (persistent sessions).
    pub more_contexts: Vec<ContextSource>,
    /// The kernel's own options.
    pub options: O,
    /// Serves the host calls of the model's code.
    pub host: Arc<dyn Host>,
}

/// One kernel of a code REPL, as [`Restartable`] drives it.
#[async_trait::async_trait]
pub trait Kernel: Send + Sized {
    /// The kernel's own options (in the [`KernelSeed`]).
    type Options: Send + Sync;
    /// Why a kernel could not start or become ready (what the user reads).
    type Error: Display + Send;

    /// Which environment the kernel runs.
    const KIND: EnvKind;

    /// What is run, for start errors (e.g. the interpreter's path).
    fn command(options: &Self::Options) -> String;

    /// Starts a kernel; does not wait for it to be ready.
    fn spawn(seed: &KernelSeed<Self::Options>) -> Result<Self, Self::Error>;

    /// Whether the kernel is known to have died.
    fn has_died(&mut self) -> bool;

    /// Waits (bounded) until the kernel has loaded its context and is ready.
    async fn wait_ready(&mut self) -> Result<(), Self::Error>;

    /// Stops an execution whose caller went away, if there is one, within the
    /// kernel's grace period. `false`: it did not stop and the kernel must be replaced.
    async fn settle(&mut self) -> bool;
}

/// A kernel that is replaced when it dies or gets stuck (see the module docs).
pub struct Restartable<K: Kernel> {
    seed: KernelSeed<K::Options>,
    kernel: Option<K>,
    /// The model has not yet been told that its variables were lost.
    lost_state: bool,
    /// A kernel has been ready before (start errors after that are `Broken`).
    ever_ready: bool,
    restarts: u32,
}

impl<K: Kernel> Restartable<K> {
    /// Spawns the first kernel; does not wait for it to be ready.
    pub fn start(seed: KernelSeed<K::Options>) -> Result<Self, EnvError> {
        let mut this = Self {
            seed,
            kernel: None,
            lost_state: false,
            ever_ready: false,
            restarts: 0,
        };
        this.kernel = Some(this.spawn()?);
        Ok(this)
    }

    /// What a new kernel starts from.
    pub fn seed(&self) -> &KernelSeed<K::Options> {
        &self.seed
    }

    /// What a new kernel starts from, to record a new query, slot or answer.
    pub fn seed_mut(&mut self) -> &mut KernelSeed<K::Options> {
        &mut self.seed
    }

    /// The current kernel, if one is running.
    pub fn kernel(&self) -> Option<&K> {
        self.kernel.as_ref()
    }

    /// The current kernel, mutably.
    pub fn kernel_mut(&mut self) -> Option<&mut K> {
        self.kernel.as_mut()
    }

    /// Takes the current kernel out (to shut it down).
    pub fn take(&mut self) -> Option<K> {
        self.kernel.take()
    }

    /// How many times the kernel was replaced.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// Whether a kernel has been ready before.
    pub fn ever_ready(&self) -> bool {
        self.ever_ready
    }

    /// Whether the model still has to be told that its variables were lost; a second
    /// call says no until the next replacement.
    pub fn take_lost_state(&mut self) -> bool {
        std::mem::take(&mut self.lost_state)
    }

    /// Records that the model still has to be told that its variables were lost.
    pub fn owe_lost_state(&mut self) {
        self.lost_state = true;
    }

    /// The error for a kernel that could not start: a start error before any kernel
    /// was ready, a broken environment after.
    pub fn start_error(&self, error: impl Display) -> EnvError {
        if self.ever_ready {
            self.broken(format!("restarting it failed: {error}"))
        } else {
            EnvError::Start {
                env: K::KIND,
                command: K::command(&self.seed.options),
                message: error.to_string(),
            }
        }
    }

    /// The error for an environment that broke for good.
    pub fn broken(&self, message: impl Into<String>) -> EnvError {
        EnvError::Broken {
            env: K::KIND,
            message: message.into(),
        }
    }

    fn spawn(&self) -> Result<K, EnvError> {
        K::spawn(&self.seed).map_err(|error| self.start_error(error))
    }

    /// Replaces a dead or stuck kernel; the model will be told its variables are lost.
    pub fn replace(&mut self) -> Result<(), EnvError> {
        self.kernel = None;
        self.restarts += 1;
        self.lost_state = true;
        self.kernel = Some(self.spawn()?);
        Ok(())
    }

    /// Stops an execution abandoned by its caller (a cancelled query); a kernel that
    /// does not stop it is replaced.
    pub async fn settle(&mut self) -> Result<(), EnvError> {
        let Some(kernel) = self.kernel.as_mut() else {
            return Ok(());
        };
        if kernel.settle().await {
            Ok(())
        } else {
            self.replace()
        }
    }

    /// Makes sure a live, ready kernel exists: settles abandoned code, replaces a dead
    /// kernel and waits for it. [`Restartable::take_lost_state`] then says whether the
    /// model must be told its variables were lost.
    pub async fn ensure_ready(&mut self) -> Result<(), EnvError> {
        self.settle().await?;
        if self.kernel.as_mut().is_none_or(K::has_died) {
            self.replace()?;
        }
        let ready = match self.kernel.as_mut() {
            Some(kernel) => kernel.wait_ready().await,
            None => return Err(self.start_error("no kernel")),
        };
        if let Err(error) = ready {
            self.kernel = None;
            return Err(self.start_error(error));
        }
        self.ever_ready = true;
        Ok(())
    }

    /// The live, ready kernel for a question about state, without a restart (a dead
    /// kernel has no variables, and restarting here would swallow the "variables
    /// lost" notice); `None` when there is none.
    pub async fn live(&mut self) -> Option<&mut K> {
        if let Err(error) = self.settle().await {
            tracing::warn!(%error, env = %K::KIND, "the REPL could not be brought back to idle");
            return None;
        }
        let kernel = self.kernel.as_mut()?;
        if kernel.has_died() || kernel.wait_ready().await.is_err() {
            return None;
        }
        Some(kernel)
    }

    /// Starts the next query of a session: records `query` and `context` in the seed
    /// first, so a kernel (re)started from here on gets them when it starts. The
    /// environment then readies a kernel and, unless [`restarted_since`](Self::restarted_since)
    /// says the kernel is new, asks it to switch; a refusal goes through
    /// [`refused`](Self::refused).
    pub fn begin_query(&mut self, query: &str, context: Option<ContextSource>) -> QueryStart {
        let seed = self.seed_mut();
        seed.config.query = query.to_owned();
        let added = context.is_some();
        seed.more_contexts.extend(context);
        QueryStart {
            added,
            restarts: self.restarts,
        }
    }

    /// Forgets the context slot `start` recorded (the query failed before a kernel
    /// took it).
    pub fn undo_query(&mut self, start: &QueryStart) {
        if start.added {
            self.seed.more_contexts.pop();
        }
    }

    /// True when a new kernel started since `start`: it got the query and every slot
    /// when it started, so there is nothing left to ask.
    pub fn restarted_since(&self, start: &QueryStart) -> bool {
        self.restarts != start.restarts
    }

    /// The kernel refused the query of `start` (`message` says why): the slot is
    /// forgotten and the error names what could not be done.
    pub fn refused(&mut self, start: &QueryStart, message: impl Into<String>) -> EnvError {
        self.undo_query(start);
        EnvError::Request {
            env: K::KIND,
            action: if start.added {
                "load the new context"
            } else {
                "start the next query"
            },
            message: message.into(),
        }
    }
}

/// A query of a session being started ([`Restartable::begin_query`]): whether it
/// added a context slot, and which kernel it was recorded for.
#[derive(Debug, Clone, Copy)]
pub struct QueryStart {
    added: bool,
    restarts: u32,
}

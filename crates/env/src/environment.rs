//! The seam between the loop and where model code runs: an [`EnvironmentFactory`]
//! starts an environment from an [`EnvConfig`] as a [`Started`] — a [`CodeRepl`] the
//! model writes code for, or a [`ToolBox`] whose tools it calls, both on the lifecycle
//! every environment shares ([`Environment`]) — and the environment's failures that
//! end a run are [`EnvError`]s (exceptions in model code are output, not errors).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rlm_protocol::{
    ContextSource, ExecOutcome, HistoryEntry, ReplVariable, ToolCall, ToolOutcome, ToolSpec,
};

use crate::guide::PromptFeatures;
use crate::host::Host;
use crate::kind::EnvKind;

/// Starts the environment of a run; the one seam through which a run chooses where
/// the model's code runs.
#[async_trait::async_trait]
pub trait EnvironmentFactory: Send + Sync {
    /// The kind of environment it starts.
    fn kind(&self) -> EnvKind;

    /// Starts one, given its configuration and the host serving its calls.
    async fn start(&self, config: EnvConfig, host: Arc<dyn Host>) -> Result<Started, EnvError>;
}

/// Everything an environment needs to start.
#[derive(Debug, Clone)]
pub struct EnvConfig {
    /// The data directory (for `store.*` helpers reading files directly).
    pub data_dir: PathBuf,
    /// Where `context` comes from; `None` for no context.
    pub context: Option<ContextSource>,
    /// The task text (`query`).
    pub query: String,
    /// Earlier `{query, answer}` pairs (`history`).
    pub history: Vec<HistoryEntry>,
    /// Per-execution timeout.
    pub exec_timeout: Duration,
    /// The depth of the run (0 for the root).
    pub depth: u32,
    /// `--max-depth`: at this depth no sub-model is asked.
    pub max_depth: u32,
    /// Characters of context a sub-model call may carry.
    pub sub_context_chars: usize,
    /// Referenced files larger than this many bytes are read lazily (`Some(0)`: all of
    /// them; `None`: none), from `--lazy-context` / `--lazy-above`.
    pub lazy_above: Option<u64>,
}

/// Why an environment failed (fatal for the run, unlike exceptions in model code).
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// A host call of the model's code failed in a way that ends the run.
    #[error("a host call of the {env} REPL failed: {message}")]
    HostFatal {
        /// Which environment.
        env: EnvKind,
        /// What failed.
        message: String,
    },
    /// The environment could not be started.
    #[error("failed to start the {env} REPL ({command}): {message}")]
    Start {
        /// Which environment.
        env: EnvKind,
        /// What was run.
        command: String,
        /// What went wrong, with a stderr tail if any.
        message: String,
    },
    /// The environment broke and could not be restarted.
    #[error("the {env} REPL failed and could not be restarted: {message}")]
    Broken {
        /// Which environment.
        env: EnvKind,
        /// What went wrong.
        message: String,
    },
    /// A request of a persistent session failed; the environment itself still works.
    #[error("the {env} REPL could not {action}: {message}")]
    Request {
        /// Which environment.
        env: EnvKind,
        /// What was asked, e.g. `load the new context`.
        action: &'static str,
        /// What went wrong.
        message: String,
    },
}

/// What every environment is, whatever the model works through: its kind, what it
/// tells the model and the user, the session it keeps (history, the next query) and
/// its lifecycle (recover, shutdown). What the model works through is one of the two
/// capability traits, [`CodeRepl`] or [`ToolBox`].
#[async_trait::async_trait]
pub trait Environment: Send {
    /// Which kind it is.
    fn kind(&self) -> EnvKind;

    /// The built-in system prompt for this environment, for the features configured.
    fn system_prompt(&self, features: PromptFeatures) -> String;

    /// What the user should hear about the environment once, e.g. that the code
    /// runs less confined than `--sandbox` asked (taken: a second call returns none).
    fn take_notices(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// Adds a query and its answer to `history` (persistent sessions).
    async fn push_history(&mut self, entry: HistoryEntry) -> Result<(), EnvError>;

    /// Starts the next query of a persistent session: `query` becomes the task and
    /// `context`, when given, is loaded into a new slot (`contexts[i]`, `context_<i>`)
    /// that `context` then points at. What the model made so far is kept.
    async fn next_query(
        &mut self,
        query: &str,
        context: Option<ContextSource>,
    ) -> Result<(), EnvError>;

    /// Brings the environment back to idle after a query was abandoned in the middle
    /// of a step (cancelled): code still running is interrupted, and the environment
    /// is restarted if it does not stop.
    async fn recover(&mut self) -> Result<(), EnvError> {
        Ok(())
    }

    /// Stops the environment and every process it started.
    async fn shutdown(&mut self);
}

/// A persistent REPL the model writes code for (`python`, `js`).
#[async_trait::async_trait]
pub trait CodeRepl: Environment {
    /// The fence tags besides `repl` whose code runs here (the first one is used when
    /// the transcript shows code back, e.g. `python`).
    fn fence_tags(&self) -> &'static [&'static str];

    /// Runs one code block; state persists across calls.
    async fn execute(&mut self, code: &str) -> Result<ExecOutcome, EnvError>;

    /// The value of a variable for `FINAL_VAR(name)` written outside code: a string as
    /// is, anything else as JSON; `None` when no such variable exists.
    async fn final_var(&mut self, name: &str) -> Result<Option<String>, EnvError>;

    /// The variables the model defined (bounded by the caller).
    async fn variables(&mut self) -> Result<Vec<ReplVariable>, EnvError>;
}

/// Tools the model calls instead of writing code (`tools`).
#[async_trait::async_trait]
pub trait ToolBox: Environment {
    /// The tools the model may call.
    fn tools(&self) -> Vec<ToolSpec>;

    /// Runs one tool call of the model; an unknown tool or bad arguments are an error
    /// result, not an `Err` (which ends the run).
    async fn call_tool(&mut self, call: &ToolCall) -> Result<ToolOutcome, EnvError>;

    /// When calls are written as text: a JSON Schema of one reply (a call object), for
    /// servers that constrain output to it (`None`: free text).
    fn response_schema(&self) -> Option<serde_json::Value> {
        None
    }

    /// Why an answer the model gives now is not taken (sent back to it), or `None` to
    /// take it. Asked of every answer, a `final_answer` call or `FINAL(...)` alike,
    /// but not of the forced last one: a run must end.
    fn refuse_answer(&mut self) -> Option<String> {
        None
    }
}

/// A started environment, by what the model works through.
pub enum Started {
    /// A code REPL: the model writes fenced code.
    Code(Box<dyn CodeRepl>),
    /// A tool box: the model calls tools.
    Tools(Box<dyn ToolBox>),
}

impl Started {
    /// The environment's lifecycle, whatever its capability.
    pub fn env(&self) -> &dyn Environment {
        match self {
            Self::Code(repl) => repl.as_ref(),
            Self::Tools(tools) => tools.as_ref(),
        }
    }

    /// The environment's lifecycle, mutably.
    pub fn env_mut(&mut self) -> &mut dyn Environment {
        match self {
            Self::Code(repl) => repl.as_mut(),
            Self::Tools(tools) => tools.as_mut(),
        }
    }

    /// The environment borrowed by capability, for one run of the loop.
    pub fn by_capability(&mut self) -> EnvMut<'_> {
        match self {
            Self::Code(repl) => EnvMut::Code(repl.as_mut()),
            Self::Tools(tools) => EnvMut::Tools(tools.as_mut()),
        }
    }
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (capability, kind) = match self {
            Self::Code(repl) => ("Code", repl.kind()),
            Self::Tools(tools) => ("Tools", tools.kind()),
        };
        f.debug_tuple(capability).field(&kind).finish()
    }
}

/// A started environment borrowed by capability (what the loop drives).
pub enum EnvMut<'a> {
    /// A code REPL.
    Code(&'a mut dyn CodeRepl),
    /// A tool box.
    Tools(&'a mut dyn ToolBox),
}

impl EnvMut<'_> {
    /// The environment's lifecycle, whatever its capability.
    pub fn env(&self) -> &dyn Environment {
        match self {
            Self::Code(repl) => &**repl,
            Self::Tools(tools) => &**tools,
        }
    }
}

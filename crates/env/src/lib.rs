//! The seam between the loop and where model code runs.
//!
//! An environment is started by an [`EnvironmentFactory`] and driven by the loop
//! through one of two small traits on a shared lifecycle ([`Environment`]): a
//! [`CodeRepl`] runs the model's code, a [`ToolBox`] answers its tool calls; it reaches back to the orchestrator through a [`Host`] for
//! everything that needs a model, the store or a sub-agent. Each kind of environment
//! is its own crate built on this one (`rlm-env-python`, `rlm-env-js`,
//! `rlm-env-tools`); the boundary types they exchange are `rlm-protocol`'s, re-exported
//! here so an environment crate needs only this one. The lifecycle of a kernel that
//! is restarted when it breaks is written once here too ([`Restartable`]).

mod environment;
mod guide;
mod host;
mod kind;
mod restartable;

pub use environment::{
    CodeRepl, EnvConfig, EnvError, EnvMut, Environment, EnvironmentFactory, Started, ToolBox,
};
pub use guide::{system_prompt, EnvGuide, PromptFeatures};
pub use host::Host;
pub use kind::EnvKind;
pub use restartable::{Kernel, KernelSeed, QueryStart, Restartable};
pub use rlm_protocol::{
    ContextShape, ContextSource, ExecOutcome, FinalAnswer, HistoryEntry, HostCall, HostError,
    HostReply, PlanArgs, PromptArgs, ReplVariable, SplitStepArgs, SubRlmArgs, ToolCall,
    ToolOutcome, ToolSpec, CHUNK_CHARS,
};

//! The types that cross rlm's boundaries, declared once for every side.
//!
//! A leaf crate: the store, the environments, the model clients and the orchestrator
//! all depend on it, and it depends on nothing of ours. What lives here is what two
//! parts tell each other — model code asking the orchestrator ([`HostCall`]), one REPL
//! step ([`ExecOutcome`], [`ToolOutcome`]), the context handed to a REPL
//! ([`ContextSource`]), what a run used ([`RunTotals`]), what a child hands back
//! ([`SubResult`]) — plus the small renderings every side writes the same way
//! (timestamps, ids, clipped text).

pub mod context;
pub mod env_vars;
pub mod format;
pub mod host_call;
pub mod ids;
pub mod memo;
pub mod repl;
pub mod reply;
pub mod sub_result;
pub mod time;
pub mod tools;
pub mod totals;

pub use context::{ContextShape, ContextSource, CHUNK_CHARS};
pub use env_vars::EnvVars;
pub use host_call::{
    AgentJob, HostCall, HostError, HostReply, PlanArgs, PromptArgs, SplitStepArgs, SubRlmArgs,
    SUMMARY_MAX_TOKENS,
};
pub use ids::{AgentId, InvalidAgentId, RunId};
pub use memo::CachedCall;
pub use repl::{ExecOutcome, FinalAnswer, HistoryEntry, ReplVariable, ToolOutcome};
pub use sub_result::{SubAnswer, SubError, SubResult};
pub use time::now_ms;
pub use tools::{ToolCall, ToolSpec};
pub use totals::{RunTotals, Usage};

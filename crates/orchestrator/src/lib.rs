//! The Recursive Language Model loop.
//!
//! The orchestrator asks a model for code, runs that code in a persistent environment
//! (a Python kernel, embedded JavaScript or micro-tools) over context held in the
//! [`rlm_context_store`], and delegates slices of the work to sub-agents running as
//! child processes. The context itself never enters a prompt: the model sees metadata
//! and variable references only.

pub mod accounting;
pub mod agents;
pub mod cache;
pub mod context;
pub mod env;
pub mod events;
pub mod format;
pub mod host;
pub mod output;
pub mod parse;
pub mod prompt;
pub mod provider;
pub mod rlm;
pub mod run;
pub mod session;
pub mod subrlm;
pub mod trace;

pub use rlm_context_store as store;

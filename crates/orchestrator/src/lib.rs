//! The Recursive Language Model loop.
//!
//! The orchestrator asks a model ([`rlm_provider`]) for code, runs that code in a
//! persistent environment (`rlm-env-python`, `rlm-env-js`, or the micro-tools of
//! `rlm-env-tools`, behind [`rlm_env`]) over context held in the [`rlm_context_store`],
//! and delegates slices of the work to sub-agents running as child processes. The
//! context itself never enters a prompt: the model sees metadata and variable
//! references only. The types that cross these boundaries live in [`rlm_protocol`];
//! the crates are re-exported here under their old module names (`provider`, `env`,
//! `protocol`, `format`, `ids`) so a library user needs this crate alone.
//!
//! The seams, each one type: [`settings::RunSettings`] (what every front door
//! chooses), [`host::HostCall`] (what model code asks of the orchestrator),
//! [`agents::ChildSpec`] / [`protocol::SubResult`] and [`agents::EnvVars`] (what a
//! parent and a nested run tell each other), [`events::EventData`] and
//! [`events::RunSummaryFile`] (what a run leaves), [`run::RunReport`] (what `--json`
//! prints). `docs/architecture.md` maps the modules.

pub mod accounting;
pub mod agent_cli;
pub mod agents;
pub mod cache;
pub mod context;
pub mod corrections;
pub mod discovery;
pub mod env;
pub mod events;
pub mod grammar;
pub mod host;
pub mod launch;
pub mod output;
pub mod parse;
pub mod prompt;
pub mod rlm;
pub mod run;
pub mod runner;
pub mod settings;
pub mod slots;
pub mod trace;
pub mod window;

pub use rlm_context_store as store;
pub use rlm_protocol as protocol;
pub use rlm_protocol::{format, ids};
pub use rlm_provider as provider;

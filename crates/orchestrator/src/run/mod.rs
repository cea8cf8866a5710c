//! One whole run: open the store, load the context, start the environment, run the
//! loop, and leave a trace (`events.jsonl`, `summary.json`) whatever happens.
//!
//! A run is a [`Session`] of one query ([`run`]); a session keeps its environment for
//! the next query (`rlm-orchestrate repl`). Bad input is detected while loading the
//! context, before any model is asked and before any stored variable is touched; it
//! comes back as [`RunError::BadInput`].

mod config;
mod found;
mod report;
mod session;

pub use config::RunConfig;
pub use report::{RunError, RunReport};
pub use session::{QueryCanceller, RunRecord, Session};

use crate::events::EventListener;

/// Runs `query` to its answer: a [`Session`] of one query, closed afterwards.
pub async fn run(
    config: RunConfig,
    query: &str,
    listeners: Vec<EventListener>,
) -> Result<RunReport, RunError> {
    let mut session = Session::start(config, listeners).await?;
    let outcome = session.query(query, None).await;
    session.close().await;
    outcome
}

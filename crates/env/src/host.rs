//! How an environment reaches the orchestrator: every helper call of model code that
//! needs a model, the store or a sub-agent goes to a [`Host`] as a [`HostCall`].

use rlm_protocol::{HostCall, HostError, HostReply};

/// Serves the host calls of model code, asynchronously and concurrently.
#[async_trait::async_trait]
pub trait Host: Send + Sync {
    /// Serves one call.
    async fn call(&self, call: HostCall) -> Result<HostReply, HostError>;
}

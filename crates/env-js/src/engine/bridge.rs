//! The host bridge: `__rlm_host(method, argsJson)` from JavaScript becomes a task on
//! the orchestrator's runtime, where providers, the store and sub-agents live, and its
//! Promise resolves with the task's reply. Calls belong to a generation: those of an
//! abandoned execution are aborted and their continuations never resume.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use tokio::runtime::Handle;
use tokio::task::AbortHandle;

use rlm_env::{Host, HostCall, HostError};

/// Host calls of the running execution, and its generation: a call started by an
/// abandoned execution never resolves.
#[derive(Default)]
pub(super) struct Calls {
    /// Grows each time an execution is abandoned.
    pub generation: u64,
    next_id: u64,
    /// Calls running, by id.
    pub in_flight: HashMap<u64, AbortHandle>,
    /// The first fatal host error of the running execution: the run must end.
    pub fatal: Option<String>,
}

/// Serves `__rlm_host(method, argsJson)`: the call runs on the orchestrator's runtime;
/// the reply is `{"ok": true, "value": …}` or `{"ok": false, "error": …}`.
#[derive(Clone)]
pub(super) struct Bridge {
    pub host: Arc<dyn Host>,
    pub main: Handle,
    pub calls: Rc<RefCell<Calls>>,
}

impl Bridge {
    /// Runs one host call and returns the reply JavaScript reads.
    pub(super) async fn call(&self, method: String, args: String) -> String {
        let args = match serde_json::from_str(&args) {
            Ok(args) => args,
            Err(e) => {
                return reply(Err(HostError::RespondToModel(format!(
                    "invalid call of {method}: {e}"
                ))))
            }
        };
        let call = match HostCall::parse(&method, args) {
            Ok(call) => call,
            Err(error) => return reply(Err(error)),
        };
        let host = Arc::clone(&self.host);
        let task = self.main.spawn(async move { host.call(call).await });
        let (generation, id) = {
            let mut calls = self.calls.borrow_mut();
            calls.next_id += 1;
            let id = calls.next_id;
            calls.in_flight.insert(id, task.abort_handle());
            (calls.generation, id)
        };
        let outcome = match task.await {
            Ok(outcome) => outcome,
            Err(error) if error.is_cancelled() => Err(HostError::RespondToModel(
                "cancelled: the execution was stopped".to_owned(),
            )),
            Err(error) => Err(HostError::Fatal(format!("a host call panicked: {error}"))),
        };
        let current = {
            let mut calls = self.calls.borrow_mut();
            calls.in_flight.remove(&id);
            if let Err(HostError::Fatal(message)) = &outcome {
                calls.fatal.get_or_insert_with(|| message.clone());
            }
            calls.generation
        };
        if current != generation {
            // The execution that made this call was abandoned: never resume it.
            std::future::pending::<()>().await;
        }
        reply(outcome)
    }
}

/// A host call's outcome as `{"ok": true, "value": …}` or `{"ok": false, "error": …}`.
fn reply(outcome: Result<serde_json::Value, HostError>) -> String {
    let value = match outcome {
        Ok(value) => serde_json::json!({ "ok": true, "value": value }),
        Err(error) => serde_json::json!({ "ok": false, "error": error.message_for_model() }),
    };
    value.to_string()
}

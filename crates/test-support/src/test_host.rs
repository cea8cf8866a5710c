//! A [`Host`] for the environment tests: it answers `llm_query` itself (`answer to
//! <prompt>`), fails on cue (`fail`, `fatal`), makes `sync:` prompts wait for each
//! other (to prove calls run concurrently), serves the store, reduces stored results
//! as `ctx_reduce` does (the plan crate's own reductions, so a REPL's helper is tested
//! against the real reductions and their errors), and records every call.
//!
//! Shared by the code-REPL conformance suite and the python- and js-only tests, so
//! every environment is driven by the same host.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use std::sync::{Arc, Mutex};

use rlm_context_store::{SetOptions, Store};
use rlm_env::{Host, HostCall, HostError, HostReply, PromptArgs};
use serde_json::{json, Value};
use tokio::sync::Barrier;

/// Prompts starting with this wait until [`BARRIER_PARTIES`] such calls are in flight.
pub const SYNC_PREFIX: &str = "sync:";
/// How many `sync:` calls must be in flight together before any is answered.
pub const BARRIER_PARTIES: usize = 4;

/// A host that answers sub-model calls itself, serves the store, and records every call.
pub struct TestHost {
    calls: Mutex<Vec<(String, Value)>>,
    barrier: Barrier,
    store: Arc<Store>,
}

impl TestHost {
    /// A host over `store`.
    pub fn new(store: Arc<Store>) -> Arc<Self> {
        Arc::new(Self {
            calls: Mutex::new(Vec::new()),
            barrier: Barrier::new(BARRIER_PARTIES),
            store,
        })
    }

    /// The arguments of every call of `method`, in order.
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, a)| a.clone())
            .collect()
    }
}

#[async_trait::async_trait]
impl Host for TestHost {
    async fn call(&self, call: HostCall) -> Result<HostReply, HostError> {
        let wire = serde_json::to_value(&call).unwrap();
        self.calls
            .lock()
            .unwrap()
            .push((call.method().to_owned(), wire["args"].clone()));
        let for_model = |e: rlm_context_store::StoreError| HostError::RespondToModel(e.to_string());
        match call {
            HostCall::LlmQuery(PromptArgs {
                prompt, context, ..
            }) => {
                if prompt == "fail" {
                    return Err(HostError::RespondToModel(
                        "the sub-model is unavailable".into(),
                    ));
                }
                if prompt == "fatal" {
                    return Err(HostError::Fatal("the store is gone".into()));
                }
                if prompt.starts_with(SYNC_PREFIX) {
                    self.barrier.wait().await;
                }
                let context = context.map(|c| format!(" with {c}"));
                Ok(json!(format!(
                    "answer to {prompt}{}",
                    context.unwrap_or_default()
                )))
            }
            HostCall::LlmQueryParallel { prompts } => Ok(Value::Array(
                prompts
                    .iter()
                    .map(|p| {
                        if p.prompt == "fail" {
                            json!({"error": "boom"})
                        } else {
                            json!(format!("answer to {}", p.prompt))
                        }
                    })
                    .collect(),
            )),
            HostCall::Summarize { text, .. } => Ok(json!(format!(
                "summary of {} chars",
                text.as_str().map_or(0, |t| t.chars().count())
            ))),
            HostCall::StoreSet { key, value } => {
                let reference = self
                    .store
                    .set(&key, value, SetOptions::default())
                    .map_err(for_model)?;
                Ok(serde_json::to_value(reference).unwrap())
            }
            HostCall::StoreList {} => Ok(serde_json::to_value(
                self.store.list(&rlm_context_store::ListFilter::default()),
            )
            .unwrap()),
            HostCall::StoreDelete { key } => {
                self.store.delete(&key).map_err(for_model)?;
                Ok(Value::Null)
            }
            HostCall::StoreGet { key } => {
                let value = self.store.get(&key).map_err(for_model)?;
                Ok(Value::clone(&value))
            }
            HostCall::StoreRef { key } => {
                let reference = self.store.reference(&key).map_err(for_model)?;
                let path = self.store.persist_for_sub_agent(&key).map_err(for_model)?;
                let mut value = serde_json::to_value(reference).unwrap();
                value["path"] = json!(path);
                Ok(value)
            }
            HostCall::PlanReduce { results, reduce } => {
                let refused = |e: rlm_plan::PlanError| HostError::RespondToModel(e.to_string());
                let reduce: rlm_plan::Reduce = serde_json::from_value(reduce)
                    .map_err(|e| refused(rlm_plan::PlanError::Json(format!("`reduce`: {e}"))))?;
                reduce.check().map_err(refused)?;
                let value = self.store.get(&results).map_err(for_model)?;
                let texts = rlm_plan::pieces::texts_to_reduce(&results, &value).map_err(refused)?;
                let answer = rlm_plan::reduce::reduce(&reduce, &texts).map_err(|e| {
                    HostError::RespondToModel(format!("the plan's reduction failed: {e}"))
                })?;
                Ok(json!({"answer": answer, "count": texts.len()}))
            }
            other => Err(HostError::RespondToModel(format!(
                "the test host does not serve {}",
                other.method()
            ))),
        }
    }
}

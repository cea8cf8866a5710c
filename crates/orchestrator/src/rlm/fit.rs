//! Every root request within the model's window: before each one the conversation is
//! fitted ([`compact::History::fit`]), each compaction is traced and its full text
//! stored, and a server's refusal of a request for being too long teaches the window
//! and is answered by fitting again and asking once more.

use std::sync::Arc;

use serde_json::Value;

use super::caller::{Caller, Offer};
use super::compact::{History, WindowTooSmall};
use super::LoopError;
use crate::accounting::Reservation;
use crate::events::{CallPurpose, CompactionRecord, EventData};
use crate::provider::{ChatMessage, ChatRequest, Completion, ToolSpec};
use crate::store::{SetOptions, Store};

/// Times one request is asked again after a refusal for length.
const REFUSAL_RETRIES: u32 = 2;

/// Where compacted steps are kept for the model to read back: a store variable.
#[derive(Clone)]
pub struct HistoryArchive {
    /// The store.
    pub store: Arc<Store>,
    /// The variable (`run-<run id>-history`).
    pub key: String,
    /// The scope it is written with (the run's own, `agent:<id>`).
    pub scope: String,
}

impl std::fmt::Debug for HistoryArchive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryArchive")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// The conversation's steps, and where their compacted text goes.
pub(super) struct Fitter {
    history: History,
    archive: Option<HistoryArchive>,
    /// Every compacted step so far, whole, as stored.
    archived: Vec<Value>,
}

impl Fitter {
    /// A fitter for a conversation whose first user message is `first_message`.
    pub(super) fn new(first_message: &str, archive: Option<HistoryArchive>) -> Self {
        Self {
            history: History::new(first_message, archive.as_ref().map(|a| a.key.clone())),
            archive,
            archived: Vec::new(),
        }
    }

    /// The steps, for marking where each begins and what it made.
    pub(super) fn history(&mut self) -> &mut History {
        &mut self.history
    }

    /// Fits `messages` (sent with `specs`) to the root model's window, tracing and
    /// storing what was compacted.
    async fn fit(
        &mut self,
        caller: Caller<'_>,
        messages: &mut Vec<ChatMessage>,
        specs: &[ToolSpec],
        iteration: u32,
    ) -> Result<(), LoopError> {
        let window = &caller.model.window;
        let request = ChatRequest {
            messages: messages.clone(),
            tools: specs.to_vec(),
            ..ChatRequest::default()
        };
        let estimate = window.estimator.request_tokens(&request);
        // A first request small beside any window goes out while the server is still
        // being asked what its window is (see ModelWindow::budget_for).
        let budget = window.budget_for(estimate).await;
        if crate::window::is_tight(estimate, budget) {
            // Near the window, the estimate is worth checking with the server's own
            // tokenizer, where it has one: once per model, and on a sample of each
            // large message (a REPL output of records, a long tool result, far denser
            // than the prompts that calibrated the estimate) — once per distinct
            // sample, a bounded number a run.
            window.calibrate_once(&request).await;
            for message in messages.iter() {
                if window.estimator.tokens_of(&message.content) * 16 > budget {
                    window.calibrate_on_text(&message.content).await;
                }
            }
        }
        let Some(compaction) = self
            .history
            .fit(messages, specs, budget, &window.estimator)?
        else {
            return Ok(());
        };
        self.archived.extend(compaction.archived.iter().cloned());
        let variable = self.store_archive().await;
        caller.sink.emit(EventData::Compacted(CompactionRecord {
            iteration,
            steps: compaction.iterations,
            tokens_before: compaction.tokens_before,
            tokens_after: compaction.tokens_after,
            budget,
            cut_chars: compaction.cut_chars,
            cut_steps: compaction.cut_steps,
            variable,
            archived: compaction.archived,
        }));
        Ok(())
    }

    /// Writes every compacted step to the archive variable; its key when written.
    async fn store_archive(&self) -> Option<String> {
        let archive = self.archive.clone()?;
        let value = Value::Array(self.archived.clone());
        let key = archive.key.clone();
        let written = tokio::task::spawn_blocking(move || {
            archive.store.set(
                &archive.key,
                value,
                SetOptions::default().scope(archive.scope),
            )
        })
        .await;
        match written {
            Ok(Ok(_)) => Some(key),
            Ok(Err(error)) => {
                tracing::warn!(%error, key, "the compacted steps could not be stored");
                None
            }
            Err(error) => {
                tracing::warn!(%error, key, "the task storing the compacted steps failed");
                None
            }
        }
    }
}

impl From<WindowTooSmall> for LoopError {
    fn from(error: WindowTooSmall) -> Self {
        Self::Window(error)
    }
}

/// Asks the root model with `messages` fitted to its window. When the server refuses
/// the request for its length, the window it names (or implies) is learned, the
/// conversation fitted again and the request asked again, at most
/// [`REFUSAL_RETRIES`] times.
pub(super) async fn ask_fitted(
    caller: Caller<'_>,
    fitter: &mut Fitter,
    messages: &mut Vec<ChatMessage>,
    offer: Offer<'_>,
    (purpose, reserved): (CallPurpose, Reservation),
    iteration: u32,
) -> Result<Completion, LoopError> {
    let mut refusals = 0;
    loop {
        fitter.fit(caller, messages, offer.specs, iteration).await?;
        let error = match caller
            .ask(messages, offer, (purpose, reserved), iteration)
            .await
        {
            Ok(completion) => return Ok(completion),
            Err(error) => error,
        };
        let request = ChatRequest {
            messages: messages.clone(),
            tools: offer.specs.to_vec(),
            ..ChatRequest::default()
        };
        let learned = caller
            .model
            .window
            .learn_from_refusal(&error, &request)
            .await;
        let Some(window) = learned.filter(|_| refusals < REFUSAL_RETRIES) else {
            return Err(error.into());
        };
        refusals += 1;
        caller.sink.emit(EventData::Warning {
            message: format!(
                "the model's server refused a request of about {} tokens as too long; its window is taken to be {window}; compacting the conversation and asking again",
                caller.model.window.estimator.request_tokens(&request)
            ),
        });
        // The refused call's reservation was released; this attempt needs its own.
        if caller.accounting.start_call(reserved).is_some() {
            return Err(error.into());
        }
    }
}

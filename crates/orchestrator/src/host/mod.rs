//! The host functions model code calls: sub-model queries, the store, sub-agents.
//!
//! Every environment hands the calls of the model's code to a [`Host`] as a typed
//! [`HostCall`] and gets a [`HostReply`] back, or a [`HostError`] that is either shown
//! to the model ([`HostError::RespondToModel`]: split the context, the budget is spent,
//! an argument is missing…) or ends the run ([`HostError::Fatal`]). [`RunHost`] serves
//! the calls of one run.

mod detached;
mod fan_out;
mod plan;
mod serve;
mod settings;
mod spawn_agent;
mod split_query;
pub(crate) mod structured;
mod sub_fit;

use std::sync::Arc;

pub use rlm_env::Host;

pub use rlm_protocol::host_call::{
    AgentJob, HostCall, HostError, HostReply, PromptArgs, SubRlmArgs, SUMMARY_MAX_TOKENS,
};
pub use serve::{
    RunHost, AGENT_STDOUT_CAP_BYTES, DEFAULT_MAX_PARALLEL, DEFAULT_SUB_CONTEXT_CHARS,
    ONE_SHOT_CONTEXT_CHARS,
};
pub use settings::{Delegation, HostSettings};

use crate::accounting::{Accounting, Reservation};
use crate::events::{CallPurpose, EventData, EventSink, LlmCall};
use crate::provider::{
    ChatMessage, ChatRequest, Completion, Constraint, DeltaSink, Prices, Provider, ProviderError,
    ResponseFormat,
};
use crate::window::ModelWindow;

/// A model with its price and its window.
#[derive(Clone)]
pub struct Model {
    /// The provider.
    pub provider: Arc<dyn Provider>,
    /// Its price, if configured.
    pub price: Option<Prices>,
    /// Its context window and token estimate.
    pub window: Arc<ModelWindow>,
}

impl Model {
    /// Asks the model within the run's deadline: a call still under way when what is
    /// left of `--max-time` runs out is abandoned, its stream with it, as
    /// [`ProviderError::OutOfTime`] (the request timeout bounds each attempt inside
    /// it). A `forced` final answer, asked after a budget was spent, is bounded by the
    /// request timeout alone.
    pub(crate) async fn complete_within(
        &self,
        request: &ChatRequest,
        on_delta: Option<DeltaSink<'_>>,
        accounting: &Accounting,
        forced: bool,
    ) -> Result<Completion, ProviderError> {
        // A request with a form to hold its reply to (a grammar, a schema, tools)
        // carries the constraint fields its server takes (`--constrain`).
        let constrained;
        let wants = request.grammar.is_some()
            || request.response_format.is_some()
            || !request.tools.is_empty();
        let request = if wants && request.constraint.is_none() {
            let constraint = self.window.constraint().await;
            constrained = ChatRequest {
                grammar: grammar_of(request, &constraint),
                response_format: format_of(request, &constraint),
                constraint: Some(constraint),
                ..request.clone()
            };
            &constrained
        } else {
            request
        };
        let call = self.provider.complete(request, on_delta);
        let Some(left) = accounting.time_left().filter(|_| !forced) else {
            return call.await;
        };
        match tokio::time::timeout(left, call).await {
            Ok(answer) => answer,
            Err(_elapsed) => Err(ProviderError::OutOfTime {
                endpoint: self.provider.describe(),
                max_time_secs: accounting.limits().max_time.map_or(0, |max| max.as_secs()),
            }),
        }
    }
}

/// The grammar `request` goes with under `constraint`: its own, or for a JSON reply
/// to a server that takes grammars and no schema, one made from the reply's schema
/// (none when the schema does not convert: the request then goes unconstrained).
fn grammar_of(request: &ChatRequest, constraint: &Constraint) -> Option<Arc<str>> {
    let (Some(format), None, Some(_), None) = (
        &request.response_format,
        &request.grammar,
        constraint.grammar,
        constraint.json_schema,
    ) else {
        return request.grammar.clone();
    };
    match crate::grammar::schema_to_gbnf(&format.schema) {
        Ok(grammar) => Some(Arc::from(grammar)),
        Err(error) => {
            tracing::warn!(%error, "a JSON reply's schema goes unconstrained");
            None
        }
    }
}

/// The reply format `request` goes with under `constraint`: its own, or for offered
/// tools on a server that returns calls as text ([`Constraint::sends_call_schema`]),
/// the schema of one call of them, so that the text is a call of a real tool.
fn format_of(request: &ChatRequest, constraint: &Constraint) -> Option<ResponseFormat> {
    if request.response_format.is_some()
        || request.tools.is_empty()
        || !constraint.sends_call_schema()
    {
        return request.response_format.clone();
    }
    Some(ResponseFormat {
        name: "call".to_owned(),
        schema: crate::provider::constrain::one_call_schema(
            &request.tools,
            request.required_tool.as_deref(),
        ),
    })
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("provider", &self.provider.describe())
            .field("price", &self.price)
            .field("window", &self.window)
            .finish()
    }
}

/// What a call of `model` with `messages` is expected to cost before it is made (its
/// prompt's estimated tokens and their price), for [`Accounting::start_call`].
pub(crate) fn expected_cost(model: &Model, messages: &[ChatMessage]) -> Reservation {
    let usage = crate::provider::Usage {
        // The window's estimate (each counted text at its own ratio), as settled usage
        // is counted when a server does not report it: dense text reserves what it costs.
        prompt_tokens: model.window.estimator.messages_tokens(messages),
        completion_tokens: 0,
    };
    Reservation {
        tokens: usage.prompt_tokens,
        cost_usd: model.price.map_or(0.0, |p| p.cost_usd(&usage)),
    }
}

/// Accounts one finished model call (tokens, cost, settling what was `reserved` for
/// it) and traces it as `llm_call`.
pub(crate) fn record_call(
    model: &Model,
    request: &ChatRequest,
    completion: &Completion,
    purpose: CallPurpose,
    (accounting, reserved): (&Accounting, Reservation),
    sink: &EventSink,
) {
    // The estimate the window was fitted with, before this call calibrates it.
    let estimated_prompt_tokens = model.window.estimator.request_tokens(request);
    // Reported, else the window's estimate (not the provider's four characters a token).
    let usage = model.window.usage_of(request, completion);
    let cost = model.price.map(|p| p.cost_usd(&usage));
    if completion.usage_reported {
        model
            .window
            .estimator
            .observe(request, completion.usage.prompt_tokens);
    }
    accounting.record_call(usage, cost, reserved);
    sink.emit(EventData::LlmCall(LlmCall {
        model: completion.model.clone(),
        purpose,
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        usage_reported: completion.usage_reported,
        latency_ms: completion.latency.as_millis() as u64,
        attempts: completion.attempts,
        request_bytes: request
            .messages
            .iter()
            .map(|m| m.content.len() as u64)
            .sum(),
        cost_usd: cost,
        estimated_prompt_tokens: Some(estimated_prompt_tokens),
    }));
}

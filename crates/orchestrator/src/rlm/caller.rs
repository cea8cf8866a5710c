//! One root-model call: the request built from the conversation and the tools it
//! offers, accounted against what was reserved for it, traced, streamed to listeners.

use crate::accounting::{Accounting, Reservation};
use crate::events::{CallPurpose, EventData, EventSink};
use crate::host::{record_call, Model};
use crate::provider::{
    ChatMessage, ChatRequest, Completion, ProviderError, ResponseFormat, ToolSpec,
};

/// What root-model calls need besides the conversation.
#[derive(Clone, Copy)]
pub(super) struct Caller<'a> {
    pub model: &'a Model,
    pub sink: &'a EventSink,
    pub accounting: &'a Accounting,
}

/// The tools a request offers, and the one it requires if any.
#[derive(Clone, Copy, Default)]
pub(super) struct Offer<'a> {
    pub specs: &'a [ToolSpec],
    pub required: Option<&'a str>,
    /// The schema the reply must follow (constrained output), if any.
    pub reply_schema: Option<&'a serde_json::Value>,
    /// The grammar of the reply (`--constrain`: a code reply's protocol), if any.
    pub grammar: Option<&'static str>,
}

impl Caller<'_> {
    /// One root-model call, accounted (settling what was `reserved` for it) and
    /// traced; the text streams to the listeners as transient `text_delta` events
    /// while it arrives.
    pub(super) async fn ask(
        self,
        messages: &[ChatMessage],
        offer: Offer<'_>,
        (purpose, reserved): (CallPurpose, Reservation),
        iteration: u32,
    ) -> Result<Completion, ProviderError> {
        let request = ChatRequest {
            messages: messages.to_vec(),
            tools: offer.specs.to_vec(),
            required_tool: offer.required.map(str::to_owned),
            response_format: offer.reply_schema.map(|schema| ResponseFormat {
                name: "step".to_owned(),
                schema: schema.clone(),
            }),
            grammar: offer.grammar.map(std::sync::Arc::from),
            // Not waited for: a first request goes out beside discovery.
            max_tokens: self.model.window.answer_limit_now(),
            ..ChatRequest::default()
        };
        let sink = self.sink;
        let on_delta = |delta: &str| {
            sink.emit_transient(EventData::TextDelta {
                iteration,
                delta: delta.to_owned(),
            })
        };
        let forced = purpose == CallPurpose::ForcedFinal;
        let completion = match self
            .model
            .complete_within(&request, Some(&on_delta), self.accounting, forced)
            .await
        {
            Ok(completion) => completion,
            Err(error) => {
                self.accounting.release(reserved);
                return Err(error);
            }
        };
        record_call(
            self.model,
            &request,
            &completion,
            purpose,
            (self.accounting, reserved),
            sink,
        );
        Ok(completion)
    }

    /// The most characters of one step's output shown to the model:
    /// `--max-output-chars`, and no more than a third of what the window leaves for the
    /// prompt.
    pub(super) async fn output_cap(self, max_output_chars: usize) -> usize {
        let window = &self.model.window;
        let (chars_per_token, _) = window.estimator.calibration();
        let third = (window.prompt_budget().await as f64 / 3.0 * chars_per_token) as usize;
        max_output_chars.min(third.max(1_000))
    }
}

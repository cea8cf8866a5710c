//! What the mock answers, before any API's shape: the text and tool calls of a reply,
//! and how streams cut them into pieces. Both body writers ([`super::wire`] for Chat
//! Completions and Messages, [`super::responses`] for the Responses API) start here.

use serde_json::Value;

use super::{Api, MockToolCall, RecordedRequest};

/// What the model answers: text and, for a tool-call reply, the calls.
pub(crate) struct Answer<'a> {
    pub(super) text: &'a str,
    /// `None` for a text reply; `Some` (even with no calls) for a tool-call reply.
    calls: Option<Vec<WireCall>>,
}

/// One tool call ready for the wire: its id settled, its arguments as text.
pub(super) struct WireCall {
    pub(super) id: String,
    pub(super) name: String,
    /// The argument text (OpenAI's `function.arguments`, Anthropic's streamed
    /// `partial_json` pieces).
    pub(super) arguments: String,
    /// The arguments as a value (a whole Anthropic body's `input`).
    pub(super) input: Value,
    /// Responses only: the call is to a custom (freeform) tool, so it goes out as a
    /// `custom_tool_call` whose `input` is `freeform`.
    pub(super) custom: bool,
    /// The text a custom tool gets (see [`MockToolCall::freeform_text`]).
    pub(super) freeform: String,
}

impl<'a> Answer<'a> {
    /// A text reply.
    pub(crate) fn text(text: &'a str) -> Self {
        Self { text, calls: None }
    }

    /// A tool-call reply to request number `request`; calls without an id get
    /// `call_<request>_<n>` (OpenAI) or `toolu_<request>_<n>` (Anthropic).
    pub(crate) fn tool_calls(
        api: Api,
        request: u64,
        text: &'a str,
        calls: &[MockToolCall],
    ) -> Self {
        let prefix = match api {
            Api::OpenAi | Api::Responses => "call",
            Api::Anthropic => "toolu",
        };
        let calls = calls
            .iter()
            .enumerate()
            .map(|(n, call)| WireCall {
                id: call
                    .id
                    .clone()
                    .unwrap_or_else(|| format!("{prefix}_{request}_{n}")),
                name: call.name.clone(),
                arguments: call.arguments_text(),
                input: call.input(),
                custom: false,
                freeform: call.freeform_text(),
            })
            .collect();
        Self {
            text,
            calls: Some(calls),
        }
    }

    /// The same answer, its calls to tools that `request` offers as Responses custom
    /// (freeform) tools marked to go out as `custom_tool_call`s.
    pub(crate) fn with_custom_tools(mut self, request: &RecordedRequest) -> Self {
        for call in self.calls.iter_mut().flatten() {
            call.custom = request.offers_custom_tool(&call.name);
        }
        self
    }

    /// Characters the model "wrote": its text, and each call's name and argument text.
    pub(super) fn completion_chars(&self) -> usize {
        let calls: usize = self
            .calls()
            .iter()
            .map(|call| call.name.chars().count() + call.arguments.chars().count())
            .sum();
        self.text.chars().count() + calls
    }

    pub(super) fn calls(&self) -> &[WireCall] {
        self.calls.as_deref().unwrap_or_default()
    }

    pub(super) fn is_tool_use(&self) -> bool {
        self.calls.is_some()
    }
}

/// Cuts an answer into stream deltas: one per word, with the whitespace that follows.
pub(super) fn split_deltas(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (index, ch) in text.char_indices() {
        if ch.is_whitespace() {
            in_space = true;
        } else if in_space {
            pieces.push(&text[start..index]);
            start = index;
            in_space = false;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// Cuts argument text into three pieces on character boundaries (fewer when it has
/// fewer characters; one empty piece when empty), so a client must join them: the cuts
/// fall wherever they fall, mid-key or mid-value.
pub(super) fn split_arguments(text: &str) -> Vec<&str> {
    let starts: Vec<usize> = text.char_indices().map(|(at, _)| at).collect();
    let parts = starts.len().clamp(1, 3);
    let mut pieces = Vec::with_capacity(parts);
    let mut from = 0;
    for part in 1..parts {
        let to = starts[starts.len() * part / parts];
        pieces.push(&text[from..to]);
        from = to;
    }
    pieces.push(&text[from..]);
    pieces
}

/// An SSE event with a name (`event: NAME`), as Anthropic and the Responses API send.
pub(super) fn named_event(name: &str, value: &Value) -> String {
    format!("event: {name}\ndata: {value}\n\n")
}

//! Lenient reading shared by the wire types of both APIs (`openai::wire`,
//! `anthropic::wire`).
//!
//! The servers rlm talks to (OpenAI, OpenRouter, vLLM, llama.cpp's server, Ollama, LM
//! Studio, Anthropic and its imitators) agree on field names but not on which fields
//! they send, nor always on their types: one omits `usage`, another sends it as `null`,
//! a third puts a list of parts where a string was expected. A response is therefore
//! read with one rule throughout: **a field that is missing, `null` or of another type
//! than expected reads as absent**, and never fails the whole response. Only what the
//! caller needs to tell apart (an `error` that is present at all, `content` that is
//! present but `null`) is kept as sent.
//!
//! The helpers below implement that rule for `#[serde(deserialize_with = …)]`; every
//! field of a wire type names one. A body is parsed into a [`Value`] first (so "not
//! JSON" is told from "JSON of another shape", and duplicate keys keep the last value,
//! as they always did), then read into its wire type with [`read`].

use serde::de::{DeserializeOwned, Deserializer};
use serde::Deserialize;
use serde_json::Value;

/// Reads `value` as the wire type `T`: an object as its fields (each read leniently),
/// anything else as `T::default()` (no field present).
pub(crate) fn read<T: DeserializeOwned + Default>(value: &Value) -> T {
    if value.is_object() {
        T::deserialize(value).unwrap_or_default()
    } else {
        T::default()
    }
}

/// A scalar field (`String`, `u64`…): a value of another type, or `null`, reads as
/// absent (`"prompt_tokens": 1.5` is no count, `"model": 7` no name).
pub(crate) fn scalar<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let value = Value::deserialize(deserializer)?;
    Ok(T::deserialize(value).ok())
}

/// A field holding an object (`usage`, `delta`, `function`…): anything but an object
/// reads as absent.
pub(crate) fn object<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let value = Value::deserialize(deserializer)?;
    Ok(value.is_object().then(|| read(&value)))
}

/// A field holding a list of objects (`choices`, `tool_calls`, content blocks): anything
/// but a list reads as empty, and an item that is not an object as an item with no
/// field present (it keeps its position, which numbers tool calls).
pub(crate) fn objects<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    Ok(match Value::deserialize(deserializer)? {
        Value::Array(items) => items.iter().map(read).collect(),
        _ => Vec::new(),
    })
}

/// A field whose presence matters even when it is `null` (an `error` member means an
/// error, whatever it holds): kept as sent, to be shown whole in messages.
pub(crate) fn present<'de, D>(deserializer: D) -> Result<Option<Value>, D::Error>
where
    D: Deserializer<'de>,
{
    Value::deserialize(deserializer).map(Some)
}

/// A message's `content`: a string, or a list of parts of which the text parts count
/// (OpenAI's content parts, Anthropic's content blocks). Anything else holds no text.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Content<P> {
    /// Plain text.
    Text(String),
    /// Typed parts, in order.
    Parts(Vec<P>),
    /// `null` or a value of another type: no text.
    #[default]
    Other,
}

impl<'de, P: DeserializeOwned + Default> Deserialize<'de> for Content<P> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(deserializer)? {
            Value::String(text) => Self::Text(text),
            Value::Array(parts) => Self::Parts(parts.iter().map(read).collect()),
            _ => Self::Other,
        })
    }
}

/// A part of a [`Content`] list that may carry text.
pub(crate) trait TextPart {
    /// Its text, when it is a text part (its `type` is `text`, or not given) with text.
    fn text(&self) -> Option<&str>;
}

impl<P: TextPart> Content<P> {
    /// The text: the string, or the text parts joined without separator.
    pub(crate) fn text(&self) -> String {
        match self {
            Self::Text(text) => text.clone(),
            Self::Parts(parts) => parts.iter().filter_map(TextPart::text).collect(),
            Self::Other => String::new(),
        }
    }
}

/// The text of a part whose `type` is `kind` and `text` is `text`: a part without a
/// (string) type counts as text, as servers that send bare `{"text": …}` parts expect.
pub(crate) fn part_text<'a>(kind: Option<&str>, text: Option<&'a str>) -> Option<&'a str> {
    if kind.is_none_or(|kind| kind == "text") {
        text
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    struct Probe {
        #[serde(default, deserialize_with = "scalar")]
        name: Option<String>,
        #[serde(default, deserialize_with = "scalar")]
        count: Option<u64>,
        #[serde(default, deserialize_with = "object")]
        inner: Option<Inner>,
        #[serde(default, deserialize_with = "objects")]
        items: Vec<Inner>,
        #[serde(default, deserialize_with = "present")]
        error: Option<Value>,
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    struct Inner {
        #[serde(default, deserialize_with = "scalar")]
        id: Option<String>,
    }

    #[test]
    fn fields_of_another_type_read_as_absent() {
        let probe: Probe = read(&json!({
            "name": 7, "count": -1, "inner": "x", "items": {"id": "a"}, "unknown": [1]
        }));
        assert_eq!(probe, Probe::default());
        let probe: Probe = read(&json!({"count": 1.5, "name": null, "inner": null}));
        assert_eq!(probe, Probe::default());
    }

    #[test]
    fn fields_of_the_right_type_are_read() {
        let probe: Probe = read(&json!({
            "name": "n", "count": 3, "inner": {"id": "i"},
            "items": [{"id": "a"}, 5, {"id": 6}], "error": null
        }));
        assert_eq!(probe.name.as_deref(), Some("n"));
        assert_eq!(probe.count, Some(3));
        assert_eq!(probe.inner.and_then(|inner| inner.id).as_deref(), Some("i"));
        let ids: Vec<Option<&str>> = probe.items.iter().map(|i| i.id.as_deref()).collect();
        assert_eq!(ids, [Some("a"), None, None]);
        assert_eq!(probe.error, Some(Value::Null));
    }

    #[test]
    fn a_body_that_is_not_an_object_has_no_fields() {
        for value in [json!(null), json!(["n", 3]), json!("text"), json!(4)] {
            assert_eq!(read::<Probe>(&value), Probe::default(), "{value}");
        }
    }

    #[derive(Debug, Default, Deserialize)]
    struct Part {
        #[serde(default, rename = "type", deserialize_with = "scalar")]
        kind: Option<String>,
        #[serde(default, deserialize_with = "scalar")]
        text: Option<String>,
    }

    impl TextPart for Part {
        fn text(&self) -> Option<&str> {
            part_text(self.kind.as_deref(), self.text.as_deref())
        }
    }

    #[test]
    fn content_is_a_string_or_its_text_parts() {
        let content = |value: Value| Content::<Part>::deserialize(value).map(|c| c.text()).ok();
        assert_eq!(content(json!("plain")).as_deref(), Some("plain"));
        let parts = json!([
            {"type": "text", "text": "a"}, {"type": "image_url", "text": "no"},
            {"text": "b"}, "c", {"type": 1, "text": "d"}, {"type": "text"}
        ]);
        assert_eq!(content(parts).as_deref(), Some("abd"));
        assert_eq!(content(json!(null)).as_deref(), Some(""));
        assert_eq!(content(json!({"text": "x"})).as_deref(), Some(""));
    }
}

/// Replaying recorded server answers through the readers a request uses, for the wire
/// tests of both APIs.
#[cfg(test)]
pub(crate) mod replay {
    use std::sync::atomic::AtomicUsize;
    use std::time::Instant;

    use serde_json::Value;

    use crate::http::{read_stream, RawCompletion, Reading, WireFormat};
    use crate::retry::AttemptError;
    use crate::{ChatMessage, ChatRequest, Completion};

    /// What the provider returns for `raw`, configured with model `configured`.
    pub(crate) fn finish(raw: RawCompletion) -> Completion {
        let request = ChatRequest {
            messages: vec![ChatMessage::user("twelve chars")],
            ..ChatRequest::default()
        };
        raw.finish(&request, "configured", Instant::now(), 1)
    }

    /// Reads a whole (non-streamed) body as `W` does.
    pub(crate) fn whole<W: WireFormat>(body: &Value) -> Result<Completion, AttemptError> {
        W::parse_body(body, "http://127.0.0.1:1/v1/test").map(finish)
    }

    /// Reads an SSE body as `W` does; also returns the text the live view was shown.
    pub(crate) fn stream<W: WireFormat>(body: &str) -> (Result<Completion, AttemptError>, String) {
        stream_within::<W>(body, crate::config::DEFAULT_MAX_REPLY_BYTES)
    }

    /// [`stream`], reading at most `max_bytes` of it.
    pub(crate) fn stream_within<W: WireFormat>(
        body: &str,
        max_bytes: u64,
    ) -> (Result<Completion, AttemptError>, String) {
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = body
            .as_bytes()
            .chunks(7)
            .map(|chunk| Ok(chunk.to_vec()))
            .collect();
        let response = http::Response::builder()
            .header("content-type", "text/event-stream")
            .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
            .map(reqwest::Response::from)
            .expect("a response built from constant parts");
        let shown = std::sync::Mutex::new(String::new());
        let sink = |delta: &str| shown.lock().expect("not poisoned").push_str(delta);
        let shown_bytes = AtomicUsize::new(0);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let reading = Reading {
            endpoint: "http://127.0.0.1:1/v1/test",
            max_bytes,
            on_delta: Some(&sink),
            shown: &shown_bytes,
        };
        let outcome = runtime.block_on(read_stream::<W>(response, reading));
        let shown = shown.into_inner().expect("not poisoned");
        (outcome.map(finish), shown)
    }

    /// An SSE body of `data:` lines, one per event.
    pub(crate) fn sse(events: &[Value]) -> String {
        events
            .iter()
            .map(|event| format!("data: {event}\n\n"))
            .collect()
    }

    /// The message of a failed read.
    pub(crate) fn failure(outcome: Result<Completion, AttemptError>) -> String {
        match outcome {
            Ok(completion) => panic!("expected a failure, got {completion:?}"),
            Err(AttemptError::Fatal(error)) => format!("fatal: {error}"),
            Err(AttemptError::Interrupted(message)) => format!("interrupted: {message}"),
            Err(other) => format!("{other:?}"),
        }
    }
}

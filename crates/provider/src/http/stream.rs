//! Reading an answer that comes as a server-sent event stream, for either API.
//!
//! The reader owns what streaming adds to a request: showing text to the live view as
//! it arrives, telling a stream that ended with its end marker from one cut short (the
//! second is retried, never passed off as a whole answer), and draining the rest so the
//! connection goes back to the pool. What each event means is the [`WireFormat`]'s
//! business.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use reqwest::Response;
use serde_json::Value;

use super::{chain, preview, protocol, RawCompletion, WireFormat};
use crate::retry::AttemptError;
use crate::DeltaSink;

/// Shown to the live view when an answer it was shown in part is asked for again, so
/// the text that follows reads as a new start rather than a continuation.
pub const RETRY_NOTICE: &str = "\n[the answer was cut short; asking again]\n";

/// A stream that broke or ended early: the server answered, so this is retried (as an
/// [`AttemptError::Interrupted`]) whether or not text was already shown; the live view
/// is told before the next attempt shows its text ([`RETRY_NOTICE`]).
pub(crate) fn stream_broken(emitted_chars: usize, message: &str) -> AttemptError {
    if emitted_chars == 0 {
        AttemptError::Interrupted(format!("the stream broke before any text: {message}"))
    } else {
        AttemptError::Interrupted(format!(
            "the stream broke after {emitted_chars} characters of the answer: {message}"
        ))
    }
}

/// Whether a stream goes on after a message.
pub(crate) enum StreamFlow {
    /// More messages may follow.
    More,
    /// The answer is complete.
    Finished,
}

/// A stream being read: the answer so far and how much of it the sink was shown.
pub(crate) struct StreamState<'a> {
    /// The answer so far.
    pub(crate) raw: RawCompletion,
    endpoint: &'a str,
    emitted_chars: usize,
    on_delta: Option<DeltaSink<'a>>,
    /// Bytes the sink was shown since the last retry notice (shared by the attempts).
    shown: &'a AtomicUsize,
}

impl StreamState<'_> {
    /// Appends answer text, showing it to the sink first.
    pub(crate) fn push_text(&mut self, text: &str) {
        if let Some(sink) = self.on_delta {
            sink(text);
            self.shown.fetch_add(text.len(), Ordering::Relaxed);
        }
        self.emitted_chars += text.chars().count();
        self.raw.text.push_str(text);
    }

    /// The stream broke: see [`stream_broken`].
    pub(crate) fn broken(&self, message: &str) -> AttemptError {
        stream_broken(self.emitted_chars, message)
    }

    /// The stream said something that cannot be read: see [`protocol`].
    pub(crate) fn protocol(&self, message: impl Into<String>) -> AttemptError {
        protocol(self.endpoint, message)
    }
}

/// How a stream that ended before its first message is described.
pub(crate) const EMPTY_STREAM: &str = "the stream ended without data";

/// How long to wait for the end of a stream after its last event, so the connection
/// goes back to the pool instead of being closed (keep-alive matters for latency).
pub(crate) const STREAM_DRAIN_MILLIS: u64 = 500;

/// Reads what is left of a finished stream (usually only the terminating chunk),
/// bounded in time; whatever happens, the answer is already complete.
pub(crate) async fn drain<S: futures::Stream + Unpin>(stream: &mut S) {
    let rest = async { while stream.next().await.is_some() {} };
    let _ = tokio::time::timeout(Duration::from_millis(STREAM_DRAIN_MILLIS), rest).await;
}

/// Reads an SSE answer until its end marker or its finishing message. A stream that
/// ends before either was cut short: its answer is incomplete, whatever it says, so the
/// attempt fails (and is retried) instead of passing half an answer off as whole.
pub(crate) async fn read_stream<W: WireFormat>(
    response: Response,
    endpoint: &str,
    on_delta: Option<DeltaSink<'_>>,
    shown: &AtomicUsize,
) -> Result<RawCompletion, AttemptError> {
    let mut events = response.bytes_stream().eventsource();
    let mut stream = StreamState {
        raw: RawCompletion::default(),
        endpoint,
        emitted_chars: 0,
        on_delta,
        shown,
    };
    let mut messages = 0_u64;
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(EventStreamError::Transport(error)) => return Err(stream.broken(&chain(&error))),
            Err(error) => return Err(protocol(endpoint, format!("invalid event stream: {error}"))),
        };
        let data = event.data.trim();
        if data.is_empty() {
            continue;
        }
        if W::DONE_MARKER == Some(data) {
            drain(&mut events).await;
            return Ok(stream.raw);
        }
        messages += 1;
        let value: Value = serde_json::from_str(data).map_err(|error| {
            protocol(
                endpoint,
                format!(
                    "a stream {} is not JSON ({error}): {}",
                    W::STREAM_ITEM,
                    preview(data)
                ),
            )
        })?;
        if let StreamFlow::Finished = W::stream_event(&event.event, &value, &mut stream)? {
            drain(&mut events).await;
            return Ok(stream.raw);
        }
    }
    let message = if messages == 0 {
        EMPTY_STREAM.to_owned()
    } else {
        format!(
            "the stream ended after {messages} {}(s) without {}",
            W::STREAM_ITEM,
            W::END_OF_STREAM
        )
    };
    Err(stream.broken(&message))
}

//! Reading an answer that comes as a server-sent event stream, for either API.
//!
//! The reader owns what streaming adds to a request: showing text to the live view as
//! it arrives, telling a stream that ended with its end marker from one cut short (the
//! second is retried, never passed off as a whole answer), bounding what it reads
//! (every byte of the stream counts toward `--max-reply-bytes`, so neither endless
//! deltas nor one endless line grow the process), and draining the rest so the
//! connection goes back to the pool. What each event means is the [`WireFormat`]'s
//! business. Time is bounded by the caller: the request timeout covers the attempt,
//! stream and all.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use reqwest::Response;
use serde_json::Value;

use super::{chain, preview, protocol, too_large, RawCompletion, Reading, WireFormat};
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

/// Why the bytes of a stream stopped coming.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// The connection failed.
    Transport(reqwest::Error),
    /// More bytes came than the reply may have.
    TooLarge,
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Transport(error) => f.write_str(&chain(error)),
            Self::TooLarge => f.write_str("the reply is larger than --max-reply-bytes"),
        }
    }
}

/// `chunks` as whole lines (each ending in `\n`, the last as it ends), up to
/// `max_bytes` read in all; past that one [`BodyError::TooLarge`], then the end.
///
/// Counted before anything is parsed, so one line that never ends is bounded too. And
/// handed on a line at a time: the SSE parser reads its buffer again from the start
/// of an unfinished line whenever more bytes come, so a long line fed in small chunks
/// would cost time quadratic in its length (a 256 KiB line in 7-byte chunks took 30 s);
/// whole lines are each read once.
pub(crate) fn bounded<S, B, E>(
    chunks: S,
    max_bytes: u64,
) -> impl Stream<Item = Result<Vec<u8>, BodyError>>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: Into<BodyError>,
{
    let lines = Lines {
        chunks: Box::pin(chunks),
        buffer: Vec::new(),
        start: 0,
        scanned: 0,
        read: 0,
        done: false,
    };
    futures::stream::unfold(lines, move |mut lines| async move {
        let item = lines.next_line(max_bytes).await?;
        Some((item, lines))
    })
}

/// The state of [`bounded`]: bytes read but not yet handed on, from `start`; `scanned`
/// is how far they were searched for a line end.
struct Lines<S> {
    chunks: std::pin::Pin<Box<S>>,
    buffer: Vec<u8>,
    start: usize,
    scanned: usize,
    read: u64,
    done: bool,
}

impl<S, B, E> Lines<S>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: Into<BodyError>,
{
    /// The next whole line, an error, or `None` at the end.
    async fn next_line(&mut self, max_bytes: u64) -> Option<Result<Vec<u8>, BodyError>> {
        loop {
            if let Some(at) = self.buffer[self.scanned..].iter().position(|&b| b == b'\n') {
                let end = self.scanned + at + 1;
                let line = self.buffer[self.start..end].to_vec();
                (self.start, self.scanned) = (end, end);
                return Some(Ok(line));
            }
            self.scanned = self.buffer.len();
            if self.done {
                let rest = self.buffer.split_off(self.start);
                self.buffer.clear();
                (self.start, self.scanned) = (0, 0);
                return (!rest.is_empty()).then_some(Ok(rest));
            }
            // What was handed on goes; the unfinished line moves to the front.
            self.buffer.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
            match self.chunks.next().await {
                Some(Ok(chunk)) => {
                    let chunk = chunk.as_ref();
                    self.read = self.read.saturating_add(chunk.len() as u64);
                    if self.read > max_bytes {
                        self.finish();
                        return Some(Err(BodyError::TooLarge));
                    }
                    self.buffer.extend_from_slice(chunk);
                }
                Some(Err(error)) => {
                    self.finish();
                    return Some(Err(error.into()));
                }
                None => self.done = true,
            }
        }
    }

    /// Nothing more is handed on.
    fn finish(&mut self) {
        self.done = true;
        self.buffer.clear();
        (self.start, self.scanned) = (0, 0);
    }
}

impl From<reqwest::Error> for BodyError {
    fn from(error: reqwest::Error) -> Self {
        Self::Transport(error)
    }
}

/// Reads an SSE answer until its end marker or its finishing message. A stream that
/// ends before either was cut short: its answer is incomplete, whatever it says, so the
/// attempt fails (and is retried) instead of passing half an answer off as whole. A
/// stream past `reading.max_bytes` fails at once ([`crate::ProviderError::ReplyTooLarge`]).
pub(crate) async fn read_stream<W: WireFormat>(
    response: Response,
    reading: Reading<'_>,
) -> Result<RawCompletion, AttemptError> {
    read_events::<W, _, _, _>(response.bytes_stream(), reading).await
}

/// [`read_stream`] over any stream of byte chunks (the fuzz tests feed it directly).
pub(crate) async fn read_events<W, S, B, E>(
    chunks: S,
    reading: Reading<'_>,
) -> Result<RawCompletion, AttemptError>
where
    W: WireFormat,
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: Into<BodyError>,
{
    let Reading {
        endpoint,
        max_bytes,
        on_delta,
        shown,
    } = reading;
    let mut events = std::pin::pin!(bounded(chunks, max_bytes).eventsource());
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
            Err(EventStreamError::Transport(BodyError::TooLarge)) => {
                return Err(too_large(endpoint, max_bytes))
            }
            Err(EventStreamError::Transport(error)) => {
                return Err(stream.broken(&error.to_string()))
            }
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

#[cfg(test)]
mod tests {
    use crate::openai::ChatCompletions;
    use crate::retry::AttemptError;
    use crate::wire::replay;
    use crate::ProviderError;

    fn too_large(outcome: Result<crate::Completion, AttemptError>) -> Option<u64> {
        match outcome {
            Err(AttemptError::Fatal(ProviderError::ReplyTooLarge { limit_bytes, .. })) => {
                Some(limit_bytes)
            }
            _ => None,
        }
    }

    #[test]
    fn a_stream_past_the_bound_fails_whether_in_many_events_or_one_endless_line() {
        let delta = serde_json::json!({"choices": [{"delta": {"content": "x".repeat(4096)}}]});
        let many = replay::sse(&vec![delta; 64]);
        let (outcome, shown) = replay::stream_within::<ChatCompletions>(&many, 64 * 1024);
        assert_eq!(too_large(outcome), Some(64 * 1024));
        assert!(shown.len() <= 64 * 1024, "{} bytes shown", shown.len());
        // One line that never ends is counted before it is parsed.
        let line = format!("data: {}", "y".repeat(256 * 1024));
        let (outcome, shown) = replay::stream_within::<ChatCompletions>(&line, 64 * 1024);
        assert_eq!(too_large(outcome), Some(64 * 1024));
        assert!(shown.is_empty());
        // Under a bound it fits, the same stream reads whole.
        let whole = many + "data: [DONE]\n\n";
        let (outcome, shown) = replay::stream_within::<ChatCompletions>(&whole, 1 << 20);
        assert_eq!(outcome.map(|c| c.text.len()).ok(), Some(64 * 4096));
        assert_eq!(shown.len(), 64 * 4096);
    }

    #[test]
    fn a_long_line_in_small_chunks_is_read_in_linear_time() {
        // A 2 MiB event in 7-byte chunks: read again from the line's start with each
        // chunk, as the SSE parser alone does, it is 10^11 bytes of scanning (hours in
        // a debug build, past any test timeout); read whole, a moment.
        let text = "z".repeat(2 << 20);
        let event = serde_json::json!({"choices": [{"delta": {"content": text}}]});
        let body = replay::sse(&[event]) + "data: [DONE]\n\n";
        let (outcome, shown) = replay::stream_within::<ChatCompletions>(&body, 8 << 20);
        assert_eq!(outcome.map(|c| c.text.len()).ok(), Some(2 << 20));
        assert_eq!(shown.len(), 2 << 20);
    }
}

//! The reader of a kernel's protocol output: one task that owns the kernel's stdout.
//!
//! It turns lines into [`Event`]s for the environment and serves `host_call`s (a task
//! each). Model code shares the kernel's process, so what arrives here is not trusted:
//! a line is read up to `max_message` bytes and no further (a flood written to the
//! protocol fd cannot grow the orchestrator's memory), and a line that is too long,
//! not JSON, lacks the kernel's token, or reuses a call id still in flight ends the
//! reading with [`Event::ProtocolError`]: the kernel is then replaced and the model
//! told, instead of waiting for a reply that will never come.

use super::error::ProtocolError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::protocol::{self, HostResult, Incoming, Ready};
use rlm_env::{Host, HostCall, HostError};

/// A message from the reader task.
#[derive(Debug)]
pub(super) enum Event {
    Ready(Ready),
    Result {
        id: u64,
        body: Value,
    },
    /// The kernel broke the protocol (see the module docs); nothing more is read.
    ProtocolError(String),
    Closed,
}

/// Host calls being served, by call id.
pub(super) type InFlight = Arc<Mutex<HashMap<u64, AbortHandle>>>;

/// The first fatal host-call error of the current execution, if any.
pub(super) type FatalSlot = Arc<Mutex<Option<String>>>;

/// Everything the reader task owns or shares.
pub(super) struct ReadLoop {
    pub stdout: BufReader<tokio::process::ChildStdout>,
    pub events: mpsc::UnboundedSender<Event>,
    pub writer: mpsc::UnboundedSender<Vec<u8>>,
    pub host: Arc<dyn Host>,
    pub in_flight: InFlight,
    pub fatal: FatalSlot,
    pub closed: Arc<AtomicBool>,
    /// The token every message of this kernel carries.
    pub token: String,
    /// The longest line accepted, in bytes (newline included).
    pub max_message: usize,
}

/// What one bounded line read found.
#[derive(Debug, PartialEq)]
pub(super) enum Line {
    /// A whole line (its newline included) is in the buffer.
    Complete,
    /// The stream ended (a partial last line, if any, is in the buffer).
    End,
    /// More than the limit arrived without a newline; the buffer holds the first bytes.
    TooLong,
}

/// Reads one line into `line` (cleared first), holding at most `max` bytes of it.
pub(super) async fn read_line_bounded<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    line.clear();
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(Line::End);
        }
        let newline = available.iter().position(|&b| b == b'\n');
        let take = newline.map_or(available.len(), |at| at + 1);
        if line.len() + take > max {
            let room = max.saturating_sub(line.len());
            line.extend_from_slice(&available[..room.min(available.len())]);
            return Ok(Line::TooLong);
        }
        line.extend_from_slice(&available[..take]);
        reader.consume(take);
        if newline.is_some() {
            return Ok(Line::Complete);
        }
    }
}

/// Reads the kernel's messages until its stdout closes or it breaks the protocol.
pub(super) async fn read_loop(mut state: ReadLoop) {
    let mut line = Vec::with_capacity(4096);
    let ending = loop {
        match read_line_bounded(&mut state.stdout, &mut line, state.max_message).await {
            Ok(Line::Complete) => {}
            Ok(Line::End) if line.is_empty() => break Event::Closed,
            Ok(Line::End) => {
                // A last line without its newline: the kernel died mid-message (or
                // model code wrote a fragment and exited). Its death is what matters.
                tracing::warn!(
                    start = %protocol::preview(&line),
                    "the Python kernel's output ended in the middle of a message"
                );
                break Event::Closed;
            }
            Err(error) => {
                tracing::warn!(%error, "could not read the Python kernel's output");
                break Event::Closed;
            }
            Ok(Line::TooLong) => {
                break Event::ProtocolError(format!(
                    "it sent a message longer than {} bytes (the limit of one REPL message), starting {:?}",
                    state.max_message,
                    protocol::preview(&line)
                ));
            }
        }
        let problem = match Incoming::parse(&line, &state.token) {
            Ok(Incoming::Ready(ready)) => {
                let _ = state.events.send(Event::Ready(ready));
                continue;
            }
            Ok(Incoming::Result { id, body }) => {
                let _ = state.events.send(Event::Result { id, body });
                continue;
            }
            Ok(Incoming::HostCall {
                call_id,
                method,
                args,
            }) => match serve_host_call(&state, call_id, HostCall::parse(&method, args)) {
                Ok(()) => continue,
                Err(problem) => problem,
            },
            Err(problem) => problem,
        };
        break Event::ProtocolError(format!("it sent {problem}"));
    };
    state.closed.store(true, Ordering::SeqCst);
    let _ = state.events.send(ending);
}

/// Serves one host call on its own task, so calls run concurrently and a slow one
/// never blocks the protocol. A call that could not be parsed is answered at once with
/// the error naming what is wrong. A call id already in flight is a protocol error
/// (two callers would wait for one answer).
fn serve_host_call(
    state: &ReadLoop,
    call_id: u64,
    call: Result<HostCall, HostError>,
) -> Result<(), ProtocolError> {
    let host = Arc::clone(&state.host);
    let writer = state.writer.clone();
    let in_flight = Arc::clone(&state.in_flight);
    let fatal = Arc::clone(&state.fatal);
    // Holding the lock while spawning makes the task's own removal wait for the insert.
    let mut calls = in_flight.lock().unwrap_or_else(PoisonError::into_inner);
    if calls.contains_key(&call_id) {
        return Err(ProtocolError::DuplicateCall { call_id });
    }
    let task = tokio::spawn({
        let in_flight = Arc::clone(&in_flight);
        async move {
            let outcome = match call {
                Ok(call) => host.call(call).await,
                Err(error) => Err(error),
            };
            if let Err(HostError::Fatal(message)) = &outcome {
                fatal
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert_with(|| message.clone());
            }
            let still_wanted = in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&call_id)
                .is_some();
            if still_wanted {
                let reply = HostResult::new(call_id, &outcome);
                let bytes = protocol::line(&reply).or_else(|error| {
                    protocol::line(&HostResult::new(
                        call_id,
                        &Err(HostError::Fatal(format!(
                            "the host's answer could not be encoded: {error}"
                        ))),
                    ))
                });
                if let Ok(bytes) = bytes {
                    let _ = writer.send(bytes);
                }
            }
        }
    });
    calls.insert(call_id, task.abort_handle());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<(Line, Vec<u8>)> {
        let mut reader = BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        let mut line = Vec::new();
        loop {
            let got = read_line_bounded(&mut reader, &mut line, max)
                .await
                .unwrap();
            let stop = got != Line::Complete;
            out.push((got, line.clone()));
            if stop {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn lines_are_read_whole_up_to_the_limit() {
        let got = lines(b"ab\ncdefg\n\nxy", 6).await;
        assert_eq!(
            got,
            vec![
                (Line::Complete, b"ab\n".to_vec()),
                (Line::Complete, b"cdefg\n".to_vec()),
                (Line::Complete, b"\n".to_vec()),
                (Line::End, b"xy".to_vec()),
            ]
        );
    }

    #[tokio::test]
    async fn a_longer_line_stops_at_the_limit() {
        let got = lines(b"ok\n0123456789\nnever", 6).await;
        assert_eq!(
            got,
            vec![
                (Line::Complete, b"ok\n".to_vec()),
                (Line::TooLong, b"012345".to_vec()),
            ]
        );
        // A line of exactly the limit (newline included) is fine; one byte more is not.
        assert_eq!(lines(b"01234\n", 6).await[0].0, Line::Complete);
        assert_eq!(lines(b"012345\n", 6).await[0].0, Line::TooLong);
    }

    proptest::proptest! {
        /// Whatever the input and limit, no line read holds more than the limit, and
        /// complete lines reassemble the input.
        #[test]
        fn never_more_than_the_limit(input in proptest::collection::vec(
            proptest::prop_oneof![proptest::strategy::Just(b'\n'), proptest::num::u8::ANY], 0..200),
            max in 1usize..40)
        {
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let got = runtime.block_on(lines(&input, max));
            let mut rebuilt = Vec::new();
            for (kind, line) in &got {
                proptest::prop_assert!(line.len() <= max);
                if *kind != Line::TooLong {
                    rebuilt.extend_from_slice(line);
                }
            }
            if got.last().map(|(k, _)| k) != Some(&Line::TooLong) {
                proptest::prop_assert_eq!(rebuilt, input);
            }
        }
    }
}

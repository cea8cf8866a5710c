//! Writing a run's trace: `events.jsonl` line by line as things happen, the same
//! events to the listeners (live view, `--events`), and `summary.json` at the end.
//!
//! A trace that cannot be written (a full disk) never stops the run. The first failed
//! write is said once, not once per event; the sink counts what it lost, and the run's
//! end (`run_finished`, `summary.json`) says the trace is incomplete and why, so a
//! reader takes the run's state as unknown rather than trusting a trace with a hole.

use rlm_context_store::private_fs::{create_dir_all_private, open_private_append};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{Event, EventData, RunSummaryFile};
use crate::ids::{AgentId, RunId};

/// Sub-directory of the data dir holding one directory per run.
pub const RUNS_DIR: &str = "runs";

/// Name of the event log in a run directory: one JSON object a line.
pub const EVENTS_FILE: &str = "events.jsonl";

/// Who a run is, stamped on each of its events.
#[derive(Debug, Clone)]
pub struct RunIdentity {
    /// Run id.
    pub run_id: RunId,
    /// Depth.
    pub depth: u32,
    /// Agent id.
    pub agent_id: AgentId,
    /// Parent agent id.
    pub parent_id: Option<AgentId>,
}

/// Receives events as they happen (live view, `--events`).
pub type EventListener = Arc<dyn Fn(&Event) + Send + Sync>;

/// Errors writing the trace.
#[derive(Debug, thiserror::Error)]
#[error("failed to {action} {}: {source}", path.display())]
pub struct TraceError {
    action: &'static str,
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

impl TraceError {
    /// `action` (e.g. `write`) failed on `path`.
    pub(crate) fn new(action: &'static str, path: PathBuf, source: std::io::Error) -> Self {
        Self {
            action,
            path,
            source,
        }
    }
}

/// Writes a run's events; cheap to clone and share.
#[derive(Clone)]
pub struct EventSink {
    identity: RunIdentity,
    dir: PathBuf,
    file: Arc<Mutex<TraceFile>>,
    listeners: Arc<Vec<EventListener>>,
    /// The fingerprint of the answer the last `final` event carried.
    final_answer: Arc<Mutex<Option<Fingerprint>>>,
}

/// `events.jsonl` and what could not be written to it.
struct TraceFile {
    file: File,
    /// Events that could not be written.
    lost: u64,
    /// Why the first of them could not.
    first_error: Option<String>,
    /// The last write failed, possibly half way through its line: the next line starts
    /// on a line of its own.
    torn: bool,
}

impl TraceFile {
    /// Appends `line` as one write; `Err` (with the error) when it was lost.
    fn append(&mut self, line: &str) -> std::io::Result<()> {
        let mut bytes = Vec::with_capacity(line.len() + 2);
        if self.torn {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        let written = self.file.write_all(&bytes);
        self.torn = written.is_err();
        written
    }
}

/// An answer's length and hash: enough to tell that `run_finished` would repeat the
/// answer of `final`, without keeping a second copy of a large answer.
type Fingerprint = (usize, u64);

fn fingerprint(answer: &str) -> Fingerprint {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    answer.hash(&mut hasher);
    (answer.len(), hasher.finish())
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl EventSink {
    /// Creates `<data_dir>/runs/<run_id>/` and opens its `events.jsonl`.
    pub fn create(
        data_dir: &Path,
        identity: RunIdentity,
        listeners: Vec<EventListener>,
    ) -> Result<Self, TraceError> {
        let dir = data_dir.join(RUNS_DIR).join(identity.run_id.as_str());
        create_dir_all_private(&dir).map_err(|e| TraceError {
            action: "create run directory",
            path: dir.clone(),
            source: e.source,
        })?;
        let path = dir.join(EVENTS_FILE);
        let file = open_private_append(&path).map_err(|e| TraceError {
            action: "open",
            path: path.clone(),
            source: e.source,
        })?;
        Ok(Self {
            identity,
            dir,
            file: Arc::new(Mutex::new(TraceFile {
                file,
                lost: 0,
                first_error: None,
                torn: false,
            })),
            listeners: Arc::new(listeners),
            final_answer: Arc::new(Mutex::new(None)),
        })
    }

    /// The run's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The run's identity.
    pub fn identity(&self) -> &RunIdentity {
        &self.identity
    }

    /// `Some(why)` once an event could not be written: how many were lost, and the
    /// first error (`run_finished` and `summary.json` carry it).
    pub fn trace_incomplete(&self) -> Option<String> {
        let trace = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let error = trace.first_error.as_ref()?;
        let plural = if trace.lost == 1 { "" } else { "s" };
        Some(format!(
            "{} event{plural} could not be written to {}: {error}",
            trace.lost,
            self.dir.join(EVENTS_FILE).display()
        ))
    }

    /// Records an event. Trace write failures are logged, never fatal to the run.
    /// Known secrets (`rlm_process::redact_secrets`) are scrubbed from what is written
    /// and from what the listeners see.
    pub fn emit(&self, mut data: EventData) {
        self.answer_once(&mut data);
        let mut event = self.stamp(data);
        let Ok(mut line) = serde_json::to_string(&event) else {
            return;
        };
        if let std::borrow::Cow::Owned(scrubbed) = rlm_process::redact_secrets(&line) {
            if let Ok(scrubbed_event) = serde_json::from_str::<Event>(&scrubbed) {
                event = scrubbed_event;
            }
            line = scrubbed;
        }
        if let Some(traced) = self.traced(&event) {
            if let Ok(traced_line) = serde_json::to_string(&traced) {
                line = traced_line;
            }
        }
        {
            let mut trace = self.file.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = trace.append(&line) {
                trace.lost += 1;
                if trace.first_error.is_none() {
                    tracing::warn!(
                        "the trace of run {} is incomplete: failed to write an event to {}: {e}; the run goes on, `runs list` will show it as unknown (free space there for later runs)",
                        self.identity.run_id,
                        self.dir.join(EVENTS_FILE).display()
                    );
                    trace.first_error = Some(e.to_string());
                }
            }
        }
        // The listeners (the terminal, `--events`) get the whole event, scrubbed.
        for listener in self.listeners.iter() {
            listener(&event);
        }
    }

    /// A run's answer travels once, in its `final` event: `run_finished` leaves out
    /// (`"answer": null`) the answer the last `final` event carried, and keeps one no
    /// `final` event did. Readers take the answer from `final` (the fold keeps it when
    /// `run_finished` has none), and traces written when both carried it still read.
    fn answer_once(&self, data: &mut EventData) {
        let mut last = self
            .final_answer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match data {
            EventData::Final(record) => *last = Some(fingerprint(&record.answer)),
            EventData::RunFinished(finished) => {
                let repeated = finished
                    .answer
                    .as_deref()
                    .is_some_and(|answer| *last == Some(fingerprint(answer)));
                if repeated {
                    finished.answer = None;
                }
            }
            _ => {}
        }
    }

    /// Tells the listeners without writing `events.jsonl`: for events too frequent to be
    /// worth keeping, such as [`EventData::TextDelta`]. Free when nobody listens.
    pub fn emit_transient(&self, data: EventData) {
        if self.listeners.is_empty() {
            return;
        }
        let event = self.stamp(data);
        for listener in self.listeners.iter() {
            listener(&event);
        }
    }

    /// The event as `events.jsonl` keeps it, when that differs: an answer too long to
    /// keep inline is stored once beside the trace (see `answer_file`); any other text
    /// (a model's reply, code, output, a message) longer than that is clipped.
    fn traced(&self, event: &Event) -> Option<Event> {
        let limit = super::ANSWER_INLINE_BYTES;
        let long = |text: &str| text.len() > limit;
        let needed = match &event.data {
            EventData::Final(record) => long(&record.answer),
            EventData::RunFinished(finished) => finished.answer.as_deref().is_some_and(long),
            EventData::Text(record) => long(&record.text),
            EventData::Code(record) => long(&record.code),
            EventData::Exec(record) => long(&record.output),
            EventData::Warning { message } | EventData::Error { message } => long(message),
            EventData::Correction(record) => long(&record.text),
            _ => false,
        };
        if !needed {
            return None;
        }
        let mut traced = event.clone();
        match &mut traced.data {
            EventData::Final(record) => {
                record.answer = super::answer_file::traced_answer(&self.dir, &record.answer);
            }
            EventData::RunFinished(finished) => {
                finished.answer = finished
                    .answer
                    .as_deref()
                    .map(|answer| super::answer_file::traced_answer(&self.dir, answer));
            }
            EventData::Text(record) => record.text = clip_traced(&record.text, limit),
            EventData::Code(record) => record.code = clip_traced(&record.code, limit),
            EventData::Exec(record) => record.output = clip_traced(&record.output, limit),
            EventData::Warning { message } | EventData::Error { message } => {
                *message = clip_traced(message, limit);
            }
            EventData::Correction(record) => record.text = clip_traced(&record.text, limit),
            _ => {}
        }
        Some(traced)
    }

    fn stamp(&self, data: EventData) -> Event {
        Event {
            run_id: self.identity.run_id.clone(),
            depth: self.identity.depth,
            agent_id: self.identity.agent_id.clone(),
            parent_id: self.identity.parent_id.clone(),
            ts_ms: now_ms(),
            data,
        }
    }

    /// Writes `summary.json` (atomically: a temp file, then a rename).
    /// A long answer is kept by reference and known secrets are scrubbed, as in
    /// [`EventSink::emit`].
    pub fn write_summary(&self, summary: &RunSummaryFile) -> Result<(), TraceError> {
        let mut summary = summary.clone();
        summary.answer = summary.answer.map(|answer| {
            let answer = super::answer_file::traced_answer(&self.dir, &answer);
            rlm_process::redact_secrets(&answer).into_owned()
        });
        summary.error = summary
            .error
            .map(|error| rlm_process::redact_secrets(&error).into_owned());
        summary.write(&self.dir)
    }
}

/// The first `limit` bytes of `text` (at a character boundary) and a note of the cut.
fn clip_traced(text: &str, limit: usize) -> String {
    let mut cut = limit.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n… [clipped in the trace: {cut} of {} bytes kept]",
        &text[..cut],
        text.len()
    )
}

pub use rlm_protocol::now_ms;

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn events_are_json_lines_with_identity() {
        let dir = tempfile::tempdir().unwrap();
        let seen = Arc::new(Mutex::new(0));
        let counter = Arc::clone(&seen);
        let identity = RunIdentity {
            run_id: RunId::generate(),
            depth: 1,
            agent_id: AgentId::parse("a1").unwrap(),
            parent_id: Some(AgentId::parse("p").unwrap()),
        };
        let sink = EventSink::create(
            dir.path(),
            identity.clone(),
            vec![Arc::new(move |_| *counter.lock().unwrap() += 1)],
        )
        .unwrap();
        sink.emit(EventData::StepStarted { iteration: 1 });
        sink.emit(EventData::Warning {
            message: "w".into(),
        });
        let text = fs::read_to_string(sink.dir().join("events.jsonl")).unwrap();
        let events: Vec<Event> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].data, EventData::StepStarted { iteration: 1 });
        assert_eq!(events[1].parent_id.as_ref().map(AgentId::as_str), Some("p"));
        assert!(text.contains("\"kind\":\"step_started\""));
        assert_eq!(*seen.lock().unwrap(), 2);
        assert_eq!(events[0].run_id, identity.run_id);
    }

    #[test]
    fn transient_events_reach_listeners_but_not_the_trace() {
        let dir = tempfile::tempdir().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let identity = RunIdentity {
            run_id: RunId::generate(),
            depth: 0,
            agent_id: AgentId::parse("root").unwrap(),
            parent_id: None,
        };
        let sink = EventSink::create(
            dir.path(),
            identity,
            vec![Arc::new(move |e: &Event| {
                log.lock().unwrap().push(e.data.clone())
            })],
        )
        .unwrap();
        sink.emit(EventData::StepStarted { iteration: 1 });
        sink.emit_transient(EventData::TextDelta {
            iteration: 1,
            delta: "Let me".into(),
        });
        let text = fs::read_to_string(sink.dir().join("events.jsonl")).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert_eq!(seen.lock().unwrap().len(), 2);
        assert!(matches!(
            &seen.lock().unwrap()[1],
            EventData::TextDelta { delta, .. } if delta == "Let me"
        ));
    }
}

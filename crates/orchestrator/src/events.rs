//! Run events: the trace every run leaves in `<data-dir>/runs/<run-id>/`.
//!
//! Each event is one JSON line in `events.jsonl`, carrying the run id, depth, agent id,
//! parent id and a timestamp, so the traces of a process tree can be stitched back
//! together. The same events can stream to stdout (`--events`) and to a live view.
//! `summary.json` is written when the run ends.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::format::UtcTime;
use crate::provider::Usage;

/// Sub-directory of the data dir holding one directory per run.
pub const RUNS_DIR: &str = "runs";

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventData {
    /// A run began.
    RunStarted {
        /// The task.
        task: String,
        /// Root model.
        model: String,
        /// Environment (`python`, …).
        env: String,
        /// Context description (metadata only).
        context: Option<Value>,
        /// Process id of the orchestrator.
        pid: u32,
    },
    /// An iteration began.
    StepStarted {
        /// 1-based iteration.
        iteration: u32,
    },
    /// Text the model wrote (outside code).
    Text {
        /// Iteration.
        iteration: u32,
        /// The text (imitated output cut).
        text: String,
    },
    /// A piece of the model's response as it streams in. Transient: listeners (the live
    /// view) see it, `events.jsonl` and `--events` do not (one per token would swamp
    /// them; the whole response is in the `text` and `code` events).
    TextDelta {
        /// Iteration.
        iteration: u32,
        /// The new text.
        delta: String,
    },
    /// A code block about to run.
    Code {
        /// Iteration.
        iteration: u32,
        /// Block index within the response.
        block: usize,
        /// The code.
        code: String,
    },
    /// A code block ran.
    Exec {
        /// Iteration.
        iteration: u32,
        /// Block index.
        block: usize,
        /// Output as shown to the model.
        output: String,
        /// Whether the code raised.
        error: bool,
        /// Whether it hit the execution timeout.
        timed_out: bool,
        /// Wall time.
        duration_ms: u64,
    },
    /// The REPL's user variables after a step.
    VariablesUpdated {
        /// Iteration.
        iteration: u32,
        /// `[{name, type_name, size, preview}]`.
        variables: Value,
    },
    /// A sub-agent process started.
    SubAgentSpawned {
        /// Its agent id.
        child_agent_id: String,
        /// `sub_rlm` or `spawn_agent`.
        mode: String,
        /// Process id.
        pid: Option<u32>,
        /// What it was asked.
        task: String,
    },
    /// A sub-agent process ended.
    SubAgentFinished {
        /// Its agent id.
        child_agent_id: String,
        /// Exit status in words.
        status: String,
        /// Wall time.
        duration_ms: u64,
        /// Tokens it reported.
        usage: Usage,
    },
    /// A model call finished.
    LlmCall {
        /// Model.
        model: String,
        /// `root`, `llm_query`, `summarize`, `forced_final`, …
        purpose: String,
        /// Prompt tokens.
        prompt_tokens: u64,
        /// Completion tokens.
        completion_tokens: u64,
        /// Whether usage was reported or estimated.
        usage_reported: bool,
        /// Wall time.
        latency_ms: u64,
        /// Attempts (retries + 1).
        attempts: u32,
        /// Bytes of the request's messages.
        request_bytes: u64,
        /// Cost, when prices are configured.
        cost_usd: Option<f64>,
    },
    /// A sub-call was answered from the cache.
    CacheHit {
        /// `llm_query`, `sub_rlm` or `spawn_agent`.
        call: String,
        /// The cache variable.
        key: String,
    },
    /// Something the user should know.
    Warning {
        /// In words.
        message: String,
    },
    /// Something failed.
    Error {
        /// In words.
        message: String,
    },
    /// The run has its answer.
    Final {
        /// The answer.
        answer: String,
        /// True when forced at the iteration or budget limit.
        forced: bool,
        /// `final`, `final_var`, `submit`, `forced`.
        source: String,
    },
    /// An iteration ended.
    StepCompleted {
        /// Iteration.
        iteration: u32,
        /// Wall time.
        duration_ms: u64,
    },
    /// The run ended.
    RunFinished {
        /// `answered`, `forced`, `failed`, `cancelled`.
        status: String,
        /// The answer, if any.
        answer: Option<String>,
        /// Iterations used.
        iterations: u32,
        /// Tokens used.
        usage: Usage,
        /// Cost, when prices are configured.
        cost_usd: Option<f64>,
        /// Wall time.
        duration_ms: u64,
    },
}

/// Model calls, tokens and cost added up from `llm_call` events: how one call counts
/// toward a run's totals, for everything that re-reads events (trace reader, live view).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CallTally {
    /// Model calls seen.
    pub llm_calls: u64,
    /// Their tokens.
    pub usage: Usage,
    /// Their cost, when any call had a price.
    pub cost_usd: Option<f64>,
}

impl CallTally {
    /// Adds `data` if it is an `llm_call`; returns whether it was one.
    pub fn add(&mut self, data: &EventData) -> bool {
        let EventData::LlmCall {
            prompt_tokens,
            completion_tokens,
            cost_usd,
            ..
        } = data
        else {
            return false;
        };
        self.llm_calls += 1;
        self.usage.add(Usage {
            prompt_tokens: *prompt_tokens,
            completion_tokens: *completion_tokens,
        });
        if let Some(cost) = cost_usd {
            *self.cost_usd.get_or_insert(0.0) += cost;
        }
        true
    }
}

/// One line of `events.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Run id.
    pub run_id: String,
    /// Depth of the run (0 = root).
    pub depth: u32,
    /// Agent id of this run's process.
    pub agent_id: String,
    /// Agent id of the parent, if any.
    pub parent_id: Option<String>,
    /// Milliseconds since the epoch.
    pub ts_ms: u64,
    /// What happened.
    #[serde(flatten)]
    pub data: EventData,
}

/// Who a run is, stamped on each of its events.
#[derive(Debug, Clone)]
pub struct RunIdentity {
    /// Run id.
    pub run_id: String,
    /// Depth.
    pub depth: u32,
    /// Agent id.
    pub agent_id: String,
    /// Parent agent id.
    pub parent_id: Option<String>,
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

/// Writes a run's events; cheap to clone and share.
#[derive(Clone)]
pub struct EventSink {
    identity: RunIdentity,
    dir: PathBuf,
    file: Arc<Mutex<BufWriter<File>>>,
    listeners: Arc<Vec<EventListener>>,
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
        let dir = data_dir.join(RUNS_DIR).join(&identity.run_id);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|source| TraceError {
                action: "create run directory",
                path: dir.clone(),
                source,
            })?;
        let path = dir.join("events.jsonl");
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(|source| TraceError {
                action: "open",
                path: path.clone(),
                source,
            })?;
        Ok(Self {
            identity,
            dir,
            file: Arc::new(Mutex::new(BufWriter::new(file))),
            listeners: Arc::new(listeners),
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

    /// Records an event. Trace write failures are logged, never fatal to the run.
    pub fn emit(&self, data: EventData) {
        let event = self.stamp(data);
        if let Ok(line) = serde_json::to_string(&event) {
            let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = writeln!(file, "{line}").and_then(|()| file.flush()) {
                tracing::warn!("failed to write event to {}: {e}", self.dir.display());
            }
        }
        for listener in self.listeners.iter() {
            listener(&event);
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

    /// Writes `summary.json` (atomically).
    pub fn write_summary(&self, summary: &Value) -> Result<(), TraceError> {
        let path = self.dir.join("summary.json");
        let tmp = self.dir.join(".summary.json.tmp");
        let text = serde_json::to_vec_pretty(summary).unwrap_or_default();
        fs::write(&tmp, text)
            .and_then(|()| fs::rename(&tmp, &path))
            .map_err(|source| TraceError {
                action: "write",
                path,
                source,
            })
    }
}

/// A new run id: UTC time (sortable) and a random suffix, e.g. `20261122-094312-3fa9c1`.
pub fn new_run_id() -> String {
    let t = UtcTime::from_ms(now_ms());
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..6];
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}-{suffix}",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_json_lines_with_identity() {
        let dir = tempfile::tempdir().unwrap();
        let seen = Arc::new(Mutex::new(0));
        let counter = Arc::clone(&seen);
        let identity = RunIdentity {
            run_id: new_run_id(),
            depth: 1,
            agent_id: "a1".into(),
            parent_id: Some("p".into()),
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
        assert_eq!(events[1].parent_id.as_deref(), Some("p"));
        assert!(text.contains("\"kind\":\"step_started\""));
        assert_eq!(*seen.lock().unwrap(), 2);
        assert_eq!(identity.run_id.len(), "20261122-094312-3fa9c1".len());
    }

    #[test]
    fn transient_events_reach_listeners_but_not_the_trace() {
        let dir = tempfile::tempdir().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let identity = RunIdentity {
            run_id: new_run_id(),
            depth: 0,
            agent_id: "root".into(),
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

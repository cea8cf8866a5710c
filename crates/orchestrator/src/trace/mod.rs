//! Reading traces back: what `rlm-orchestrate runs` lists, shows and renders.
//!
//! Every run leaves `<data-dir>/runs/<run-id>/events.jsonl` and, when it ends,
//! `summary.json` ([`crate::events`]). A run tree spans several directories: a nested
//! `sub_rlm` run (or a run started by an external agent) writes its own, naming its
//! parent's agent id as `parent_id`, and the parent's `sub_agent_spawned` event names
//! the child's agent id. This module stitches them back together:
//!
//! - [`list_runs`] reads the header of every run (its summary, or its events when the
//!   run is still going or crashed) into a [`RunListing`];
//! - [`RunListing::find`] resolves a run id or a unique prefix of one;
//! - [`load_trace`] reads one run's events into steps ([`Step`], [`StepItem`]) with
//!   its sub-agents and, beneath them, their own runs, recursively ([`RunTrace`]).
//!
//! Nothing here trusts the files: a torn or missing `summary.json`, a line that is not
//! an event, a missing directory — each becomes a [`TraceProblem`] and the rest is
//! still read. Only an unreadable `runs/` directory is an error.

mod build;
mod fold;
mod read;

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::agents::{result_key, AGENTS_DIR, PROMPT_FILE_NAME};
use crate::env::{EnvKind, ReplVariable};
use crate::events::{
    AgentMode, CacheHit, CodeRecord, CompactionRecord, CorrectionRecord, ExecRecord, FinalRecord,
    LlmCall, PlanRecord, RunStatus, SubAgentSpawned, RUNS_DIR,
};
use crate::format::Capture;
use crate::ids::{AgentId, RunId};
use rlm_context_store::Store;
use rlm_protocol::{RunTotals, Usage};

pub use crate::events::SUMMARY_FILE;
pub use fold::RunFold;
pub use read::{read_events, EventsTail, EVENTS_FILE};

/// Bytes of an external agent's prompt kept in a [`SubAgent`].
pub const PROMPT_PREVIEW_BYTES: usize = 4 * 1024;

/// Where a run stands, as a reader of its trace sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunState {
    /// It ended this way (`run_finished` or `summary.json` says so).
    Ended(RunStatus),
    /// It has not ended and its orchestrator is still alive.
    Running,
    /// It has not ended and its orchestrator is gone (killed, crashed, or on another
    /// machine), or its trace is incomplete (events could not be written: a full disk).
    Unknown,
}

impl RunState {
    /// The state in one word: `answered`, `forced`, `failed`, `cancelled`, `running`
    /// or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ended(status) => status.as_str(),
            Self::Running => "running",
            Self::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for RunState {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A file of a trace that could not be (fully) used; the rest was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceProblem {
    /// The file.
    pub path: PathBuf,
    /// 1-based line, for a line of `events.jsonl`.
    pub line: Option<usize>,
    /// What is wrong and what was done about it.
    pub message: String,
}

impl TraceProblem {
    fn file(path: &Path, message: String) -> Self {
        Self {
            path: path.to_owned(),
            line: None,
            message,
        }
    }
}

impl std::fmt::Display for TraceProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

/// Why runs could not be listed or found.
#[derive(Debug, thiserror::Error)]
pub enum TraceReadError {
    /// The `runs/` directory exists but cannot be read.
    #[error("failed to read the runs directory {}: {source}", path.display())]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// No run id starts with the query.
    #[error("no run {query:?} in {}", runs_dir.display())]
    NotFound {
        /// What was asked for.
        query: String,
        /// Where runs were looked for.
        runs_dir: PathBuf,
    },
    /// Several run ids start with the query.
    #[error("{query:?} matches {} runs: {}", matches.len(), matches.join(", "))]
    Ambiguous {
        /// What was asked for.
        query: String,
        /// The matching run ids (newest first).
        matches: Vec<String>,
    },
}

/// Where a [`RunSummary`]'s numbers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SummarySource {
    /// `summary.json`, written when the run ended.
    Summary,
    /// Added up from `events.jsonl` (a running, crashed or torn run).
    Events,
}

/// One run at a glance (a row of `runs list`). Totals include the run's descendants,
/// as the run itself accounts them.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    /// The run id (its directory's name).
    pub run_id: RunId,
    /// The run directory.
    pub dir: PathBuf,
    /// Agent id of the run's process.
    pub agent_id: Option<AgentId>,
    /// Agent id of the parent, for nested runs.
    pub parent_id: Option<AgentId>,
    /// 0 for a root run.
    pub depth: u32,
    /// The task.
    pub task: Option<String>,
    /// The root model, as configured.
    pub model: Option<String>,
    /// Start, in ms since the epoch.
    pub started_ms: Option<u64>,
    /// How it ended, or whether it is still running.
    pub status: RunState,
    /// The answer, if there is one (a crashed run may have one without an ending).
    pub answer: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// Iterations used.
    pub iterations: u32,
    /// Model calls, sub-agents, tokens and cost, descendants included (top-level
    /// fields on the wire).
    #[serde(flatten)]
    pub totals: RunTotals,
    /// Wall time, once ended.
    pub duration_ms: Option<u64>,
    /// Where the numbers come from.
    pub source: SummarySource,
    /// Process id of the orchestrator.
    pub pid: Option<u32>,
}

impl RunSummary {
    /// True while the run has no ending and its orchestrator lives.
    pub fn is_running(&self) -> bool {
        self.status == RunState::Running
    }
}

/// Every run of a data directory, newest first.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunListing {
    /// The `runs/` directory read.
    pub runs_dir: PathBuf,
    /// The runs, newest first (children included).
    pub runs: Vec<RunSummary>,
    /// Files that could not be fully used.
    pub problems: Vec<TraceProblem>,
}

impl RunListing {
    /// True for a run that is not the child of another listed run: a root run, or a
    /// nested run whose parent's trace is gone.
    pub fn is_top_level(&self, run: &RunSummary) -> bool {
        match &run.parent_id {
            None => true,
            Some(parent) => !self
                .runs
                .iter()
                .any(|r| r.agent_id.as_ref() == Some(parent)),
        }
    }

    /// The top-level runs, newest first.
    pub fn top_level(&self) -> Vec<&RunSummary> {
        self.runs.iter().filter(|r| self.is_top_level(r)).collect()
    }

    /// The run whose id is `query` or, failing that, the only one starting with it.
    pub fn find(&self, query: &str) -> Result<&RunSummary, TraceReadError> {
        if let Some(run) = self.runs.iter().find(|r| r.run_id.as_str() == query) {
            return Ok(run);
        }
        let matches: Vec<&RunSummary> = self
            .runs
            .iter()
            .filter(|r| !query.is_empty() && r.run_id.as_str().starts_with(query))
            .collect();
        match matches.as_slice() {
            [one] => Ok(one),
            [] => Err(TraceReadError::NotFound {
                query: query.to_owned(),
                runs_dir: self.runs_dir.clone(),
            }),
            many => Err(TraceReadError::Ambiguous {
                query: query.to_owned(),
                matches: many.iter().map(|r| r.run_id.to_string()).collect(),
            }),
        }
    }

    /// The run started as the sub-agent `child_agent_id` of `parent`.
    fn runs_of_agent(&self, parent: &RunSummary, child_agent_id: &AgentId) -> Vec<&RunSummary> {
        self.runs
            .iter()
            .filter(|r| {
                r.agent_id.as_ref() == Some(child_agent_id)
                    && (r.parent_id.is_none() || r.parent_id == parent.agent_id)
            })
            .collect()
    }
}

/// Reads the header of every run under `<data_dir>/runs/`. A data directory without
/// runs (or that does not exist) gives an empty listing.
pub fn list_runs(data_dir: &Path) -> Result<RunListing, TraceReadError> {
    let runs_dir = data_dir.join(RUNS_DIR);
    let entries = match std::fs::read_dir(&runs_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(RunListing {
                runs_dir,
                ..RunListing::default()
            })
        }
        Err(source) => {
            return Err(TraceReadError::ReadDir {
                path: runs_dir,
                source,
            })
        }
    };
    let mut problems = Vec::new();
    let mut headers = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| TraceReadError::ReadDir {
            path: runs_dir.clone(),
            source,
        })?;
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let name = entry.file_name();
        let Some(run_id) = name.to_str().filter(|n| is_dir && !n.starts_with('.')) else {
            continue;
        };
        headers.push(build::read_header(run_id, &path, &mut problems));
    }
    let runs = build::roll_up(headers);
    Ok(RunListing {
        runs_dir,
        runs,
        problems,
    })
}

/// A run in full: its summary, its steps and, beneath their sub-agents, the runs
/// those started.
#[derive(Debug, Clone, Serialize)]
pub struct RunTrace {
    /// The run at a glance.
    #[serde(flatten)]
    pub summary: RunSummary,
    /// Where the model's code ran.
    pub env: Option<EnvKind>,
    /// The context's description (metadata only).
    pub context: Option<Value>,
    /// The iterations, in order.
    pub steps: Vec<Step>,
    /// Events outside every step: the forced final answer, stop warnings, errors
    /// before the first step.
    pub outside_steps: Vec<StepItem>,
    /// Runs naming this one as their parent that no sub-agent of it accounts for.
    pub other_children: Vec<RunTrace>,
    /// Files of this run that could not be fully used.
    pub problems: Vec<TraceProblem>,
}

impl RunTrace {
    /// This run and every descendant run, depth first.
    pub fn walk(&self) -> Vec<&RunTrace> {
        let mut all = vec![self];
        for child in self.child_runs() {
            all.extend(child.walk());
        }
        all
    }

    /// The runs directly beneath this one (through its sub-agents, then the others).
    pub fn child_runs(&self) -> impl Iterator<Item = &RunTrace> {
        self.sub_agents()
            .flat_map(|a| a.runs.iter())
            .chain(self.other_children.iter())
    }

    /// This run's sub-agents, in the order they started.
    pub fn sub_agents(&self) -> impl Iterator<Item = &SubAgent> {
        agents_in(&self.steps, &self.outside_steps)
    }

    fn sub_agents_mut(&mut self) -> impl Iterator<Item = &mut SubAgent> {
        self.steps
            .iter_mut()
            .flat_map(|s| s.items.iter_mut())
            .chain(self.outside_steps.iter_mut())
            .filter_map(StepItem::as_sub_agent_mut)
    }
}

/// One iteration of the loop.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// 1-based iteration.
    pub iteration: u32,
    /// Start, in ms since the epoch.
    pub started_ms: Option<u64>,
    /// Wall time, once completed.
    pub duration_ms: Option<u64>,
    /// What happened, in order.
    pub items: Vec<StepItem>,
}

impl Step {
    /// Tokens of the model calls made in this step (not those of sub-agents).
    pub fn usage(&self) -> Usage {
        let mut usage = Usage::default();
        for item in &self.items {
            if let StepItem::LlmCall(call) = item {
                usage.add(call.usage());
            }
        }
        usage
    }
}

/// The sub-agents among `steps` and `outside`, in order.
fn agents_in<'a>(steps: &'a [Step], outside: &'a [StepItem]) -> impl Iterator<Item = &'a SubAgent> {
    steps
        .iter()
        .flat_map(|s| s.items.iter())
        .chain(outside.iter())
        .filter_map(StepItem::as_sub_agent)
}

/// Something that happened in a step: the payload of the event it comes from.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepItem {
    /// A model call (the root turn, or a sub-call from code).
    LlmCall(LlmCall),
    /// What the model wrote.
    Text {
        /// The response as the transcript kept it.
        text: String,
        /// The same without the code blocks that ran (those are [`StepItem::Code`]).
        prose: String,
    },
    /// A code block about to run.
    Code(CodeRecord),
    /// What a code block printed (as shown to the model).
    Output(ExecRecord),
    /// The REPL's user variables after the step.
    Variables {
        /// What the model defined.
        variables: Vec<ReplVariable>,
    },
    /// A sub-agent: a nested run or an external agent.
    SubAgent(SubAgent),
    /// A sub-call answered from the cache.
    CacheHit(CacheHit),
    /// Older steps were compacted to fit the model's window.
    Compacted(CompactionRecord),
    /// A moment of a combinator plan.
    Plan(PlanRecord),
    /// A correction the model was sent.
    Correction(CorrectionRecord),
    /// A warning.
    Warning {
        /// In words.
        message: String,
    },
    /// An error.
    Error {
        /// In words.
        message: String,
    },
    /// The final answer.
    Final(FinalRecord),
}

impl StepItem {
    /// The sub-agent, if this is one.
    pub fn as_sub_agent(&self) -> Option<&SubAgent> {
        if let Self::SubAgent(agent) = self {
            Some(agent)
        } else {
            None
        }
    }

    /// The sub-agent, mutably, if this is one.
    pub fn as_sub_agent_mut(&mut self) -> Option<&mut SubAgent> {
        if let Self::SubAgent(agent) = self {
            Some(agent)
        } else {
            None
        }
    }

    /// The code block, if this is one.
    pub fn as_code(&self) -> Option<&CodeRecord> {
        if let Self::Code(record) = self {
            Some(record)
        } else {
            None
        }
    }

    /// What a block printed, if this is that.
    pub fn as_output(&self) -> Option<&ExecRecord> {
        if let Self::Output(record) = self {
            Some(record)
        } else {
            None
        }
    }
}

/// A sub-agent started from a step: a nested `sub_rlm` run or an external agent.
#[derive(Debug, Clone, Serialize)]
pub struct SubAgent {
    /// Its agent id.
    pub agent_id: AgentId,
    /// How it runs.
    pub mode: AgentMode,
    /// What it was asked.
    pub task: String,
    /// Start, in ms since the epoch.
    pub spawned_ms: u64,
    /// How it ended, in words; `None` while it runs (or if its parent died first).
    pub status: Option<String>,
    /// Wall time, once ended.
    pub duration_ms: Option<u64>,
    /// Tokens it reported (descendants included).
    pub usage: Option<Usage>,
    /// An external agent's prompt file (`agents/<id>/prompt.txt`), when kept.
    pub prompt_file: Option<PathBuf>,
    /// The start of that prompt.
    pub prompt_preview: Option<String>,
    /// The start of its result variable (`sub-result-<id>`), when asked for
    /// ([`attach_agent_results`]).
    pub result_preview: Option<String>,
    /// True when the result is longer than its preview.
    pub result_truncated: bool,
    /// The runs it started: the nested run of a `sub_rlm`, or runs an external agent
    /// started itself.
    pub runs: Vec<RunTrace>,
}

impl SubAgent {
    /// A sub-agent as its `sub_agent_spawned` event (at `ts_ms`) describes it.
    pub fn spawned(event: &SubAgentSpawned, ts_ms: u64) -> Self {
        Self {
            agent_id: event.child_agent_id.clone(),
            mode: event.mode,
            task: event.task.clone(),
            spawned_ms: ts_ms,
            status: None,
            duration_ms: None,
            usage: None,
            prompt_file: None,
            prompt_preview: None,
            result_preview: None,
            result_truncated: false,
            runs: Vec::new(),
        }
    }
}

/// Reads `run` in full, with the runs beneath it (found in `listing`).
pub fn load_trace(listing: &RunListing, run: &RunSummary) -> RunTrace {
    let mut seen = HashSet::new();
    load_recursive(listing, run, &mut seen)
}

fn load_recursive<'a>(
    listing: &'a RunListing,
    run: &'a RunSummary,
    seen: &mut HashSet<&'a str>,
) -> RunTrace {
    seen.insert(run.run_id.as_str());
    let data_dir = listing.runs_dir.parent().unwrap_or(Path::new("."));
    let mut trace = build::read_trace(run, data_dir);
    let mut linked: HashSet<&str> = HashSet::new();
    for agent in trace.sub_agents_mut() {
        for child in listing.runs_of_agent(run, &agent.agent_id) {
            if seen.contains(child.run_id.as_str()) {
                continue;
            }
            linked.insert(child.run_id.as_str());
            agent.runs.push(load_recursive(listing, child, seen));
        }
        agent.runs.sort_by_key(|r| r.summary.started_ms);
    }
    // Runs naming this run's agent as parent, started while it ran, that no spawn
    // event accounts for (a torn trace, or an older binary).
    let window = (
        run.started_ms.unwrap_or(0),
        run.started_ms
            .zip(run.duration_ms)
            .map_or(u64::MAX, |(s, d)| s + d),
    );
    let others: Vec<&RunSummary> = listing
        .runs
        .iter()
        .filter(|r| {
            r.parent_id.is_some()
                && r.parent_id == run.agent_id
                && !linked.contains(r.run_id.as_str())
                && !seen.contains(r.run_id.as_str())
                && r.started_ms.is_some_and(|t| t >= window.0 && t <= window.1)
        })
        .collect();
    for child in others.into_iter().rev() {
        trace
            .other_children
            .push(load_recursive(listing, child, seen));
    }
    trace
}

/// Fills in the result previews of the sub-agents in `trace` (and beneath it) from
/// the store: at most `max_bytes` of `sub-result-<id>` each. Sub-agents whose own run
/// is in the trace are skipped: that run shows their answer.
pub fn attach_agent_results(trace: &mut RunTrace, store: &Store, max_bytes: usize) {
    for agent in trace.sub_agents_mut() {
        let key = result_key(&agent.agent_id);
        if agent.runs.is_empty() && store.has(&key) {
            let mut capture = Capture::new(max_bytes);
            let result = store.write_value_to(&key, &mut capture, true);
            if result.is_ok() || capture.is_full() {
                agent.result_truncated = capture.is_full();
                agent.result_preview = Some(capture.into_string());
            }
        }
        for run in &mut agent.runs {
            attach_agent_results(run, store, max_bytes);
        }
    }
    for run in &mut trace.other_children {
        attach_agent_results(run, store, max_bytes);
    }
}

/// The prompt file of the external agent `agent_id`, and its first bytes.
fn agent_prompt(data_dir: &Path, agent_id: &AgentId) -> (Option<PathBuf>, Option<String>) {
    let path = data_dir
        .join(AGENTS_DIR)
        .join(agent_id.as_str())
        .join(PROMPT_FILE_NAME);
    let Ok(file) = std::fs::File::open(&path) else {
        return (None, None);
    };
    let mut capture = Capture::new(PROMPT_PREVIEW_BYTES);
    let preview = io::copy(
        &mut io::Read::take(file, PROMPT_PREVIEW_BYTES as u64 + 1),
        &mut capture,
    );
    let full = capture.is_full();
    let mut text = capture.into_string();
    if preview.is_err() && !full {
        return (Some(path), None);
    }
    if full {
        text.push('…');
    }
    (Some(path), Some(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{
        AnswerSource, CallPurpose, EventData, EventSink, RunIdentity, RunStarted, RunSummaryFile,
        SUMMARY_FORMAT_VERSION,
    };

    fn id(agent: &str) -> AgentId {
        AgentId::parse(agent).unwrap()
    }

    fn sink(data: &Path, run_id: &str, agent: &str, parent: Option<&str>, depth: u32) -> EventSink {
        let identity = RunIdentity {
            run_id: RunId::from(run_id),
            depth,
            agent_id: id(agent),
            parent_id: parent.map(id),
        };
        let sink = EventSink::create(data, identity, Vec::new()).unwrap();
        sink.emit(EventData::RunStarted(RunStarted {
            task: format!("task of {run_id}"),
            model: "m".into(),
            env: EnvKind::Python,
            context: None,
            // No such process: a run without an ending is not running.
            pid: u32::MAX,
            context_window: None,
            sub_context_window: None,
        }));
        sink
    }

    fn call(sink: &EventSink, prompt_tokens: u64) {
        sink.emit(EventData::LlmCall(LlmCall {
            model: "m".into(),
            purpose: CallPurpose::Root,
            prompt_tokens,
            completion_tokens: 1,
            usage_reported: true,
            latency_ms: 1,
            attempts: 1,
            request_bytes: 10,
            cost_usd: Some(0.5),
            estimated_prompt_tokens: None,
        }));
    }

    /// A parent that crashed in its first step while its nested run was going: the
    /// parent has no summary, the child finished with one.
    fn crashed_tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let parent = sink(dir.path(), "20251122-090000-aaaaaa", "root-1", None, 0);
        parent.emit(EventData::StepStarted { iteration: 1 });
        call(&parent, 100);
        parent.emit(EventData::Code(CodeRecord {
            iteration: 1,
            block: 0,
            code: "x = sub_rlm('q')".into(),
        }));
        parent.emit(EventData::SubAgentSpawned(SubAgentSpawned {
            child_agent_id: id("c1"),
            mode: AgentMode::SubRlm,
            pid: None,
            task: "q".into(),
        }));
        let child = sink(
            dir.path(),
            "20251122-090001-bbbbbb",
            "c1",
            Some("root-1"),
            1,
        );
        child.emit(EventData::StepStarted { iteration: 1 });
        call(&child, 10);
        child.emit(EventData::Final(FinalRecord {
            answer: "42".into(),
            forced: false,
            source: AnswerSource::Final,
        }));
        child
            .write_summary(&RunSummaryFile {
                format_version: SUMMARY_FORMAT_VERSION,
                run_id: RunId::from("20251122-090001-bbbbbb"),
                agent_id: id("c1"),
                parent_id: Some(id("root-1")),
                depth: 1,
                status: RunStatus::Answered,
                answer: Some("42".into()),
                error: None,
                iterations: 1,
                totals: RunTotals {
                    llm_calls: 1,
                    sub_agents: 0,
                    usage: Usage {
                        prompt_tokens: 10,
                        completion_tokens: 1,
                    },
                    cost_usd: Some(0.5),
                },
                duration_ms: 7,
                trace_incomplete: None,
            })
            .unwrap();
        dir
    }

    #[test]
    fn a_crashed_parent_is_added_up_from_its_events_and_its_child() {
        let dir = crashed_tree();
        let listing = list_runs(dir.path()).unwrap();
        assert!(listing.problems.is_empty(), "{:?}", listing.problems);
        assert_eq!(listing.runs.len(), 2);
        // Newest first.
        assert_eq!(listing.runs[0].run_id.as_str(), "20251122-090001-bbbbbb");
        let parent = listing.find("20251122-0900").unwrap_err();
        assert!(matches!(parent, TraceReadError::Ambiguous { .. }));
        let parent = listing.find("20251122-090000").unwrap();
        assert_eq!(parent.status, RunState::Unknown);
        assert_eq!(parent.source, SummarySource::Events);
        assert_eq!(
            parent.task.as_deref(),
            Some("task of 20251122-090000-aaaaaa")
        );
        assert_eq!(parent.iterations, 1);
        // Its own call and its child's, which never reported back.
        assert_eq!(parent.totals.llm_calls, 2);
        assert_eq!(parent.totals.sub_agents, 1);
        assert_eq!(parent.totals.usage.prompt_tokens, 110);
        assert_eq!(parent.totals.cost_usd, Some(1.0));
        let top: Vec<&str> = listing
            .top_level()
            .iter()
            .map(|r| r.run_id.as_str())
            .collect();
        assert_eq!(top, ["20251122-090000-aaaaaa"]);
        assert!(matches!(
            listing.find("2030"),
            Err(TraceReadError::NotFound { .. })
        ));
    }

    #[test]
    fn a_trace_nests_the_child_run_beneath_its_sub_agent() {
        let dir = crashed_tree();
        let listing = list_runs(dir.path()).unwrap();
        let parent = listing.find("20251122-090000").unwrap();
        let trace = load_trace(&listing, parent);
        assert_eq!(trace.steps.len(), 1);
        let agents: Vec<&SubAgent> = trace.sub_agents().collect();
        assert_eq!(agents.len(), 1);
        assert_eq!(agents[0].status, None, "the parent died before it ended");
        assert_eq!(agents[0].runs.len(), 1);
        let child = &agents[0].runs[0];
        assert_eq!(child.summary.answer.as_deref(), Some("42"));
        assert!(matches!(
            child.steps[0].items.last(),
            Some(StepItem::Final(record)) if record.answer == "42"
        ));
        assert_eq!(trace.walk().len(), 2);
        assert!(trace.other_children.is_empty());
    }

    #[test]
    fn a_missing_runs_dir_is_an_empty_listing() {
        let dir = tempfile::tempdir().unwrap();
        let listing = list_runs(&dir.path().join("nope")).unwrap();
        assert!(listing.runs.is_empty());
        assert!(!dir.path().join("nope").exists());
    }
}

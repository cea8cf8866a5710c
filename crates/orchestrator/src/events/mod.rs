//! Run events: the trace every run leaves in `<data-dir>/runs/<run-id>/`.
//!
//! Each event is one JSON line in `events.jsonl` ([`Event`]: the run's identity, a
//! timestamp and what happened, [`EventData`]), so the traces of a process tree can be
//! stitched back together. The same events stream to stdout (`--events`) and to the
//! live view; [`crate::trace`] reads them back. `summary.json` ([`RunSummaryFile`]) is
//! written when the run ends.
//!
//! The payload of each event kind is a struct of its own ([`LlmCall`], [`ExecRecord`],
//! …) so that what reads a trace back ([`crate::trace::StepItem`]) holds the very same
//! type instead of a mirror of it. Words that are really choices — a run's status, where
//! an answer came from, why a model was called, how a sub-agent runs — are enums.

mod answer_file;
mod sink;
mod summary;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use answer_file::{stored_answer, ANSWER_FILE, ANSWER_INLINE_BYTES};
pub use sink::{now_ms, EventListener, EventSink, RunIdentity, TraceError, EVENTS_FILE, RUNS_DIR};
pub use summary::{RunSummaryFile, SUMMARY_FILE, SUMMARY_FORMAT_VERSION};

use crate::env::{EnvKind, ReplVariable};
use crate::ids::{AgentId, RunId};
use crate::provider::{ContextWindow, Usage};
use rlm_protocol::RunTotals;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The model gave its answer.
    Answered,
    /// The answer was forced at the iteration or budget limit.
    Forced,
    /// The run failed (model unreachable, the REPL broke, …); see its `error` event.
    Failed,
    /// Ctrl-C or SIGTERM ended it.
    Cancelled,
}

impl RunStatus {
    /// The status as written in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Answered => "answered",
            Self::Forced => "forced",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// True when the run has an answer (forced or not).
    pub fn has_answer(self) -> bool {
        match self {
            Self::Answered | Self::Forced => true,
            Self::Failed | Self::Cancelled => false,
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a final answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerSource {
    /// `FINAL(answer)` written outside code.
    Final,
    /// `FINAL_VAR(name)`, outside code or called from code.
    FinalVar,
    /// `SUBMIT({...})` called from code.
    Submit,
    /// The `final_answer` tool (`--env tools`).
    FinalAnswerTool,
    /// The last prompt forced it (iterations or a budget ran out).
    Forced,
}

impl AnswerSource {
    /// The source as written in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Final => "final",
            Self::FinalVar => "final_var",
            Self::Submit => "submit",
            Self::FinalAnswerTool => "final_answer_tool",
            Self::Forced => "forced",
        }
    }
}

impl std::fmt::Display for AnswerSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a model was called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallPurpose {
    /// A turn of the root model.
    Root,
    /// The last turn, forcing an answer.
    ForcedFinal,
    /// `llm_query` / `llm_query_parallel` from code.
    LlmQuery,
    /// `summarize` from code.
    Summarize,
    /// `sub_rlm` at the maximum depth: one plain call instead of a nested run.
    SubRlmOneShot,
}

impl CallPurpose {
    /// The purpose as written in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Root => "root",
            Self::ForcedFinal => "forced_final",
            Self::LlmQuery => "llm_query",
            Self::Summarize => "summarize",
            Self::SubRlmOneShot => "sub_rlm_one_shot",
        }
    }

    /// The helper that made a call of this purpose, as the model knows it (for
    /// messages to the model).
    pub fn helper(self) -> &'static str {
        match self {
            Self::Root | Self::ForcedFinal => "the root model's turn",
            Self::LlmQuery => "llm_query",
            Self::Summarize => "summarize",
            Self::SubRlmOneShot => "sub_rlm (a plain sub-model call at the maximum depth)",
        }
    }
}

impl std::fmt::Display for CallPurpose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a sub-agent runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentMode {
    /// A nested `rlm-orchestrate run` (`sub_rlm`).
    SubRlm,
    /// The external agent command (`spawn_agent`).
    SpawnAgent,
}

impl AgentMode {
    /// The mode as written in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SubRlm => "sub_rlm",
            Self::SpawnAgent => "spawn_agent",
        }
    }
}

impl std::fmt::Display for AgentMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

pub use rlm_protocol::CachedCall;

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventData {
    /// A run began.
    RunStarted(RunStarted),
    /// A model's window became known after `run_started` (its server was asked beside
    /// the run's first request).
    WindowFound(WindowFound),
    /// An iteration began.
    StepStarted {
        /// 1-based iteration.
        iteration: u32,
    },
    /// Text the model wrote (outside code; imitated REPL output cut).
    Text(TextRecord),
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
    Code(CodeRecord),
    /// A code block ran.
    Exec(ExecRecord),
    /// The REPL's user variables after a step.
    VariablesUpdated {
        /// Iteration.
        iteration: u32,
        /// What the model defined, as the inventory shows it.
        variables: Vec<ReplVariable>,
    },
    /// A sub-agent process started.
    SubAgentSpawned(SubAgentSpawned),
    /// A sub-agent process ended.
    SubAgentFinished(SubAgentFinished),
    /// A model call finished.
    LlmCall(LlmCall),
    /// A sub-call was answered from the cache.
    CacheHit(CacheHit),
    /// Older steps of the root conversation were compacted to fit the model's window.
    Compacted(CompactionRecord),
    /// A combinator plan (`map_reduce`) was priced, refused, ran a leaf, or finished.
    Plan(PlanRecord),
    /// A correction rule said something to the model (docs/loop.md).
    Correction(CorrectionRecord),
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
    Final(FinalRecord),
    /// An iteration ended.
    StepCompleted {
        /// Iteration.
        iteration: u32,
        /// Wall time.
        duration_ms: u64,
    },
    /// The run ended.
    RunFinished(RunFinished),
}

/// `correction`: a rule of `--corrections` fired, and what the model was sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorrectionRecord {
    /// The iteration it fired in (the forced answer's counts one past the last).
    pub iteration: u32,
    /// The rule's name (`truncated_reply`, `value_block`…).
    pub rule: String,
    /// Where in the turn.
    pub hook: CorrectionHook,
    /// What it did.
    pub verdict: CorrectionVerdict,
    /// The exact text the model was sent.
    pub text: String,
}

/// A hook point of the loop where corrections are asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CorrectionHook {
    /// The reply was parsed.
    OnReply,
    /// A code block or a tool call is about to run.
    BeforeBlock,
    /// A code block or a tool call ran.
    AfterBlock,
    /// An answer was proposed.
    OnAnswer,
    /// The forced answer came.
    OnForced,
}

impl CorrectionHook {
    /// The hook as written in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OnReply => "on_reply",
            Self::BeforeBlock => "before_block",
            Self::AfterBlock => "after_block",
            Self::OnAnswer => "on_answer",
            Self::OnForced => "on_forced",
        }
    }
}

/// What a correction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CorrectionVerdict {
    /// A notice appended to what the model reads next.
    Note,
    /// The answer was not accepted, or the block not run; the model was told why.
    Refuse,
}

impl CorrectionVerdict {
    /// The verdict as written in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Note => "note",
            Self::Refuse => "refuse",
        }
    }
}

/// `run_started`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStarted {
    /// The task.
    pub task: String,
    /// Root model.
    pub model: String,
    /// Where the model's code runs.
    pub env: EnvKind,
    /// Context description (metadata only).
    pub context: Option<Value>,
    /// Process id of the orchestrator.
    pub pid: u32,
    /// The root model's context window and where it comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<ContextWindow>,
    /// The sub-model's context window and where it comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_context_window: Option<ContextWindow>,
}

/// `window_found`: the windows `run_started` could not say yet, once the server said
/// (or did not: the table or the default), each where it applies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowFound {
    /// The root model's window, when it is the one found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<ContextWindow>,
    /// The sub-model's window, when it is the one found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_context_window: Option<ContextWindow>,
}

/// `plan`: one moment of a combinator plan (`map_reduce`, docs/plans.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanRecord {
    /// Which plan (the id in its results variable's name).
    pub plan_id: String,
    /// What happened (`stage` and its fields, beside `plan_id`).
    #[serde(flatten)]
    pub stage: PlanStage,
}

/// What happened to a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub enum PlanStage {
    /// Priced and checked: it runs.
    Priced {
        /// The plan as given.
        spec: Value,
        /// Pieces the input was cut into.
        pieces: u64,
        /// Pieces kept by a regex filter.
        kept: u64,
        /// Model calls it will make (nested runs and agents one each).
        calls: u64,
        /// Their estimated prompt tokens.
        prompt_tokens: u64,
    },
    /// Refused before any call: the reason, with the figures.
    Refused {
        /// Why.
        reason: String,
    },
    /// One leaf mapped.
    Leaf {
        /// The piece (0-based, among all pieces).
        index: usize,
        /// Its first byte in the input.
        start: u64,
        /// One past its last byte.
        end: u64,
        /// Wall time.
        duration_ms: u64,
        /// Its result, or the error, on at most 200 characters.
        result: String,
        /// True when the leaf failed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        failed: bool,
    },
    /// Reduced to the answer.
    Done {
        /// The answer, on at most 500 characters.
        answer: String,
        /// The variable holding every piece's result.
        results: String,
        /// Wall time of the whole plan.
        duration_ms: u64,
    },
}

/// `compacted`: steps of the root conversation replaced by their records so the next
/// request fits the model's window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionRecord {
    /// The iteration about to ask the model.
    pub iteration: u32,
    /// The iterations whose steps were compacted.
    pub steps: Vec<u32>,
    /// Estimated prompt tokens before.
    pub tokens_before: u64,
    /// Estimated prompt tokens after.
    pub tokens_after: u64,
    /// Tokens the window leaves for the prompt (the window less the answer's room).
    pub budget: u64,
    /// Characters cut from long messages (0: none): the older steps' first, then the
    /// last step's.
    #[serde(default)]
    pub cut_chars: usize,
    /// The iterations whose messages were cut in the middle (their steps stay).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cut_steps: Vec<u32>,
    /// The store variable holding the compacted steps' full text, if stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variable: Option<String>,
    /// The compacted steps, whole (`{iteration, messages}` each).
    #[serde(default)]
    pub archived: Vec<Value>,
}

/// `text`: what the model wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextRecord {
    /// Iteration.
    pub iteration: u32,
    /// The response as the transcript keeps it.
    pub text: String,
}

/// `code`: a block about to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeRecord {
    /// Iteration.
    pub iteration: u32,
    /// Block index within the response.
    pub block: usize,
    /// The code.
    pub code: String,
}

/// `exec`: how a block ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecRecord {
    /// Iteration.
    pub iteration: u32,
    /// Block index.
    pub block: usize,
    /// Output as shown to the model.
    pub output: String,
    /// Whether the code raised.
    pub error: bool,
    /// Whether it hit the execution timeout.
    pub timed_out: bool,
    /// Wall time.
    pub duration_ms: u64,
}

/// `sub_agent_spawned`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubAgentSpawned {
    /// Its agent id.
    pub child_agent_id: AgentId,
    /// How it runs.
    pub mode: AgentMode,
    /// Process id.
    pub pid: Option<u32>,
    /// What it was asked.
    pub task: String,
}

/// `sub_agent_finished`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubAgentFinished {
    /// Its agent id.
    pub child_agent_id: AgentId,
    /// How its process ended, in words (`exited with code 0`, `timed out`, …).
    pub status: String,
    /// Wall time.
    pub duration_ms: u64,
    /// Tokens it reported (descendants included).
    pub usage: Usage,
}

/// `llm_call`: one finished model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmCall {
    /// The model that answered.
    pub model: String,
    /// Why it was called.
    pub purpose: CallPurpose,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Whether usage was reported or estimated.
    pub usage_reported: bool,
    /// Wall time.
    pub latency_ms: u64,
    /// Attempts (retries + 1).
    pub attempts: u32,
    /// Bytes of the request's messages.
    pub request_bytes: u64,
    /// Cost, when prices are configured.
    pub cost_usd: Option<f64>,
    /// The prompt tokens rlm estimated before the call (to fit the window), beside the
    /// reported `prompt_tokens`: how good the estimate is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_prompt_tokens: Option<u64>,
}

impl LlmCall {
    /// How this one call counts toward a run's totals.
    pub fn as_totals(&self) -> RunTotals {
        RunTotals {
            llm_calls: 1,
            sub_agents: 0,
            usage: self.usage(),
            cost_usd: self.cost_usd,
        }
    }

    /// Its tokens.
    pub fn usage(&self) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
        }
    }
}

/// `cache_hit`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheHit {
    /// The kind of call answered.
    pub call: CachedCall,
    /// The cache variable.
    pub key: String,
}

/// `final`: the run has its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalRecord {
    /// The answer.
    pub answer: String,
    /// True when forced at the iteration or budget limit.
    pub forced: bool,
    /// Where it came from.
    pub source: AnswerSource,
}

/// `run_finished`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFinished {
    /// How it ended.
    pub status: RunStatus,
    /// The answer, if any.
    pub answer: Option<String>,
    /// Iterations used.
    pub iterations: u32,
    /// Tokens used, descendants included.
    pub usage: Usage,
    /// Cost, when prices are configured.
    pub cost_usd: Option<f64>,
    /// Wall time.
    pub duration_ms: u64,
    /// Set when some of the run's events could not be written (a full disk): how
    /// many, and why. Readers then take the run's state as unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_incomplete: Option<String>,
}

/// One line of `events.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Run id.
    pub run_id: RunId,
    /// Depth of the run (0 = root).
    pub depth: u32,
    /// Agent id of this run's process.
    pub agent_id: AgentId,
    /// Agent id of the parent, if any.
    pub parent_id: Option<AgentId>,
    /// Milliseconds since the epoch.
    pub ts_ms: u64,
    /// What happened.
    #[serde(flatten)]
    pub data: EventData,
}

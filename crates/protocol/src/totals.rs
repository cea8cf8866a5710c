//! What a run has used: tokens ([`Usage`]) and the run totals that every report of a
//! run carries ([`RunTotals`]: model calls, sub-agents, tokens, cost; descendants
//! included), declared once and flattened into each report's serde form.

use serde::{Deserialize, Serialize};

/// Tokens used by a call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt (input) tokens.
    pub prompt_tokens: u64,
    /// Completion (output) tokens.
    pub completion_tokens: u64,
}

impl Usage {
    /// Adds another call's usage.
    pub fn add(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
    }
    /// Prompt plus completion tokens.
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// What a run used, itself and its descendants together: the totals every report of a
/// run carries (`summary.json`, `--json`, `runs list`, a nested run's result). Flattened
/// into those types, so on the wire these are top-level fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RunTotals {
    /// Model calls, descendants included.
    pub llm_calls: u64,
    /// Sub-agents started, descendants included.
    pub sub_agents: u64,
    /// Tokens, descendants included.
    pub usage: Usage,
    /// Cost in USD, when prices were configured.
    pub cost_usd: Option<f64>,
}

impl RunTotals {
    /// Adds what a child run (or one more call) used.
    pub fn add(&mut self, other: &RunTotals) {
        self.llm_calls += other.llm_calls;
        self.sub_agents += other.sub_agents;
        self.usage.add(other.usage);
        if let Some(cost) = other.cost_usd {
            *self.cost_usd.get_or_insert(0.0) += cost;
        }
    }
}

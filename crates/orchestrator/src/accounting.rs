//! Usage, cost and budgets of a run.
//!
//! Every model call of a run — root turns and the sub-calls its code makes — is
//! recorded here; the loop checks [`Accounting::exhausted`] before each turn and the
//! host before each sub-call, so a spent budget ends the run cleanly with a forced
//! answer instead of failing mid-way.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::provider::Usage;

/// Limits of a run; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// `--max-llm-calls`.
    pub max_llm_calls: Option<u64>,
    /// `--max-tokens` (prompt + completion).
    pub max_tokens: Option<u64>,
    /// `--max-cost-usd`.
    pub max_cost_usd: Option<f64>,
    /// `--max-time`.
    #[serde(with = "crate::format::option_duration_ms", rename = "max_time_ms")]
    pub max_time: Option<Duration>,
}

/// What a run has used so far.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Totals {
    /// Tokens.
    pub usage: Usage,
    /// Model calls.
    pub llm_calls: u64,
    /// Cost of calls whose price is known.
    pub cost_usd: f64,
    /// True once any call had a known price.
    pub cost_known: bool,
    /// Sub-agents started, descendants included.
    pub sub_agents: u64,
    /// The deepest depth reached by a descendant (0 when none ran).
    pub depth_reached: u32,
}

/// What a finished child run used, itself and its descendants together.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ChildTotals {
    /// Tokens.
    pub usage: Usage,
    /// Model calls.
    pub llm_calls: u64,
    /// Cost, when the child knew its prices.
    pub cost_usd: Option<f64>,
    /// Sub-agents started.
    pub sub_agents: u64,
    /// The deepest depth reached.
    pub depth_reached: u32,
}

/// Thread-safe usage accounting with limits.
#[derive(Debug)]
pub struct Accounting {
    limits: Limits,
    started: Instant,
    totals: Mutex<Totals>,
}

impl Accounting {
    /// Starts accounting now.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            started: Instant::now(),
            totals: Mutex::new(Totals::default()),
        }
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Records one model call.
    pub fn record_call(&self, usage: Usage, cost_usd: Option<f64>) {
        let mut totals = self.lock();
        totals.usage.add(usage);
        totals.llm_calls += 1;
        if let Some(cost) = cost_usd {
            totals.cost_usd += cost;
            totals.cost_known = true;
        }
    }

    /// Records a sub-agent start.
    pub fn record_sub_agent(&self) {
        self.lock().sub_agents += 1;
    }

    /// Adds what a finished child run reported: its calls, tokens, cost and
    /// sub-agents, and how deep it went.
    pub fn record_child(&self, child: &ChildTotals) {
        let mut totals = self.lock();
        totals.usage.add(child.usage);
        totals.llm_calls += child.llm_calls;
        if let Some(cost) = child.cost_usd {
            totals.cost_usd += cost;
            totals.cost_known = true;
        }
        totals.sub_agents += child.sub_agents;
        totals.depth_reached = totals.depth_reached.max(child.depth_reached);
    }

    /// What is left of each limit: the budgets a child run is given.
    pub fn remaining(&self) -> Limits {
        let totals = self.totals();
        let limits = &self.limits;
        Limits {
            max_llm_calls: limits
                .max_llm_calls
                .map(|max| max.saturating_sub(totals.llm_calls)),
            max_tokens: limits
                .max_tokens
                .map(|max| max.saturating_sub(totals.usage.total())),
            max_cost_usd: limits
                .max_cost_usd
                .map(|max| (max - totals.cost_usd).max(0.0)),
            max_time: limits.max_time.map(|max| {
                max.saturating_sub(self.started.elapsed())
                    .max(Duration::from_secs(1))
            }),
        }
    }

    /// A copy of the totals.
    pub fn totals(&self) -> Totals {
        *self.lock()
    }

    /// Which budget is spent, in words, if any.
    pub fn exhausted(&self) -> Option<String> {
        let totals = self.totals();
        let limits = &self.limits;
        if let Some(max) = limits.max_llm_calls.filter(|max| totals.llm_calls >= *max) {
            return Some(format!(
                "the model-call budget (--max-llm-calls {max}) is spent"
            ));
        }
        if let Some(max) = limits.max_tokens.filter(|max| totals.usage.total() >= *max) {
            return Some(format!("the token budget (--max-tokens {max}) is spent"));
        }
        if let Some(max) = limits.max_cost_usd.filter(|max| totals.cost_usd >= *max) {
            return Some(format!("the cost budget (--max-cost-usd {max}) is spent"));
        }
        if let Some(max) = limits.max_time.filter(|max| self.started.elapsed() >= *max) {
            return Some(format!(
                "the time budget (--max-time {} s) is spent",
                max.as_secs()
            ));
        }
        None
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Totals> {
        self.totals.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_reported_when_spent() {
        let acc = Accounting::new(Limits {
            max_llm_calls: Some(2),
            max_tokens: Some(100),
            ..Limits::default()
        });
        assert_eq!(acc.exhausted(), None);
        acc.record_call(
            Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
            },
            Some(0.5),
        );
        assert_eq!(acc.exhausted(), None);
        acc.record_call(
            Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
            },
            None,
        );
        assert!(acc
            .exhausted()
            .unwrap_or_default()
            .contains("--max-llm-calls 2"));
        let totals = acc.totals();
        assert_eq!(totals.usage.total(), 30);
        assert!(totals.cost_known);
        let tokens = Accounting::new(Limits {
            max_tokens: Some(10),
            ..Limits::default()
        });
        tokens.record_call(
            Usage {
                prompt_tokens: 10,
                completion_tokens: 0,
            },
            None,
        );
        assert!(tokens
            .exhausted()
            .unwrap_or_default()
            .contains("token budget"));
    }
}

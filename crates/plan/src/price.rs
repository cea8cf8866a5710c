//! What a plan will cost, computed before it runs, and the check against the run's
//! budgets and the sub-model's window: a plan that would break one is refused with
//! the figures before any call.
//!
//! The runner walks the plan (splitting every input, nested plans included, which
//! needs no model) and adds each call it will make with [`Estimate::call`]; the
//! combining rounds of an `ask` reduction are [`Estimate::combine`]. Tokens of an
//! answer are not known before it is written: each call is counted with
//! `answer_tokens`, the room the window keeps for an answer.

use crate::error::PlanError;

/// The limits a plan must stay within.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Tokens a call's prompt may take (the sub-model's window less the answer's room).
    pub prompt_budget: u64,
    /// Tokens counted for each answer.
    pub answer_tokens: u64,
    /// Characters per token of the estimate (for the largest piece that fits).
    pub chars_per_token: f64,
    /// Model calls left in the run's budgets (`--max-llm-calls`, `--max-requests`).
    pub calls_left: Option<u64>,
    /// Tokens left (`--max-tokens`).
    pub tokens_left: Option<u64>,
    /// Dollars left (`--max-cost-usd`).
    pub cost_left_usd: Option<f64>,
    /// Prices per million prompt and answer tokens, when configured.
    pub usd_per_million: Option<(f64, f64)>,
}

/// The figures of a plan, added up call by call.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Estimate {
    /// Pieces the input was cut into (all levels).
    pub pieces: u64,
    /// Pieces kept after the filters.
    pub kept: u64,
    /// Model calls (and nested runs and agents, one each).
    pub calls: u64,
    /// Nested runs and agents among them (each may make more calls of its own).
    pub runs: u64,
    /// Prompt tokens of every call.
    pub prompt_tokens: u64,
    /// Answer tokens counted for every call.
    pub answer_tokens: u64,
    /// The largest prompt of one call, in tokens.
    pub largest_prompt: u64,
}

impl Estimate {
    /// Counts one call with a prompt of `prompt_tokens`; `run` when it starts a nested
    /// run or an agent. Fails when the prompt does not fit the window (`index`: the
    /// piece, for the message).
    pub fn call(
        &mut self,
        index: usize,
        prompt_tokens: u64,
        run: bool,
        limits: &Limits,
    ) -> Result<(), PlanError> {
        if !run && prompt_tokens > limits.prompt_budget {
            return Err(PlanError::PieceTooLarge {
                index,
                tokens: prompt_tokens,
                budget: limits.prompt_budget,
                fits: (limits.prompt_budget as f64 * limits.chars_per_token * 0.9) as u64,
                unit: "characters",
            });
        }
        self.calls += 1;
        self.runs += u64::from(run);
        self.prompt_tokens += prompt_tokens;
        self.answer_tokens += limits.answer_tokens;
        self.largest_prompt = self.largest_prompt.max(prompt_tokens);
        Ok(())
    }

    /// Counts the combining calls of an `ask` reduction of `answers` answers whose
    /// instruction takes `instruction_tokens`: each call combines as many answers as
    /// fit its prompt, in rounds until one is left. Returns the rounds.
    pub fn combine(
        &mut self,
        answers: u64,
        instruction_tokens: u64,
        limits: &Limits,
    ) -> Result<u64, PlanError> {
        let per_call = limits
            .prompt_budget
            .saturating_sub(instruction_tokens)
            .checked_div(limits.answer_tokens.max(1))
            .unwrap_or(0);
        if answers > 1 && per_call < 2 {
            return Err(PlanError::Shape(format!(
                "the reduction cannot combine two answers of {} tokens within the sub-model's prompt budget of {} tokens; use a deterministic reduction (sum, union, concat…) or a larger window",
                limits.answer_tokens, limits.prompt_budget
            )));
        }
        let mut left = answers;
        let mut rounds = 0;
        while left > 1 {
            let calls = left.div_ceil(per_call);
            for _ in 0..calls {
                let prompt = instruction_tokens + per_call.min(left) * limits.answer_tokens;
                self.call(0, prompt.min(limits.prompt_budget), false, limits)?;
            }
            left = calls;
            rounds += 1;
        }
        Ok(rounds)
    }

    /// The cost in dollars, when prices are known.
    pub fn cost_usd(&self, limits: &Limits) -> Option<f64> {
        limits.usd_per_million.map(|(input, output)| {
            (self.prompt_tokens as f64 * input + self.answer_tokens as f64 * output) / 1e6
        })
    }

    /// Checks the figures against the budgets; the refusal names every one broken.
    pub fn check(&self, limits: &Limits) -> Result<(), PlanError> {
        let mut broken = Vec::new();
        if let Some(left) = limits.calls_left.filter(|left| self.calls > *left) {
            broken.push(format!("{} model calls, {left} left", self.calls));
        }
        let tokens = self.prompt_tokens + self.answer_tokens;
        if let Some(left) = limits.tokens_left.filter(|left| tokens > *left) {
            broken.push(format!("about {tokens} tokens, {left} left"));
        }
        if let (Some(cost), Some(left)) = (self.cost_usd(limits), limits.cost_left_usd) {
            if cost > left {
                broken.push(format!("about ${cost:.4}, ${left:.4} left"));
            }
        }
        if broken.is_empty() {
            return Ok(());
        }
        Err(PlanError::OverBudget(format!(
            "{} ({} pieces, {} kept, {} calls{}); split into larger pieces, filter more, or raise the budget",
            broken.join("; "),
            self.pieces,
            self.kept,
            self.calls,
            if self.runs > 0 {
                format!(", {} of them nested runs or agents that may make more", self.runs)
            } else {
                String::new()
            }
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            prompt_budget: 1_000,
            answer_tokens: 100,
            chars_per_token: 3.0,
            calls_left: Some(20),
            tokens_left: None,
            cost_left_usd: None,
            usd_per_million: Some((1.0, 2.0)),
        }
    }

    #[test]
    fn calls_add_up_and_a_piece_too_large_is_named() {
        let mut estimate = Estimate::default();
        estimate.call(0, 900, false, &limits()).unwrap();
        estimate.call(1, 800, false, &limits()).unwrap();
        assert_eq!(
            (
                estimate.calls,
                estimate.prompt_tokens,
                estimate.answer_tokens
            ),
            (2, 1_700, 200)
        );
        assert_eq!(estimate.largest_prompt, 900);
        let error = estimate
            .call(7, 1_200, false, &limits())
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("use \"size\": 2700 or less in `split` (counted in characters)")
                && error.contains("piece 7 is about 1200 tokens"),
            "{error}"
        );
        // A nested run takes its piece by reference: no window to fit.
        estimate.call(8, 50_000, true, &limits()).unwrap();
        assert_eq!(estimate.runs, 1);
        assert_eq!(
            estimate.cost_usd(&limits()).map(|c| (c * 1e6).round()),
            Some(52_300.0)
        );
    }

    #[test]
    fn combining_rounds_fit_the_window() {
        let mut estimate = Estimate::default();
        // 9 answers a call (900 / 100): 30 answers take 4 calls, then 1.
        let rounds = estimate.combine(30, 100, &limits()).unwrap();
        assert_eq!((rounds, estimate.calls), (2, 5));
        let tight = Limits {
            prompt_budget: 150,
            ..limits()
        };
        assert!(Estimate::default().combine(3, 100, &tight).is_err());
        assert_eq!(Estimate::default().combine(1, 100, &limits()).unwrap(), 0);
    }

    #[test]
    fn a_plan_over_budget_is_refused_with_the_figures() {
        let mut estimate = Estimate {
            pieces: 40,
            kept: 25,
            ..Estimate::default()
        };
        for i in 0..25 {
            estimate.call(i, 500, false, &limits()).unwrap();
        }
        let error = estimate.check(&limits()).unwrap_err().to_string();
        assert!(error.contains("25 model calls, 20 left"), "{error}");
        assert!(error.contains("40 pieces, 25 kept"), "{error}");
        let generous = Limits {
            calls_left: None,
            tokens_left: Some(100_000),
            cost_left_usd: Some(1.0),
            ..limits()
        };
        assert!(estimate.check(&generous).is_ok());
        let poor = Limits {
            cost_left_usd: Some(0.001),
            ..generous
        };
        assert!(estimate
            .check(&poor)
            .unwrap_err()
            .to_string()
            .contains("left"));
    }
}

//! What a plan will cost, computed before it runs, and the check against the run's
//! budgets, the sub-model's window and `--sub-context-chars`: a plan that would break
//! one is refused with the figures before any call.
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
    /// Characters a call's prompt may hold (`--sub-context-chars`).
    pub max_prompt_chars: Option<u64>,
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

/// The prompt of one call, as it would be sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Prompt {
    /// Its estimated tokens.
    pub tokens: u64,
    /// Its characters.
    pub chars: u64,
    /// The characters of its instruction, around the piece.
    pub instruction_chars: u64,
    /// The estimated tokens of its instruction, around the piece (the largest piece
    /// that fits is what the window leaves beside them).
    pub instruction_tokens: u64,
}

impl Estimate {
    /// Counts one call with `prompt`. Fails when the prompt does not fit the window or
    /// `--sub-context-chars` (`index`: the piece, for the message).
    pub fn call(&mut self, index: usize, prompt: Prompt, limits: &Limits) -> Result<(), PlanError> {
        if prompt.instruction_tokens >= limits.prompt_budget {
            return Err(PlanError::Shape(format!(
                "the words sent with each piece (the instruction, and a schema if the map has one) are about {} tokens, and the sub-model's window leaves {} tokens for a prompt: no piece fits beside them; shorten the instruction or the schema",
                prompt.instruction_tokens, limits.prompt_budget
            )));
        }
        if prompt.tokens > limits.prompt_budget {
            return Err(PlanError::PieceTooLarge {
                index,
                tokens: prompt.tokens,
                budget: limits.prompt_budget,
                fits: ((limits
                    .prompt_budget
                    .saturating_sub(prompt.instruction_tokens) as f64
                    * limits.chars_per_token
                    * 0.9) as u64)
                    .max(1),
                unit: "characters",
            });
        }
        if let Some(max) = limits.max_prompt_chars.filter(|max| prompt.chars > *max) {
            return Err(PlanError::PieceOverChars {
                index,
                chars: prompt.chars,
                max,
                fits: max.saturating_sub(prompt.instruction_chars).max(1),
                unit: "characters",
            });
        }
        self.count(prompt.tokens, false, limits);
        Ok(())
    }

    /// Counts one nested run or agent, whose prompt names its piece by reference (so
    /// has no window to fit) and takes `query_tokens`; it may make calls of its own.
    pub fn run(&mut self, query_tokens: u64, limits: &Limits) -> Result<(), PlanError> {
        self.count(query_tokens, true, limits);
        Ok(())
    }

    fn count(&mut self, prompt_tokens: u64, run: bool, limits: &Limits) {
        self.calls += 1;
        self.runs += u64::from(run);
        self.prompt_tokens += prompt_tokens;
        self.answer_tokens += limits.answer_tokens;
        self.largest_prompt = self.largest_prompt.max(prompt_tokens);
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
        let by_tokens = limits
            .prompt_budget
            .saturating_sub(instruction_tokens)
            .checked_div(limits.answer_tokens.max(1))
            .unwrap_or(0);
        // `--sub-context-chars` bounds a combining prompt too, at the estimate's density.
        let chars_of = |tokens: u64| (tokens as f64 * limits.chars_per_token).ceil() as u64;
        let by_chars = limits.max_prompt_chars.map_or(by_tokens, |max| {
            max.saturating_sub(chars_of(instruction_tokens))
                .checked_div(chars_of(limits.answer_tokens).max(1))
                .unwrap_or(0)
        });
        let per_call = by_tokens.min(by_chars);
        if answers > 1 && per_call < 2 {
            return Err(PlanError::Shape(format!(
                "the reduction cannot combine two answers of {} tokens within the sub-model's prompt budget of {} tokens{}; use a deterministic reduction (sum, union, concat…) or a larger window",
                limits.answer_tokens,
                limits.prompt_budget,
                limits
                    .max_prompt_chars
                    .map(|max| format!(" and --sub-context-chars {max}"))
                    .unwrap_or_default()
            )));
        }
        let mut left = answers;
        let mut rounds = 0;
        while left > 1 {
            let calls = left.div_ceil(per_call);
            for _ in 0..calls {
                let prompt = instruction_tokens + per_call.min(left) * limits.answer_tokens;
                self.count(prompt.min(limits.prompt_budget), false, limits);
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
        let broken = self.broken(limits);
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

    /// The budgets the figures break, each with the figure and what is left
    /// (`"12 model calls, 9 left"`); empty when they break none.
    pub fn broken(&self, limits: &Limits) -> Vec<String> {
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
        broken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            prompt_budget: 1_000,
            max_prompt_chars: None,
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
        let prompt = |tokens| Prompt {
            tokens,
            chars: tokens * 3,
            instruction_chars: 30,
            instruction_tokens: 0,
        };
        let mut estimate = Estimate::default();
        estimate.call(0, prompt(900), &limits()).unwrap();
        estimate.call(1, prompt(800), &limits()).unwrap();
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
            .call(7, prompt(1_200), &limits())
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("use \"size\": 2700 or less in `split` (counted in characters)")
                && error.contains("piece 7 is about 1200 tokens"),
            "{error}"
        );
        // The size advised is what the window leaves beside the instruction.
        let long_instruction = Prompt {
            instruction_tokens: 400,
            ..prompt(1_200)
        };
        let error = Estimate::default()
            .call(7, long_instruction, &limits())
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("use \"size\": 1620 or less in `split` (counted in characters)"),
            "{error}"
        );
        // An instruction that fills the window leaves no size to advise.
        let filling = Prompt {
            instruction_tokens: 1_000,
            ..prompt(1_200)
        };
        let error = Estimate::default()
            .call(0, filling, &limits())
            .unwrap_err()
            .to_string();
        assert!(error.contains("no piece fits beside them"), "{error}");
        // A nested run takes its piece by reference: no window to fit.
        estimate.run(50_000, &limits()).unwrap();
        assert_eq!(estimate.runs, 1);
        // `--sub-context-chars` is checked on the prompt's characters as sent.
        let chars = Limits {
            max_prompt_chars: Some(1_000),
            ..limits()
        };
        let error = Estimate::default()
            .call(3, prompt(500), &chars)
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "use \"size\": 970 or less in `split` (counted in characters): piece 3 makes a prompt of 1500 characters, over --sub-context-chars 1000"
        );
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
        let prompt = Prompt {
            tokens: 500,
            chars: 1_500,
            instruction_chars: 30,
            instruction_tokens: 10,
        };
        for i in 0..25 {
            estimate.call(i, prompt, &limits()).unwrap();
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

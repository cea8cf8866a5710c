//! A sub-call asked to split (`llm_query(…, split=True)`, and `sub_rlm` at the
//! maximum depth): its context cut into pieces that fit the sub-model's window, one
//! call per piece, the answers combined in rounds ([`sub_fit::split_and_combine`]).
//! Priced before the first call — the pieces' calls and the combining rounds, at the
//! room an answer is given — and refused with the figures when the run's or the tree's
//! budgets cannot pay for all of it: the fourth hostile review's split call spent 9 of
//! its 10 calls on pieces and then had none to combine them.

use rlm_plan::price::{Estimate, Prompt};
use rlm_protocol::host_call::HostError;

use super::fan_out;
use super::serve::RunHost;
use super::sub_fit::{self, SubFit};
use crate::events::{CallPurpose, EventData};

impl RunHost {
    /// `prompt` over `context` split into pieces of at most `piece` characters, each
    /// piece and each combination a sub-call; priced first ([`Self::price_split`]).
    pub(super) async fn split_query(
        &self,
        prompt: &str,
        context: &str,
        piece: usize,
        fit: SubFit,
        purpose: CallPurpose,
    ) -> Result<String, HostError> {
        self.price_split(prompt, context, piece, purpose).await?;
        let limit = self.settings.delegation.max_parallel;
        let (answer, pieces) = sub_fit::split_and_combine(
            sub_fit::Split {
                prompt,
                context,
                piece,
                fit: sub_fit::CombineFit {
                    budget: fit.budget,
                    max_chars: self.settings.delegation.sub_context_chars,
                    estimator: &self.sub_model.window.estimator,
                },
            },
            |jobs| async move {
                fan_out::in_order(jobs, limit, |content| self.ask_sub(content, purpose))
                    .await
                    .into_iter()
                    .collect::<Result<Vec<String>, HostError>>()
            },
        )
        .await
        .map_err(|error| {
            HostError::RespondToModel(format!(
                "{}: {error} (the sub-model's window is {} tokens)",
                purpose.helper(),
                fit.window.tokens
            ))
        })?;
        self.sink.emit(EventData::Warning {
            message: format!(
                "{}: about {} tokens did not fit the sub-model's window of {}; split into {pieces} pieces of at most {piece} characters, asked {limit} at a time, answers combined",
                purpose.helper(),
                fit.tokens,
                fit.window.tokens,
            ),
        });
        Ok(answer)
    }

    /// The calls a split call will make — one per piece, then the combining rounds —
    /// and their tokens and cost, checked against what the budgets leave before the
    /// first call.
    async fn price_split(
        &self,
        prompt: &str,
        context: &str,
        piece: usize,
        purpose: CallPurpose,
    ) -> Result<(), HostError> {
        let estimator = &self.sub_model.window.estimator;
        let limits = self.sub_call_limits(estimator.calibration().0).await;
        let pieces = sub_fit::split_text(context, piece);
        let count = pieces.len();
        let mut estimate = Estimate {
            pieces: count as u64,
            kept: count as u64,
            ..Estimate::default()
        };
        for (index, text) in pieces.iter().enumerate() {
            let content =
                sub_fit::with_context(&sub_fit::piece_prompt(prompt, index, count), Some(text));
            let prompt = Prompt {
                tokens: estimator.tokens_of(&content),
                chars: content.chars().count() as u64,
                instruction_chars: 0,
                instruction_tokens: 0,
            };
            estimate
                .call(index, prompt, &limits)
                .map_err(|e| refusal(purpose, &e.to_string()))?;
        }
        let pieces_calls = estimate.calls;
        let instruction = estimator.tokens_of(&sub_fit::combine_prompt(prompt, &[], 0));
        estimate
            .combine(count as u64, instruction, &limits)
            .map_err(|e| refusal(purpose, &e.to_string()))?;
        let broken = estimate.broken(&limits);
        if broken.is_empty() {
            return Ok(());
        }
        Err(refusal(
            purpose,
            &format!(
                "{} ({count} pieces of at most {piece} characters, then about {} calls to combine their answers); raise the budget, or ask about a smaller part of the context",
                broken.join("; "),
                estimate.calls - pieces_calls
            ),
        ))
    }
}

/// The model's error for a split call refused before its first call.
fn refusal(purpose: CallPurpose, why: &str) -> HostError {
    HostError::RespondToModel(format!(
        "{}(split=True) was refused before any call: {why}",
        purpose.helper()
    ))
}

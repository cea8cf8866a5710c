//! A plan's price, before any call: the calls each part makes (a yes/no filter, the
//! map, a model reduction) with their estimated prompts, added up and checked against
//! the sub-model's window, `--sub-context-chars` and what the run's and the tree's
//! budgets leave. Pieces are priced at their real sizes: a whole plan's are the
//! splitter's, and a pieces variable's are counted from its file
//! ([`Source::measured`]), not taken from what model code wrote in it.

use rlm_plan::price::{Estimate, Limits, Prompt};
use rlm_plan::split::Piece;
use rlm_plan::work::HostWork;
use rlm_plan::{Filter, Map, Plan, PlanError, Reduce, SplitBy, MAX_PIECES};
use rlm_protocol::host_call::HostError;

use super::source::{too_large_to_read_whole, WHOLE_PIECE_MAX_BYTES};
use super::{after_piece, refused, Boxed, Prepared, Source};
use crate::host::serve::RunHost;
use crate::provider::TokenEstimator;
use crate::window::answer_reserve;

/// How the priced pieces were cut, and where they are read (to count a too-large
/// piece's lines).
pub(super) struct Origin<'a> {
    /// The split's unit.
    pub by: SplitBy,
    /// The input.
    pub source: &'a Source,
}

impl RunHost {
    /// Adds every call of `plan` over `prepared` to `estimate` — a nested plan's over
    /// each of its pieces, cut here already (their repeats counted in `work`) — and
    /// fails on a piece too large for the window or `--sub-context-chars`.
    pub(super) fn price_into<'a>(
        &'a self,
        plan: &'a Plan,
        source: &'a Source,
        prepared: &'a Prepared,
        (limits, work): (&'a Limits, &'a HostWork),
        estimate: &'a mut Estimate,
    ) -> Boxed<'a, ()> {
        Box::pin(async move {
            self.price(plan, source, prepared, limits, estimate)?;
            self.price_nested(&plan.map, source, &prepared.kept, (limits, work), estimate)
                .await
        })
    }

    /// A nested plan's calls over each of `kept`'s own pieces (nothing for another
    /// map): each piece is the nested plan's input, read where it lies.
    pub(super) async fn price_nested(
        &self,
        map: &Map,
        source: &Source,
        kept: &[(usize, Piece)],
        (limits, work): (&Limits, &HostWork),
        estimate: &mut Estimate,
    ) -> Result<(), HostError> {
        if let Map::Plan(inner) = map {
            for (_, piece) in kept {
                let within = source.within(piece);
                let prepared = self.prepare(inner, &within, work).await?;
                self.price_into(inner, &within, &prepared, (limits, work), estimate)
                    .await?;
            }
        }
        Ok(())
    }

    /// Emits the plan's `priced` event, or its `refused` event and the refusal.
    pub(super) fn priced_or_refused(
        &self,
        plan_id: &str,
        spec: serde_json::Value,
        checked: Result<(), HostError>,
        estimate: &Estimate,
    ) -> Result<(), HostError> {
        if let Err(error) = checked {
            let reason = error.to_string();
            self.plan_event(plan_id, crate::events::PlanStage::Refused { reason });
            return Err(error);
        }
        self.plan_event(
            plan_id,
            crate::events::PlanStage::Priced {
                spec,
                pieces: estimate.pieces,
                kept: estimate.kept,
                calls: estimate.calls,
                prompt_tokens: estimate.prompt_tokens,
            },
        );
        Ok(())
    }

    /// What the run's and its tree's budgets leave for a plan, the sub-model's window,
    /// and the density of `source`'s text (pieces are priced at it; the general
    /// estimate without one).
    pub(super) async fn plan_limits(&self, source: Option<&Source>) -> Limits {
        let chars_per_token = match source {
            Some(source) => self.density_of(source).await,
            None => self.sub_model.window.estimator.calibration().0,
        };
        self.sub_call_limits(chars_per_token).await
    }

    /// What the run's and its tree's budgets leave for sub-calls, the sub-model's
    /// window and `--sub-context-chars`, for text of `chars_per_token`.
    pub(in crate::host) async fn sub_call_limits(&self, chars_per_token: f64) -> Limits {
        let window = &self.sub_model.window;
        let prompt_budget = window.prompt_budget().await;
        let max_prompt_chars = Some(self.settings.delegation.sub_context_chars as u64);
        // This run's budgets and the whole tree's, the tighter of each.
        let left = self.accounting.left();
        let tokens = window.window().await.tokens;
        Limits {
            prompt_budget,
            max_prompt_chars,
            answer_tokens: answer_reserve(tokens).min(512),
            chars_per_token,
            calls_left: left.calls,
            tokens_left: left.tokens,
            cost_left_usd: left.cost_usd,
            usd_per_million: self
                .sub_model
                .price
                .map(|p| (p.input_usd_per_million, p.output_usd_per_million)),
        }
    }

    /// Every call the plan will make, added up; a piece too large for the window
    /// fails here, before any call.
    fn price(
        &self,
        plan: &Plan,
        source: &Source,
        prepared: &Prepared,
        limits: &Limits,
        estimate: &mut Estimate,
    ) -> Result<(), HostError> {
        let kept = &prepared.kept;
        let origin = Origin {
            by: plan.split.by,
            source,
        };
        estimate.pieces += prepared.pieces.len() as u64;
        estimate.kept += kept.len() as u64;
        if estimate.pieces > MAX_PIECES as u64 {
            return Err(refused(PlanError::Shape(format!(
                "the plan cuts its input into more than {MAX_PIECES} pieces, its nested plans' included; use larger `split.size`s"
            ))));
        }
        if let Some(Filter::Ask(question)) = &plan.filter {
            self.price_ask_filter(question, &origin, kept, limits, estimate)?;
        }
        self.price_map(&plan.map, &origin, kept, limits, estimate)?;
        self.price_reduce(&plan.reduce, kept.len(), limits, estimate)
    }

    /// A yes/no filter's calls: one a piece.
    pub(super) fn price_ask_filter(
        &self,
        question: &str,
        origin: &Origin<'_>,
        kept: &[(usize, Piece)],
        limits: &Limits,
        estimate: &mut Estimate,
    ) -> Result<(), HostError> {
        let estimator = &self.sub_model.window.estimator;
        for (index, piece) in kept {
            estimate
                .call(
                    *index,
                    leaf_prompt(estimator, question, "", piece, limits),
                    limits,
                )
                .map_err(|e| too_large(e, origin, piece, limits))?;
        }
        Ok(())
    }

    /// The map's calls: one a piece that asks a model or an agent (a nested plan's
    /// are priced over its own pieces).
    pub(super) fn price_map(
        &self,
        map: &Map,
        origin: &Origin<'_>,
        kept: &[(usize, Piece)],
        limits: &Limits,
        estimate: &mut Estimate,
    ) -> Result<(), HostError> {
        map_calls(
            map,
            &self.sub_model.window.estimator,
            (origin, kept),
            limits,
            estimate,
        )
    }

    /// A model reduction's calls over `results` answers (none for a deterministic one).
    pub(super) fn price_reduce(
        &self,
        reduce: &Reduce,
        results: usize,
        limits: &Limits,
        estimate: &mut Estimate,
    ) -> Result<(), HostError> {
        if let Reduce::Ask { instruction } = reduce {
            let estimator = &self.sub_model.window.estimator;
            estimate
                .combine(results as u64, estimator.tokens_of(instruction), limits)
                .map_err(refused)?;
        }
        Ok(())
    }
}

/// The calls of `map` over `kept` (one a piece that asks a model or an agent; a nested
/// plan's are priced over its own pieces), each leaf's prompt as it will be sent: an
/// ask map's schema, stated after the piece ([`after_piece`]), is counted in every
/// leaf; a schema that is not one is refused here, before any call.
fn map_calls(
    map: &Map,
    estimator: &TokenEstimator,
    (origin, kept): (&Origin<'_>, &[(usize, Piece)]),
    limits: &Limits,
    estimate: &mut Estimate,
) -> Result<(), HostError> {
    let after = after_piece(map)?;
    for (index, piece) in kept {
        match map {
            Map::Ask(instruction)
            | Map::AskShaped {
                ask: instruction, ..
            } => estimate
                .call(
                    *index,
                    leaf_prompt(estimator, instruction, &after, piece, limits),
                    limits,
                )
                .map_err(|e| too_large(e, origin, piece, limits))?,
            Map::SubRlm(query) | Map::Agent(query) => {
                // Handed on whole, as a variable of the nested run or agent.
                if piece.end.saturating_sub(piece.start) > WHOLE_PIECE_MAX_BYTES {
                    return Err(too_large_to_read_whole(piece.end - piece.start));
                }
                estimate
                    .run(estimator.tokens_of(query), limits)
                    .map_err(refused)?
            }
            Map::Count(_) | Map::Extract(_) | Map::Plan(_) => {}
        }
    }
    Ok(())
}

/// A refusal; a piece too large for the window is told in the split's own unit
/// (lines for a `lines` split), counted in the piece itself.
fn too_large(error: PlanError, origin: &Origin<'_>, piece: &Piece, limits: &Limits) -> HostError {
    // Counted in chunks: the piece may be a whole file without a line end.
    let units = match origin.by {
        SplitBy::Lines | SplitBy::Records => origin.source.lines_in(piece).unwrap_or(0),
        _ => 0,
    };
    refused(error.in_units_of(origin.by, piece.chars, units, limits.chars_per_token))
}

/// Tokens a leaf's prompt is counted beyond its instruction and piece (the estimate's
/// margin for the words around them).
const LEAF_MARGIN_TOKENS: u64 = 32;

/// The prompt of one leaf call: the instruction, the piece, and `after` (what follows
/// the piece: a schema stated, or nothing), its estimated tokens (the piece at the
/// input's density, `limits.chars_per_token`) and its characters as sent
/// ([`crate::host::sub_fit::with_context`], then `after`).
fn leaf_prompt(
    estimator: &TokenEstimator,
    instruction: &str,
    after: &str,
    piece: &Piece,
    limits: &Limits,
) -> Prompt {
    let piece_tokens = (piece.chars as f64 / limits.chars_per_token).ceil() as u64;
    let instruction_chars = (crate::host::sub_fit::with_context(instruction, Some(""))
        .chars()
        .count()
        + after.chars().count()) as u64;
    let instruction_tokens =
        estimator.tokens_of(instruction) + estimator.tokens_of(after) + LEAF_MARGIN_TOKENS;
    Prompt {
        tokens: instruction_tokens + piece_tokens,
        chars: instruction_chars + piece.chars,
        instruction_chars,
        instruction_tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::structured::Shape;
    use serde_json::{json, Value};

    /// Room for prompts of `prompt_budget` tokens; no other bound.
    fn limits(prompt_budget: u64) -> Limits {
        Limits {
            prompt_budget,
            max_prompt_chars: None,
            answer_tokens: 100,
            chars_per_token: 4.0,
            calls_left: None,
            tokens_left: None,
            cost_left_usd: None,
            usd_per_million: None,
        }
    }

    /// Characters of each of [`four_pieces`].
    const PIECE: u64 = 4000;

    /// A text of four pieces of [`PIECE`] characters, and the pieces.
    fn four_pieces() -> (Source, Vec<(usize, Piece)>) {
        let text = "0123456789abcdefghi\n".repeat(4 * PIECE as usize / 20);
        let kept = (0..4u64)
            .map(|i| {
                let piece = Piece {
                    start: i * PIECE,
                    end: (i + 1) * PIECE,
                    chars: PIECE,
                };
                (i as usize, piece)
            })
            .collect();
        (Source::text(text), kept)
    }

    /// A schema of many described fields: some 2000 characters.
    fn big_schema() -> Value {
        let properties: serde_json::Map<String, Value> = (0..30)
            .map(|i| {
                (
                    format!("field_{i}"),
                    json!({"type": "string", "description": "one of the record's own fields"}),
                )
            })
            .collect();
        json!({"type": "object", "properties": properties})
    }

    /// What `map` over the pieces is priced at, or its refusal.
    fn priced(map: &Map, limits: &Limits) -> Result<Estimate, String> {
        let (source, kept) = four_pieces();
        let origin = Origin {
            by: SplitBy::Chars,
            source: &source,
        };
        let mut estimate = Estimate::default();
        map_calls(
            map,
            &TokenEstimator::default(),
            (&origin, &kept),
            limits,
            &mut estimate,
        )
        .map(|()| estimate)
        .map_err(|e| e.to_string())
    }

    #[test]
    fn a_schema_is_priced_in_every_leaf_as_it_is_sent() {
        let ask = "How many records are listed?";
        let schema = big_schema();
        let plain = priced(&Map::Ask(ask.into()), &limits(100_000)).unwrap();
        let shaped = Map::AskShaped {
            ask: ask.into(),
            schema: schema.clone(),
        };
        let with_schema = priced(&shaped, &limits(100_000)).unwrap();
        assert_eq!((plain.calls, with_schema.calls), (4, 4));
        // About the schema's tokens more a leaf (and the few words that state it).
        let estimator = TokenEstimator::default();
        let schema_tokens = estimator.tokens_of(&schema.to_string());
        let more = (with_schema.prompt_tokens - plain.prompt_tokens) / 4;
        assert!(
            schema_tokens > 400 && more >= schema_tokens && more <= schema_tokens + 40,
            "{more} more a leaf, the schema {schema_tokens}"
        );
        // The characters priced are those sent: the leaf's prompt as the map writes it.
        let shape = Shape::new(&schema, "the plan's map").unwrap();
        let (source, kept) = four_pieces();
        let piece = kept[0].1;
        let sent = shape.prompt(&crate::host::sub_fit::with_context(
            ask,
            Some(&source.read(&piece).unwrap()),
        ));
        let prompt = leaf_prompt(&estimator, ask, &shape.stated(), &piece, &limits(0));
        assert_eq!(prompt.chars, sent.chars().count() as u64);
    }

    #[test]
    fn a_leaf_that_fits_only_without_its_schema_is_refused_with_the_sizes() {
        let ask = "How many records are listed?";
        let plain = priced(&Map::Ask(ask.into()), &limits(100_000)).unwrap();
        // Room for the largest leaf without its schema, and a little more.
        let budget = plain.largest_prompt + 20;
        assert!(priced(&Map::Ask(ask.into()), &limits(budget)).is_ok());
        let shaped = Map::AskShaped {
            ask: ask.into(),
            schema: big_schema(),
        };
        let refused = priced(&shaped, &limits(budget)).unwrap_err();
        assert!(
            refused.contains("piece 0 is about ")
                && refused.contains(&format!("tokens, over the {budget} tokens")),
            "{refused}"
        );
        // The size advised leaves room for the schema: a piece of it fits.
        let fits: u64 = refused
            .strip_prefix("use \"size\": ")
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{refused}"));
        assert!(fits < PIECE, "{refused}");
        let estimator = TokenEstimator::default();
        let stated = Shape::new(&big_schema(), "the plan's map")
            .unwrap()
            .stated();
        let smaller = Piece {
            start: 0,
            end: fits,
            chars: fits,
        };
        let prompt = leaf_prompt(&estimator, ask, &stated, &smaller, &limits(budget));
        assert!(prompt.tokens <= budget, "{} > {budget}", prompt.tokens);
        // A schema that leaves no room for any piece is refused as that.
        let stated_tokens = estimator.tokens_of(&stated);
        let refused = priced(&shaped, &limits(stated_tokens)).unwrap_err();
        assert!(
            refused.contains("no piece fits beside them") && refused.contains("schema"),
            "{refused}"
        );
        // A schema that is none is refused before any call.
        let bad = Map::AskShaped {
            ask: ask.into(),
            schema: json!({"type": "integr"}),
        };
        let refused = priced(&bad, &limits(100_000)).unwrap_err();
        assert!(refused.contains("not a valid JSON Schema"), "{refused}");
    }
}

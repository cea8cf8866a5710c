//! Running a priced plan: the yes/no filter, the map over every kept piece
//! (`--max-parallel` at a time; each model call a normal sub-call — cached per leaf,
//! accounted, traced — and each leaf an event), and the reduction.

use rlm_plan::pieces::PieceResult;
use rlm_plan::split::Piece;
use rlm_plan::{Map, Plan, PlanError, Reduce};
use rlm_protocol::host_call::{AgentJob, HostError, SubRlmArgs};
use serde_json::Value;

use super::{count, extract, off_runtime, refused, Boxed, Leaf, Prepared, RecordFilter, Source};
use crate::events::{CallPurpose, PlanStage};
use crate::host::serve::RunHost;
use crate::host::{fan_out, sub_fit};

impl RunHost {
    /// Runs `plan` over `prepared`: the yes/no filter, the map, the reduction; the
    /// answer, the results (one per piece; one per match of an `extract`) and how many
    /// pieces were mapped.
    pub(super) fn execute<'a>(
        &'a self,
        plan: &'a Plan,
        source: &'a Source,
        prepared: Prepared,
        plan_id: &'a str,
    ) -> Boxed<'a, (String, Vec<PieceResult>, usize)> {
        Box::pin(async move {
            let kept = match &plan.filter {
                Some(rlm_plan::Filter::Ask(question)) => {
                    self.ask_filter(question, source, prepared.kept).await?
                }
                _ => prepared.kept,
            };
            let filters: Vec<&rlm_plan::Filter> = plan.filter.iter().collect();
            let records = RecordFilter::new(&filters, &plan.split)?;
            let results = self
                .map_pieces(plan_id, &plan.map, records, source, &kept)
                .await?;
            let texts: Vec<String> = results.iter().map(|r| r.result.clone()).collect();
            let answer = self.reduce(&plan.reduce, texts, Some(&plan.map)).await?;
            Ok((answer, results, kept.len()))
        })
    }

    /// The results reduced to one answer: deterministically, or by the sub-model in
    /// rounds that fit its window. `map` made the results (when known): a failed
    /// reduction's advice depends on it.
    pub(super) async fn reduce(
        &self,
        reduce: &Reduce,
        texts: Vec<String>,
        map: Option<&Map>,
    ) -> Result<String, HostError> {
        match reduce {
            Reduce::Ask { instruction } => self.combine(instruction, texts).await,
            other => rlm_plan::reduce::reduce(other, &texts).map_err(|e| {
                let advice = e.advice(map).map(|a| format!("; {a}")).unwrap_or_default();
                HostError::RespondToModel(format!("the plan's reduction failed: {e}{advice}"))
            }),
        }
    }

    /// The pieces the sub-model answers yes about.
    pub(super) async fn ask_filter(
        &self,
        question: &str,
        source: &Source,
        kept: Vec<(usize, Piece)>,
    ) -> Result<Vec<(usize, Piece)>, HostError> {
        let prompt = format!("{question}\nAnswer yes or no only.");
        let answers = fan_out::in_order(
            kept.clone(),
            self.settings.delegation.max_parallel,
            |(_, piece)| {
                let prompt = prompt.clone();
                async move {
                    let source = source.clone();
                    let text = off_runtime(move || source.read(&piece)).await?;
                    self.ask_sub(
                        sub_fit::with_context(&prompt, Some(&text)),
                        CallPurpose::LlmQuery,
                    )
                    .await
                }
            },
        )
        .await;
        let mut out = Vec::new();
        for (piece, answer) in kept.into_iter().zip(answers) {
            if answer?.trim_start().to_ascii_lowercase().starts_with("yes") {
                out.push(piece);
            }
        }
        Ok(out)
    }

    /// Each kept piece's result, in order. A `count` or an `extract` reads only what
    /// `records` keeps of each piece (the records the regex filters match); other maps
    /// read whole pieces.
    pub(super) async fn map_pieces(
        &self,
        plan_id: &str,
        map: &Map,
        records: RecordFilter,
        source: &Source,
        kept: &[(usize, Piece)],
    ) -> Result<Vec<PieceResult>, HostError> {
        // A count's or an extraction's pattern, compiled once for every piece.
        let pattern = match map {
            Map::Count(p) | Map::Extract(p) => Some(
                rlm_plan::pattern::compile(p)
                    .map_err(|e| refused(PlanError::Shape(e.to_string())))?,
            ),
            _ => None,
        };
        let leaf = &Leaf {
            map,
            pattern,
            records,
            extracted: std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            shape: super::shape_of(map)?,
        };
        let results = fan_out::in_order(
            kept.to_vec(),
            self.settings.delegation.max_parallel,
            |(index, piece)| async move {
                let started = std::time::Instant::now();
                let result = self.map_piece(plan_id, leaf, source, index, piece).await;
                let (shown, failed) = match &result {
                    Ok(text) => (crate::format::clip(text, 200), false),
                    Err(error) => (crate::format::clip(&error.to_string(), 200), true),
                };
                self.plan_event(
                    plan_id,
                    PlanStage::Leaf {
                        index,
                        start: piece.start,
                        end: piece.end,
                        duration_ms: started.elapsed().as_millis() as u64,
                        result: shown,
                        failed,
                    },
                );
                result.map(|text| super::steps::piece_result(index, piece, text))
            },
        )
        .await;
        let results: Vec<PieceResult> = results.into_iter().collect::<Result<_, _>>()?;
        Ok(match map {
            // One result per match: a sum adds every extracted number, a count counts
            // the matches, top_k and union see each value (a piece's matches are one
            // per line).
            Map::Extract(_) => results
                .into_iter()
                .flat_map(|r| {
                    r.result
                        .lines()
                        .filter(|line| !line.is_empty())
                        .map(|line| PieceResult {
                            result: line.to_owned(),
                            ..r.clone()
                        })
                        .collect::<Vec<_>>()
                })
                .collect(),
            _ => results,
        })
    }

    /// One kept piece's result.
    async fn map_piece(
        &self,
        plan_id: &str,
        leaf: &Leaf<'_>,
        source: &Source,
        index: usize,
        piece: Piece,
    ) -> Result<String, HostError> {
        // A count or an extraction is a pass over the piece (of any size a split gave
        // it): read in chunks and scanned on the blocking pool, not on an async thread
        // the model's streams and the other leaves share.
        match (leaf.map, &leaf.pattern) {
            (Map::Count(_), Some(pattern)) => {
                let (source, pattern, records) =
                    (source.clone(), pattern.clone(), leaf.records.clone());
                return off_runtime(move || count(&pattern, (&source, &piece, &records))).await;
            }
            (Map::Extract(_), Some(pattern)) => {
                let (source, pattern, records) =
                    (source.clone(), pattern.clone(), leaf.records.clone());
                let kept = std::sync::Arc::clone(&leaf.extracted);
                return off_runtime(move || extract(&pattern, (&source, &piece, &records), &kept))
                    .await;
            }
            // The piece is the nested plan's input, read where it lies.
            (Map::Plan(inner), _) => {
                let within = source.within(&piece);
                let work = rlm_plan::work::HostWork::over(within.bytes());
                let prepared = self.prepare(inner, &within, &work).await?;
                // The nested plan's leaves are traced as `<plan>.<piece>`.
                let nested = format!("{plan_id}.{index}");
                return Ok(self.execute(inner, &within, prepared, &nested).await?.0);
            }
            _ => {}
        }
        let text = {
            let source = source.clone();
            off_runtime(move || source.read(&piece)).await?
        };
        let result = match (leaf.map, &leaf.pattern) {
            (Map::Ask(instruction), _) => {
                self.ask_sub(
                    sub_fit::with_context(instruction, Some(&text)),
                    CallPurpose::LlmQuery,
                )
                .await?
            }
            (Map::AskShaped { ask, .. }, _) => {
                let shape = leaf.shape.as_ref();
                let content = match shape {
                    Some(shape) => shape.prompt(&sub_fit::with_context(ask, Some(&text))),
                    None => sub_fit::with_context(ask, Some(&text)),
                };
                self.ask_sub_as(content, CallPurpose::LlmQuery, shape)
                    .await?
            }
            // Answered above (a count or an extract when its pattern compiled).
            (Map::Count(_) | Map::Extract(_) | Map::Plan(_), _) => String::new(),
            (Map::SubRlm(query), _) => {
                self.sub_rlm(&SubRlmArgs {
                    query: query.clone(),
                    context: Some(Value::String(text)),
                    context_key: None,
                })
                .await?
            }
            (Map::Agent(task), _) => {
                let key = format!("plan-piece-{}-{index}", crate::ids::AgentId::generate());
                let scope = self.scope();
                let k = key.clone();
                self.blocking(move |store| {
                    store.set(
                        &k,
                        Value::String(text),
                        rlm_context_store::SetOptions::default().scope(scope),
                    )
                })
                .await?;
                let answer = self
                    .spawn_agent(&AgentJob {
                        task: task.clone(),
                        refs: vec![key],
                    })
                    .await?;
                match answer {
                    Value::String(text) => text,
                    other => other.to_string(),
                }
            }
        };
        Ok(result)
    }

    /// An `ask` reduction: the sub-model combines the results in rounds that fit.
    async fn combine(&self, instruction: &str, answers: Vec<String>) -> Result<String, HostError> {
        let window = &self.sub_model.window;
        let fit = sub_fit::CombineFit {
            budget: window.prompt_budget().await,
            max_chars: self.settings.delegation.sub_context_chars,
            estimator: &window.estimator,
        };
        let limit = self.settings.delegation.max_parallel;
        sub_fit::combine_rounds(instruction, answers, &fit, |jobs| async move {
            fan_out::in_order(jobs, limit, |content| {
                self.ask_sub(content, CallPurpose::LlmQuery)
            })
            .await
            .into_iter()
            .collect::<Result<Vec<String>, HostError>>()
        })
        .await
        .map_err(|error| match error {
            sub_fit::SplitError::Call(error) => error,
            too_long => HostError::RespondToModel(format!(
                "the plan's reduction: {too_long}; use a deterministic reduction (sum, union, concat…)"
            )),
        })
    }
}

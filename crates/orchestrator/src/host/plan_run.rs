//! Running a combinator plan (`map_reduce`, docs/plans.md): the input is cut into
//! pieces in one streaming pass (byte ranges of its text view: a file is never copied
//! or loaded whole), the pieces filtered, the plan priced and checked against the
//! budgets and the sub-model's window — and refused with the figures before any call
//! — then every kept piece mapped (`--max-parallel` at a time, each model call a normal
//! sub-call: cached per leaf, accounted, traced) and the results reduced.

use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;

use regex::Regex;
use rlm_plan::price::{Estimate, Limits};
use rlm_plan::split::{split_reader, Cut, Piece, SplitError};
use rlm_plan::{Filter, Map, Plan, PlanError, Reduce, SplitBy, MAX_PIECES};
use rlm_protocol::host_call::{AgentJob, HostError, PlanArgs, SubRlmArgs};
use serde_json::{json, Value};

use super::serve::RunHost;
use super::{fan_out, sub_fit};
use crate::events::{CallPurpose, EventData, PlanRecord, PlanStage};
use crate::window::answer_reserve;

/// Where the plan's input is read from.
enum Source {
    /// A file: the store's text view of a variable (the file itself for a `file`
    /// variable).
    File(PathBuf),
    /// Text the REPL sent.
    Text(String),
}

impl Source {
    /// The text of `piece`.
    fn read(&self, piece: &Piece) -> Result<String, HostError> {
        match self {
            Self::Text(text) => Ok(text
                .get(piece.start as usize..piece.end as usize)
                .unwrap_or_default()
                .to_owned()),
            Self::File(path) => {
                let fail = |e: std::io::Error| {
                    HostError::RespondToModel(format!(
                        "the plan's input {} could not be read: {e}",
                        path.display()
                    ))
                };
                let mut file = std::fs::File::open(path).map_err(fail)?;
                file.seek(SeekFrom::Start(piece.start)).map_err(fail)?;
                let mut bytes = Vec::new();
                file.take(piece.end - piece.start)
                    .read_to_end(&mut bytes)
                    .map_err(fail)?;
                Ok(String::from_utf8_lossy(&bytes).into_owned())
            }
        }
    }

    /// Cuts the input.
    fn split(&self, cut: &Cut) -> Result<Vec<Piece>, HostError> {
        let split = match self {
            Self::Text(text) => split_reader(text.as_bytes(), cut, MAX_PIECES),
            Self::File(path) => std::fs::File::open(path)
                .map_err(SplitError::from)
                .and_then(|file| {
                    split_reader(BufReader::with_capacity(1 << 20, file), cut, MAX_PIECES)
                }),
        };
        split.map_err(|e| match e {
            SplitError::Read(e) => refused(PlanError::Read(e.to_string())),
            too_many => refused(PlanError::Shape(too_many.to_string())),
        })
    }
}

/// A boxed future of the host (recursion through nested plans needs one).
type Boxed<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, HostError>> + Send + 'a>>;

/// What each piece becomes: the map, and its pattern compiled once.
struct Leaf<'a> {
    map: &'a Map,
    pattern: Option<Regex>,
}

/// A plan's input cut into pieces, and the pieces its regex filter keeps.
struct Prepared {
    pieces: Vec<Piece>,
    kept: Vec<(usize, Piece)>,
}

/// How many plans deep `plan` nests (0: it maps with no plan).
fn nesting_of(plan: &Plan) -> u32 {
    match &plan.map {
        Map::Plan(inner) => 1 + nesting_of(inner),
        _ => 0,
    }
}

/// The model's error for a plan that cannot run.
fn refused(error: PlanError) -> HostError {
    HostError::RespondToModel(error.to_string())
}

impl RunHost {
    /// Runs `map_reduce`: prices the plan, checks it, runs it; replies with the answer
    /// and the figures.
    pub(super) async fn run_plan(&self, args: PlanArgs) -> Result<Value, HostError> {
        let started = std::time::Instant::now();
        let plan_id = crate::ids::AgentId::generate().to_string();
        let spec = args.plan.clone();
        let plan: Plan = serde_json::from_value(args.plan)
            .map_err(|e| refused(PlanError::Json(e.to_string())))?;
        plan.check_shape(0).map_err(refused)?;
        let nesting = nesting_of(&plan);
        let max_depth = self.settings.delegation.max_depth;
        if nesting > max_depth {
            return Err(refused(PlanError::Shape(format!(
                "the plan nests {nesting} plans deep, over --max-depth {max_depth}"
            ))));
        }
        let source = match (args.text, plan.split.by) {
            // A JSON list's items, one per line: `records` then cuts lines.
            (text, SplitBy::Records) => Source::Text(self.records_of(&plan.input, text).await?),
            (Some(text), _) => Source::Text(text),
            (None, _) => {
                let key = plan.input.clone();
                Source::File(self.blocking(move |store| store.text_view(&key)).await?)
            }
        };
        let window = &self.sub_model.window;
        let budget = window.prompt_budget().await;
        let (chars_per_token, _) = window.estimator.calibration();
        let prepared = self.prepare(&plan, &source).await?;
        let limits = self.plan_limits(budget, chars_per_token).await;
        let mut estimate = Estimate::default();
        let checked = self
            .price_into(&plan, &source, &prepared, &limits, &mut estimate)
            .await
            .and_then(|()| estimate.check(&limits).map_err(refused));
        if let Err(error) = checked {
            self.plan_event(
                &plan_id,
                PlanStage::Refused {
                    reason: error.to_string(),
                },
            );
            return Err(error);
        }
        self.plan_event(
            &plan_id,
            PlanStage::Priced {
                spec,
                pieces: estimate.pieces,
                kept: estimate.kept,
                calls: estimate.calls,
                prompt_tokens: estimate.prompt_tokens,
            },
        );
        let pieces = prepared.pieces.len();
        let (answer, results) = self.execute(&plan, &source, prepared, &plan_id).await?;
        let key = format!("plan-{plan_id}-results");
        let stored = json!(results
            .iter()
            .map(|(piece, result)| json!({"start": piece.start, "end": piece.end, "chars": piece.chars, "result": result}))
            .collect::<Vec<_>>());
        let scope = self.scope();
        let k = key.clone();
        self.blocking(move |store| {
            store.set(
                &k,
                stored,
                rlm_context_store::SetOptions::default().scope(scope),
            )
        })
        .await?;
        self.plan_event(
            &plan_id,
            PlanStage::Done {
                answer: crate::format::clip(&answer, 500),
                results: key.clone(),
                duration_ms: started.elapsed().as_millis() as u64,
            },
        );
        Ok(json!({
            "answer": answer,
            "pieces": pieces,
            "kept": results.len(),
            "calls": estimate.calls,
            "results": key,
        }))
    }

    /// The items of the JSON list `input` names (or `text` holds), one compact JSON
    /// value a line, for a `records` split.
    async fn records_of(&self, input: &str, text: Option<String>) -> Result<String, HostError> {
        let value = match text {
            Some(text) => serde_json::from_str(&text).map_err(|e| {
                refused(PlanError::Shape(format!(
                    "`records` splits a JSON list, and the input is not JSON ({e}): use `lines` or `regex`"
                )))
            })?,
            None => {
                let key = input.to_owned();
                Value::clone(&*self.blocking(move |store| store.get(&key)).await?)
            }
        };
        let Value::Array(items) = value else {
            return Err(refused(PlanError::Shape(
                "`records` splits a JSON list, and the input is not a list: use `lines` or `regex`"
                    .into(),
            )));
        };
        Ok(items.iter().map(|item| format!("{item}\n")).collect())
    }

    /// Cuts `source` as `plan` says and applies its regex filter (no model).
    async fn prepare(&self, plan: &Plan, source: &Source) -> Result<Prepared, HostError> {
        let window = &self.sub_model.window;
        let budget = window.prompt_budget().await;
        let (chars_per_token, _) = window.estimator.calibration();
        let instruction = leaf_instruction(&plan.map);
        let fitting = sub_fit::piece_chars(instruction, budget, &window.estimator).unwrap_or(1_000);
        let cut = cut_of(plan, fitting as u64, chars_per_token)?;
        let pieces = source.split(&cut)?;
        let filter_regex = match &plan.filter {
            Some(Filter::Regex(p)) => {
                Some(rlm_plan::pattern::compile(p).map_err(|e| refused(PlanError::Shape(e)))?)
            }
            _ => None,
        };
        let mut kept = Vec::new();
        for (index, piece) in pieces.iter().enumerate() {
            if let Some(regex) = &filter_regex {
                if !regex.is_match(&source.read(piece)?) {
                    continue;
                }
            }
            kept.push((index, *piece));
        }
        Ok(Prepared { pieces, kept })
    }

    /// Adds every call of `plan` over `prepared` to `estimate` — a nested plan's over
    /// each of its pieces, cut here already — and fails on a piece too large for the
    /// window.
    fn price_into<'a>(
        &'a self,
        plan: &'a Plan,
        source: &'a Source,
        prepared: &'a Prepared,
        limits: &'a Limits,
        estimate: &'a mut Estimate,
    ) -> Boxed<'a, ()> {
        Box::pin(async move {
            self.price(plan, &prepared.pieces, &prepared.kept, limits, estimate)?;
            if let Map::Plan(inner) = &plan.map {
                for (_, piece) in &prepared.kept {
                    let text = Source::Text(source.read(piece)?);
                    let inner_prepared = self.prepare(inner, &text).await?;
                    self.price_into(inner, &text, &inner_prepared, limits, estimate)
                        .await?;
                }
            }
            Ok(())
        })
    }

    /// Runs `plan` over `prepared`: the yes/no filter, the map, the reduction; the
    /// answer and each piece's result.
    fn execute<'a>(
        &'a self,
        plan: &'a Plan,
        source: &'a Source,
        prepared: Prepared,
        plan_id: &'a str,
    ) -> Boxed<'a, (String, Vec<(Piece, String)>)> {
        Box::pin(async move {
            let kept = self.ask_filter(plan, source, prepared.kept).await?;
            let results = self.map_pieces(plan_id, &plan.map, source, &kept).await?;
            let texts: Vec<String> = results.iter().map(|(_, r)| r.clone()).collect();
            let answer = match &plan.reduce {
                Reduce::Ask { instruction } => self.combine(instruction, texts).await?,
                other => rlm_plan::reduce::reduce(other, &texts).map_err(|e| {
                    HostError::RespondToModel(format!("the plan's reduction failed: {e}"))
                })?,
            };
            Ok((answer, results))
        })
    }

    fn plan_event(&self, plan_id: &str, stage: PlanStage) {
        self.sink.emit(EventData::Plan(PlanRecord {
            plan_id: plan_id.to_owned(),
            stage,
        }));
    }

    /// What the run's and its tree's budgets leave for the plan.
    async fn plan_limits(&self, prompt_budget: u64, chars_per_token: f64) -> Limits {
        // This run's budgets and the whole tree's, the tighter of each.
        let left = self.accounting.left();
        let window = self.sub_model.window.window().await.tokens;
        Limits {
            prompt_budget,
            answer_tokens: answer_reserve(window).min(512),
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
        pieces: &[Piece],
        kept: &[(usize, Piece)],
        limits: &Limits,
        estimate: &mut Estimate,
    ) -> Result<(), HostError> {
        let estimator = &self.sub_model.window.estimator;
        estimate.pieces += pieces.len() as u64;
        estimate.kept += kept.len() as u64;
        if estimate.pieces > MAX_PIECES as u64 {
            return Err(refused(PlanError::Shape(format!(
                "the plan cuts its input into more than {MAX_PIECES} pieces, its nested plans' included; use larger `split.size`s"
            ))));
        }
        let tokens_of = |instruction: &str, piece: &Piece| {
            estimator.tokens_of(instruction) + estimator.tokens_of_chars(piece.chars as usize) + 32
        };
        if let Some(Filter::Ask(question)) = &plan.filter {
            for (index, piece) in kept {
                estimate
                    .call(*index, tokens_of(question, piece), false, limits)
                    .map_err(refused)?;
            }
        }
        for (index, piece) in kept {
            match &plan.map {
                Map::Ask(instruction) => estimate
                    .call(*index, tokens_of(instruction, piece), false, limits)
                    .map_err(refused)?,
                Map::SubRlm(query) | Map::Agent(query) => estimate
                    .call(*index, estimator.tokens_of(query), true, limits)
                    .map_err(refused)?,
                Map::Count(_) | Map::Extract(_) | Map::Plan(_) => {}
            }
        }
        if let Reduce::Ask { instruction } = &plan.reduce {
            estimate
                .combine(kept.len() as u64, estimator.tokens_of(instruction), limits)
                .map_err(refused)?;
        }
        Ok(())
    }

    /// The pieces a yes/no filter keeps (all, without one).
    async fn ask_filter(
        &self,
        plan: &Plan,
        source: &Source,
        kept: Vec<(usize, Piece)>,
    ) -> Result<Vec<(usize, Piece)>, HostError> {
        let Some(Filter::Ask(question)) = &plan.filter else {
            return Ok(kept);
        };
        let prompt = format!("{question}\nAnswer yes or no only.");
        let answers = fan_out::in_order(
            kept.clone(),
            self.settings.delegation.max_parallel,
            |(_, piece)| {
                let prompt = prompt.clone();
                async move {
                    let text = source.read(&piece)?;
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

    /// Each kept piece's result, in order.
    async fn map_pieces(
        &self,
        plan_id: &str,
        map: &Map,
        source: &Source,
        kept: &[(usize, Piece)],
    ) -> Result<Vec<(Piece, String)>, HostError> {
        // A count's or an extraction's pattern, compiled once for every piece.
        let pattern = match map {
            Map::Count(p) | Map::Extract(p) => {
                Some(rlm_plan::pattern::compile(p).map_err(|e| refused(PlanError::Shape(e)))?)
            }
            _ => None,
        };
        let leaf = &Leaf { map, pattern };
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
                result.map(|text| (piece, text))
            },
        )
        .await;
        results.into_iter().collect()
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
        let text = source.read(&piece)?;
        let result = match (leaf.map, &leaf.pattern) {
            (Map::Ask(instruction), _) => {
                self.ask_sub(
                    sub_fit::with_context(instruction, Some(&text)),
                    CallPurpose::LlmQuery,
                )
                .await?
            }
            (Map::Count(_), Some(pattern)) => pattern.find_iter(&text).count().to_string(),
            (Map::Extract(_), Some(pattern)) => extract(pattern, &text),
            (Map::Count(_) | Map::Extract(_), None) => String::new(),
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
            (Map::Plan(inner), _) => {
                let text = Source::Text(text);
                let prepared = self.prepare(inner, &text).await?;
                // The nested plan's leaves are traced as `<plan>.<piece>`.
                let nested = format!("{plan_id}.{index}");
                self.execute(inner, &text, prepared, &nested).await?.0
            }
        };
        Ok(result)
    }

    /// An `ask` reduction: the sub-model combines the results in rounds that fit.
    async fn combine(&self, instruction: &str, answers: Vec<String>) -> Result<String, HostError> {
        let window = &self.sub_model.window;
        let budget = window.prompt_budget().await;
        let limit = self.settings.delegation.max_parallel;
        sub_fit::combine_rounds(instruction, answers, budget, &window.estimator, |jobs| async move {
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

/// The instruction a leaf call carries (for sizing the pieces around it).
fn leaf_instruction(map: &Map) -> &str {
    match map {
        Map::Ask(text) | Map::SubRlm(text) | Map::Agent(text) => text,
        Map::Count(_) | Map::Extract(_) | Map::Plan(_) => "",
    }
}

/// The cut a plan's split asks for; `fitting`: characters of a piece the sub-model's
/// window takes beside the instruction (the size when none is given).
fn cut_of(plan: &Plan, fitting: u64, chars_per_token: f64) -> Result<Cut, HostError> {
    let split = &plan.split;
    Ok(match split.by {
        SplitBy::Chars => Cut::Chars {
            size: split.size.unwrap_or(fitting),
            overlap: split.overlap,
        },
        SplitBy::Tokens => Cut::Chars {
            size: split
                .size
                .map_or(fitting, |tokens| (tokens as f64 * chars_per_token) as u64)
                .max(1),
            overlap: 0,
        },
        SplitBy::Lines => Cut::Lines {
            size: split.size.unwrap_or(100),
            overlap: split.overlap,
        },
        SplitBy::Regex => Cut::Records {
            start: rlm_plan::pattern::compile(split.pattern.as_deref().unwrap_or_default())
                .map_err(|e| refused(PlanError::Shape(e)))?,
            size: split.size,
        },
        // The input was made one item a line (`records_of`).
        SplitBy::Records => Cut::Lines {
            size: split.size.unwrap_or(1),
            overlap: 0,
        },
    })
}

/// The matches of `pattern` in `text`, one per line (the first group when it has one).
fn extract(pattern: &Regex, text: &str) -> String {
    pattern
        .captures_iter(text)
        .filter_map(|c| c.get(1).or_else(|| c.get(0)))
        .map(|m| m.as_str().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

//! Running a combinator plan (`map_reduce`, docs/plans.md): the host's work priced
//! first — a split whose overlaps would repeat its input more than
//! [`rlm_plan::work::HostWork`] allows is refused before it runs — then the input cut
//! into pieces in one streaming pass (byte ranges of its text view: a file is never
//! copied or loaded whole), the pieces filtered, the plan priced and checked against
//! the budgets, `--sub-context-chars` and the sub-model's window — and refused with
//! the figures before any call — then every kept piece mapped (`--max-parallel` at a
//! time, each model call a normal sub-call: cached per leaf, accounted, traced) and the
//! results reduced.

use std::ops::ControlFlow;

use regex::Regex;
use rlm_plan::price::Estimate;
use rlm_plan::split::{Cut, Piece};
use rlm_plan::work::HostWork;
use rlm_plan::{Filter, Map, Plan, PlanError, Split, SplitBy};
use rlm_protocol::host_call::{HostError, PlanArgs};
use serde::Deserialize;
use serde_json::{json, Value};

use super::serve::RunHost;
use super::sub_fit;
use crate::events::{EventData, PlanRecord, PlanStage};

mod execute;
mod price;
mod records;
mod source;
mod steps;

use records::RecordFilter;
use source::Source;

/// A boxed future of the host (recursion through nested plans needs one).
type Boxed<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, HostError>> + Send + 'a>>;

/// What each piece becomes: the map, and its pattern compiled once.
struct Leaf<'a> {
    map: &'a Map,
    pattern: Option<Regex>,
    /// What a `count` or `extract` reads of each piece.
    records: RecordFilter,
    /// Matches an `extract` map has kept so far, all leaves together (shared with the
    /// leaves' passes on the blocking pool).
    extracted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// An ask map's schema, compiled once for all its leaves.
    shape: Option<super::structured::Shape>,
}

/// The helper a plan's map schema is given to, as its messages name it.
const MAP_HELPER: &str = "the plan's map";

/// An ask map's schema, compiled (`None` for any other map); a schema that is not one
/// is refused.
fn shape_of(map: &Map) -> Result<Option<super::structured::Shape>, HostError> {
    match map {
        Map::AskShaped { schema, .. } => {
            Ok(Some(super::structured::Shape::new(schema, MAP_HELPER)?))
        }
        _ => Ok(None),
    }
}

/// Matches the `extract` map of one plan (or `ctx_map`) keeps at most, all pieces
/// together: every match is a result held in memory and stored, and pieces bound the
/// leaves, not the matches (`extract: "\\d+"` over a 1 GB log).
const MAX_EXTRACTED: usize = 100_000;

/// A plan's input cut into pieces, and the pieces its regex filter keeps.
struct Prepared {
    pieces: Vec<Piece>,
    kept: Vec<(usize, Piece)>,
}

/// How many plans deep `plan` nests (0: it maps with no plan).
fn nesting_of(plan: &Plan) -> u32 {
    nesting_of_map(&plan.map)
}

/// How many plans deep a map nests (0: it is not a plan).
fn nesting_of_map(map: &Map) -> u32 {
    match map {
        Map::Plan(inner) => 1 + nesting_of(inner),
        _ => 0,
    }
}

/// The model's error for a plan that cannot run.
fn refused(error: PlanError) -> HostError {
    HostError::RespondToModel(error.to_string())
}

/// The plan `value` holds, or why it does not read: a `map` or `filter` of several
/// options is named with its keys (serde's "expected map with a single key" names
/// neither, and a model told only that its map is invalid tends to send it again).
/// `{"ask": …, "schema": …}` is one map.
fn read_plan(value: &Value) -> Result<Plan, PlanError> {
    let several = ["map", "filter"]
        .into_iter()
        .find_map(|name| match value.get(name) {
            Some(Value::Object(given)) if name == "map" && Map::is_shaped_ask(given) => None,
            Some(Value::Object(given)) if given.len() > 1 => {
                let keys: Vec<&str> = given.keys().map(String::as_str).collect();
                Some(format!(
                    "`{name}` takes one option, not several: it has {}",
                    keys.join(", ")
                ))
            }
            _ => None,
        });
    match several {
        Some(problem) => Err(PlanError::Json(problem)),
        None => Plan::deserialize(value).map_err(|error| PlanError::Json(error.to_string())),
    }
}

impl RunHost {
    /// Runs `map_reduce`: prices the plan, checks it, runs it; replies with the answer
    /// and the figures.
    pub(super) async fn run_plan(&self, args: PlanArgs) -> Result<Value, HostError> {
        let started = std::time::Instant::now();
        let plan_id = crate::ids::AgentId::generate().to_string();
        let spec = args.plan.clone();
        let plan = read_plan(&args.plan).map_err(refused)?;
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
            (text, SplitBy::Records) => Source::text(self.records_of(&plan.input, text).await?),
            (Some(text), _) => Source::text(text),
            (None, _) => {
                let key = plan.input.clone();
                Source::file(self.blocking(move |store| store.text_view(&key)).await?)?
            }
        };
        // What overlaps repeat, the nested plans' included, within one bound.
        let work = HostWork::over(source.bytes());
        let prepared = match self.prepare(&plan, &source, &work).await {
            Ok(prepared) => prepared,
            Err(error) => {
                self.plan_event(
                    &plan_id,
                    PlanStage::Refused {
                        reason: error.to_string(),
                    },
                );
                return Err(error);
            }
        };
        let limits = self.plan_limits(Some(&source)).await;
        let mut estimate = Estimate::default();
        let checked = self
            .price_into(&plan, &source, &prepared, (&limits, &work), &mut estimate)
            .await
            .and_then(|()| estimate.check(&limits).map_err(refused));
        self.priced_or_refused(&plan_id, spec, checked, &estimate)?;
        let pieces = prepared.pieces.len();
        let (answer, results, mapped) = self.execute(&plan, &source, prepared, &plan_id).await?;
        let key = format!("plan-{plan_id}-results");
        let stored = json!(results);
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
            "kept": mapped,
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

    /// Cuts `source` as `plan` says — the pieces' repeats counted in `work` — and
    /// applies its regex filter (no model).
    async fn prepare(
        &self,
        plan: &Plan,
        source: &Source,
        work: &HostWork,
    ) -> Result<Prepared, HostError> {
        // A size left out leaves room for an ask map's schema too, as it is stated.
        let estimator = &self.sub_model.window.estimator;
        let instruction = estimator.tokens_of(leaf_instruction(&plan.map))
            + estimator.tokens_of(&after_piece(&plan.map)?);
        let pieces = self.cut(&plan.split, instruction, source, work).await?;
        let all = pieces.iter().copied().enumerate().collect();
        let kept = match &plan.filter {
            Some(filter @ (Filter::Regex(_) | Filter::Where(_))) => {
                keep_passing(filter, &plan.split, source, all).await?
            }
            _ => all,
        };
        Ok(Prepared { pieces, kept })
    }

    /// Cuts `source` as `split` says; a size left out is the largest piece the
    /// sub-model's window takes beside an instruction of `instruction_tokens`. What the
    /// pieces would repeat is checked against `work` before the cut, and what they do
    /// repeat counted after it.
    async fn cut(
        &self,
        split: &Split,
        instruction_tokens: u64,
        source: &Source,
        work: &HostWork,
    ) -> Result<Vec<Piece>, HostError> {
        let window = &self.sub_model.window;
        // Pieces are sized at this input's own density, which may be far above the
        // prompts'.
        let chars_per_token = self.density_of(source).await;
        let budget = window.prompt_budget().await;
        let fitting = sub_fit::piece_chars_beside(instruction_tokens, budget, chars_per_token)
            .unwrap_or(1_000);
        let cut = cut_of(split, fitting as u64, chars_per_token)?;
        let bytes = source.bytes();
        work.before_split(&cut, bytes).map_err(refused)?;
        let source = source.clone();
        // One pass over the whole input (a file of any size): not on an async thread.
        let pieces = off_runtime(move || source.split(&cut)).await?;
        work.count_pieces(
            &pieces,
            bytes,
            ("the pieces of the split", "use a smaller `split.overlap`"),
        )
        .map_err(refused)?;
        Ok(pieces)
    }

    /// Characters per token to size and price pieces of `source` with: the server's
    /// count of a sample of it ([`crate::window::ModelWindow::calibrate_on_sample`],
    /// once per input), or the general estimate when that is lower or the server
    /// cannot count.
    async fn density_of(&self, source: &Source) -> f64 {
        let window = &self.sub_model.window;
        let (general, _) = window.estimator.calibration();
        let sample = source.sample();
        window
            .calibrate_on_sample(&sample)
            .await
            .map_or(general, |ratio| ratio.min(general))
    }

    fn plan_event(&self, plan_id: &str, stage: PlanStage) {
        self.sink.emit(EventData::Plan(PlanRecord {
            plan_id: plan_id.to_owned(),
            stage,
        }));
    }
}

/// The instruction a leaf call carries (for sizing the pieces around it).
fn leaf_instruction(map: &Map) -> &str {
    match map {
        Map::Ask(text)
        | Map::SubRlm(text)
        | Map::Agent(text)
        | Map::AskShaped { ask: text, .. } => text,
        Map::Count(_) | Map::Extract(_) | Map::Plan(_) => "",
    }
}

/// What a leaf's prompt says after its piece: an ask map's schema, stated
/// ([`super::structured::Shape::stated`]); nothing for another map. A schema that is
/// not one is refused.
fn after_piece(map: &Map) -> Result<String, HostError> {
    Ok(shape_of(map)?
        .map(|shape| shape.stated())
        .unwrap_or_default())
}

/// The cut `split` asks for; `fitting`: characters of a piece the sub-model's
/// window takes beside the instruction (the size when none is given).
fn cut_of(split: &Split, fitting: u64, chars_per_token: f64) -> Result<Cut, HostError> {
    let cut = match split.by {
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
                .map_err(|e| refused(PlanError::Shape(e.to_string())))?,
            size: split.size,
        },
        // The input was made one item a line (`records_of`).
        SplitBy::Records => Cut::Lines {
            size: split.size.unwrap_or(1),
            overlap: 0,
        },
    };
    // `Split::check` compares a given size with the overlap; a size left out is known
    // only now.
    match &cut {
        Cut::Chars { size, overlap } | Cut::Lines { size, overlap } if overlap >= size => {
            Err(refused(PlanError::Shape(format!(
                "`split.overlap` ({overlap}) must be smaller than the size of a piece ({size}, the largest the sub-model's window takes): give a smaller overlap, or a `split.size` above it"
            ))))
        }
        _ => Ok(cut),
    }
}

/// The pieces a filter that asks no model keeps: for a regex, the pieces it matches
/// anywhere in; for a `where` condition, the pieces with a record that meets it.
async fn keep_passing(
    filter: &Filter,
    split: &Split,
    source: &Source,
    pieces: Vec<(usize, Piece)>,
) -> Result<Vec<(usize, Piece)>, HostError> {
    let records = RecordFilter::new(&[filter], split)?;
    let source = source.clone();
    off_runtime(move || {
        let mut kept = Vec::new();
        for (index, piece) in pieces {
            // A regex keeps a piece with a match anywhere; a condition, a piece with a
            // record that meets it. Read in chunks: a piece may be a whole file.
            if records.passes(&source, &piece)? {
                kept.push((index, piece));
            }
        }
        Ok(kept)
    })
    .await
}

/// Runs `work` — reading or scanning the whole input — on the blocking pool, so a
/// pass over a large file does not hold an async thread (the model's streams, the
/// other leaves) for its seconds.
async fn off_runtime<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, HostError> + Send + 'static,
) -> Result<T, HostError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| HostError::Fatal(format!("a plan's pass over its input stopped: {e}")))?
}

/// The matches of `pattern` in what `records` keeps of `piece`, one per line (the
/// first group when it has one), read in chunks. `kept` counts the matches kept by
/// every leaf of the map; past [`MAX_EXTRACTED`] the leaf fails with what to do
/// instead.
fn extract(
    pattern: &Regex,
    (source, piece, records): (&Source, &Piece, &RecordFilter),
    kept: &std::sync::atomic::AtomicUsize,
) -> Result<String, HostError> {
    let mut matches: Vec<String> = Vec::new();
    let mut over = false;
    records.kept(source, piece, &mut |text| {
        let found: Vec<String> = pattern
            .captures_iter(text)
            .filter_map(|c| c.get(1).or_else(|| c.get(0)))
            .map(|m| m.as_str().to_owned())
            .take(MAX_EXTRACTED + 1)
            .collect();
        let before = kept.fetch_add(found.len(), std::sync::atomic::Ordering::SeqCst);
        over = before + found.len() > MAX_EXTRACTED;
        matches.extend(found);
        if over {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })?;
    if over {
        return Err(HostError::RespondToModel(format!(
            "the `extract` map found more than {MAX_EXTRACTED} matches of `{}`; count them with `count` instead, or keep fewer pieces with a filter, or narrow the pattern",
            pattern.as_str()
        )));
    }
    Ok(matches.join("\n"))
}

/// The matches of `pattern` in what `records` keeps of `piece`, read in chunks.
fn count(
    pattern: &Regex,
    (source, piece, records): (&Source, &Piece, &RecordFilter),
) -> Result<String, HostError> {
    let mut found = 0usize;
    records.kept(source, piece, &mut |text| {
        found += pattern.find_iter(text).count();
        ControlFlow::Continue(())
    })?;
    Ok(found.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_that_does_not_read_names_its_part() {
        let two = json!({"input": "context", "split": {"by": "lines", "size": 1000},
            "map": {"extract": "host=(\\w+)", "sub_rlm": "host $1"},
            "reduce": {"op": "union"}});
        assert_eq!(
            read_plan(&two).map_err(|e| e.to_string()),
            Err("the plan is not valid: `map` takes one option, not several: it has extract, sub_rlm".to_owned())
        );
        assert_eq!(
            read_plan(&json!({"map": {"count": "a", "ask": "b"}})).map_err(|e| e.to_string()),
            Err(
                "the plan is not valid: `map` takes one option, not several: it has ask, count"
                    .to_owned()
            )
        );
        // Any other plan that does not read: serde's words, and nothing else.
        let unknown = json!({"input": "context", "map": {"grep": "x"}, "reduce": {"op": "sum"}});
        let message = read_plan(&unknown).map_err(|e| e.to_string()).unwrap_err();
        assert!(
            message.starts_with("the plan is not valid: unknown variant `grep`"),
            "{message}"
        );
        assert!(read_plan(
            &json!({"input": "context", "map": {"count": "a"}, "reduce": {"op": "sum"}})
        )
        .is_ok());
    }

    #[test]
    fn every_reduction_the_tools_offer_is_one_a_plan_runs() {
        for op in crate::env::tools::REDUCE_OPS {
            let reduce = match op {
                "top_k" => serde_json::json!({"op": op, "k": 1}),
                "ask" => serde_json::json!({"op": op, "instruction": "merge"}),
                "group_by" => serde_json::json!({"op": op, "key": "(\\w+)", "agg": "count"}),
                _ => serde_json::json!({"op": op}),
            };
            let parsed = serde_json::from_value::<rlm_plan::Reduce>(reduce);
            assert!(parsed.is_ok(), "{op}: {parsed:?}");
        }
    }
}

//! Running a combinator plan (`map_reduce`, docs/plans.md): the input is cut into
//! pieces in one streaming pass (byte ranges of its text view: a file is never copied
//! or loaded whole), the pieces filtered, the plan priced and checked against the
//! budgets and the sub-model's window — and refused with the figures before any call
//! — then every kept piece mapped (`--max-parallel` at a time, each model call a normal
//! sub-call: cached per leaf, accounted, traced) and the results reduced.

use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;

use regex::Regex;
use rlm_plan::condition::Condition;
use rlm_plan::price::Estimate;
use rlm_plan::split::{split_reader, Cut, Piece, SplitError};
use rlm_plan::task_fit::Refusal;
use rlm_plan::{Filter, Map, Plan, PlanError, Split, SplitBy, MAX_PIECES};
use rlm_protocol::host_call::{HostError, PlanArgs};
use serde::Deserialize;
use serde_json::{json, Value};

use super::example;
use super::refused_plans::{self, Repeat, Written};
use super::serve::RunHost;
use super::sub_fit;
use crate::events::{EventData, PlanRecord, PlanStage};

mod execute;
mod price;
mod steps;

/// Where the plan's input is read from (cheap to clone: the passes over the whole
/// input run off the async threads, on a clone).
#[derive(Clone)]
enum Source {
    /// A file: the store's text view of a variable (the file itself for a `file`
    /// variable).
    File(PathBuf),
    /// Text the REPL sent.
    Text(std::sync::Arc<str>),
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

    /// A sample of the input to calibrate the token estimate on
    /// ([`crate::window::ModelWindow::calibrate_on_sample`]): its start, middle and end, a few
    /// KiB each — never the whole of a large file. Empty when it cannot be read (the
    /// split that follows says why).
    fn sample(&self) -> String {
        match self {
            Self::Text(text) => crate::window::sample_of(text),
            Self::File(path) => {
                let Ok(bytes) = std::fs::metadata(path).map(|m| m.len()) else {
                    return String::new();
                };
                // Bytes a slice: a character is at most four.
                let slice = crate::window::SAMPLE_SLICE_CHARS as u64;
                let piece = |start: u64, end: u64| Piece {
                    start,
                    end,
                    chars: 0,
                };
                let pieces = if bytes <= 3 * slice {
                    vec![piece(0, bytes)]
                } else {
                    let middle = bytes / 2 - slice / 2;
                    vec![
                        piece(0, slice),
                        piece(middle, middle + slice),
                        piece(bytes - slice, bytes),
                    ]
                };
                pieces
                    .iter()
                    .filter_map(|p| self.read(p).ok())
                    .collect::<Vec<_>>()
                    .join("\n")
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
    /// What a `count` or `extract` reads of each piece.
    records: RecordFilter,
    /// Matches an `extract` map has kept so far, all leaves together (shared with the
    /// leaves' passes on the blocking pool).
    extracted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
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

/// The plan `value` holds, or why it does not read as a refusal: a `map` or `filter`
/// of several options is named with its keys (serde's "expected map with a single key"
/// named neither), and the task's exact plan follows where there is one, over the
/// input and split `value` names where they read. The local model sent `map
/// {"extract": …, "sub_rlm": …}` five times, told only that the map was "invalid", and
/// its forced answer was a made-up object (docs/eval.md, s19c-seed21 plan `pairs`
/// item 1); told the exact plan, it sent a `top_k` with a `separator` five times and
/// was forced (s20-seed23 plan-text `aggregate` item 1): the refusal's exact plan runs
/// in place of the same unread plan sent again ([`refused_plans`]).
fn read_plan(value: &Value, task: &str) -> Result<Plan, Box<Refusal>> {
    let several = ["map", "filter"]
        .into_iter()
        .find_map(|name| match value.get(name) {
            Some(Value::Object(given)) if given.len() > 1 => {
                let keys: Vec<&str> = given.keys().map(String::as_str).collect();
                Some(format!(
                    "`{name}` takes one option, not several: it has {}",
                    keys.join(", ")
                ))
            }
            _ => None,
        });
    let problem = match several {
        Some(problem) => problem,
        None => match Plan::deserialize(value) {
            Ok(plan) => return Ok(plan),
            Err(error) => error.to_string(),
        },
    };
    let exact = rlm_plan::task_fit::exact_plan_for_task(task)
        .map(|exact| over_the_written_pieces(exact, value));
    let named = exact
        .as_ref()
        .map(|plan| {
            format!(
                ". The task's exact plan: {}",
                rlm_plan::task_fit::parts_of(plan)
            )
        })
        .unwrap_or_default();
    Err(Box::new(Refusal {
        message: PlanError::Json(format!("{problem}{named}")).to_string(),
        exact,
    }))
}

/// The exact plan that runs in place of a refused one, with the `note` that says so;
/// `spec` (the plan as traced) made that plan.
fn ran_in_place(note: String, exact: Plan, spec: &mut Value) -> (Plan, Option<String>) {
    if let Ok(value) = serde_json::to_value(&exact) {
        *spec = value;
    }
    (exact, Some(note))
}

/// The task's `exact` plan over the input and split an unread plan's JSON names, where
/// each reads and passes the plan checks a written plan passes (`"size": 0` does not);
/// the exact plan's own (the context, the default split) where not.
fn over_the_written_pieces(exact: Plan, written: &Value) -> Plan {
    let input = written
        .get("input")
        .and_then(Value::as_str)
        .filter(|input| !input.trim().is_empty());
    let split = written
        .get("split")
        .and_then(|split| Split::deserialize(split).ok())
        .filter(|split| split.check().is_ok());
    Plan {
        input: input.map_or(exact.input, str::to_owned),
        split: split.unwrap_or(exact.split),
        ..exact
    }
}

impl RunHost {
    /// `written`, refused by `refusal` (its message as the model reads it): refused,
    /// or — written before, or another plan refused with the same exact plan — the
    /// refusal's exact plan to run in its place ([`RefusedPlans::decide`]), with the
    /// note that says so and `spec` (the plan as traced) made that plan.
    ///
    /// [`RefusedPlans::decide`]: refused_plans::RefusedPlans::decide
    fn refused_or_instead(
        &self,
        written: Written,
        refusal: Refusal,
        spec: &mut Value,
    ) -> Result<(Plan, Option<String>), HostError> {
        match self.refused_plans.decide(written, refusal) {
            Repeat::Refuse(message) => Err(HostError::RespondToModel(message)),
            Repeat::RunInstead(exact) => Ok(ran_in_place(
                refused_plans::ran_instead(&exact),
                exact,
                spec,
            )),
            Repeat::RunNamedAgain(exact) => Ok(ran_in_place(
                refused_plans::named_again(&exact),
                exact,
                spec,
            )),
        }
    }

    /// Runs `map_reduce`: prices the plan, checks it, runs it; replies with the answer
    /// and the figures.
    pub(super) async fn run_plan(&self, args: PlanArgs) -> Result<Value, HostError> {
        let started = std::time::Instant::now();
        let plan_id = crate::ids::AgentId::generate().to_string();
        let mut spec = args.plan.clone();
        let task = &self.settings.task;
        let (plan, note) = match read_plan(&args.plan, task) {
            Ok(plan) => {
                plan.check_shape(0).map_err(refused)?;
                let refusal = example::refusal(example::Asking::Plan(&plan), task)
                    .or_else(|| rlm_plan::task_fit::refusal(&plan, task));
                match refusal {
                    None => (plan, None),
                    Some(refusal) => {
                        let message = PlanError::Shape(refusal.message).to_string();
                        let refusal = Refusal { message, ..refusal };
                        self.refused_or_instead(Written::Plan(plan), refusal, &mut spec)?
                    }
                }
            }
            Err(unread) => {
                self.refused_or_instead(Written::Unread(args.plan), *unread, &mut spec)?
            }
        };
        let nesting = nesting_of(&plan);
        let max_depth = self.settings.delegation.max_depth;
        if nesting > max_depth {
            return Err(refused(PlanError::Shape(format!(
                "the plan nests {nesting} plans deep, over --max-depth {max_depth}"
            ))));
        }
        let source = match (args.text, plan.split.by) {
            // A JSON list's items, one per line: `records` then cuts lines.
            (text, SplitBy::Records) => {
                Source::Text(self.records_of(&plan.input, text).await?.into())
            }
            (Some(text), _) => Source::Text(text.into()),
            (None, _) => {
                let key = plan.input.clone();
                Source::File(self.blocking(move |store| store.text_view(&key)).await?)
            }
        };
        let prepared = self.prepare(&plan, &source).await?;
        let limits = self.plan_limits(Some(&source)).await;
        let mut estimate = Estimate::default();
        let checked = self
            .price_into(&plan, &source, &prepared, &limits, &mut estimate)
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
        let mut reply = json!({
            "answer": answer,
            "pieces": pieces,
            "kept": mapped,
            "calls": estimate.calls,
            "results": key,
        });
        if let Some(note) = note {
            reply["note"] = Value::String(note);
        }
        Ok(reply)
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
        let instruction = self
            .sub_model
            .window
            .estimator
            .tokens_of(leaf_instruction(&plan.map));
        let pieces = self.cut(&plan.split, instruction, source).await?;
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
    /// sub-model's window takes beside an instruction of `instruction_tokens`.
    async fn cut(
        &self,
        split: &Split,
        instruction_tokens: u64,
        source: &Source,
    ) -> Result<Vec<Piece>, HostError> {
        let window = &self.sub_model.window;
        // Pieces are sized at this input's own density, which may be far above the
        // prompts'.
        let chars_per_token = self.density_of(source).await;
        let budget = window.prompt_budget().await;
        let fitting = sub_fit::piece_chars_beside(instruction_tokens, budget, chars_per_token)
            .unwrap_or(1_000);
        let cut = cut_of(split, fitting as u64, chars_per_token)?;
        let source = source.clone();
        // One pass over the whole input (a file of any size): not on an async thread.
        off_runtime(move || source.split(&cut)).await
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
        Map::Ask(text) | Map::SubRlm(text) | Map::Agent(text) => text,
        Map::Count(_) | Map::Extract(_) | Map::Plan(_) => "",
    }
}

/// The cut `split` asks for; `fitting`: characters of a piece the sub-model's
/// window takes beside the instruction (the size when none is given).
fn cut_of(split: &Split, fitting: u64, chars_per_token: f64) -> Result<Cut, HostError> {
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
            let text = source.read(&piece)?;
            // A regex keeps a piece with a match anywhere; a condition, a piece with a
            // record that meets it.
            let passes = match records.tests.as_slice() {
                [RecordTest::Matches(regex)] => regex.is_match(&text),
                _ => !records.apply(text).is_empty(),
            };
            if passes {
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

/// What a `count` or an `extract` map reads of a piece its filters kept: the records
/// every regex matches and every `where` condition holds for — lines, or for a `regex`
/// split the records its pattern starts (a multi-line record is kept or dropped
/// whole). A filter before a count means records to whoever writes one: "the amounts
/// of the `label=shipping` records". With no such filter, the whole piece.
#[derive(Clone, Default)]
pub(super) struct RecordFilter {
    tests: Vec<RecordTest>,
    /// Where a record starts (`None`: at every line).
    record_start: Option<Regex>,
}

/// What a record must pass: a regex filter's match, or a `where` condition.
#[derive(Clone)]
enum RecordTest {
    /// `{"regex": P}`.
    Matches(Regex),
    /// `{"where": "year > 2000"}`.
    Meets(Condition),
}

impl RecordTest {
    /// The test of `filter`; none for a yes/no question (a model's, per piece).
    fn of(filter: &Filter) -> Result<Option<Self>, HostError> {
        let shape = |e: String| refused(PlanError::Shape(e));
        Ok(match filter {
            Filter::Regex(pattern) => Some(Self::Matches(
                rlm_plan::pattern::compile(pattern).map_err(shape)?,
            )),
            Filter::Where(condition) => Some(Self::Meets(
                Condition::parse(condition).map_err(|e| shape(format!("`filter.where`: {e}")))?,
            )),
            Filter::Ask(_) => None,
        })
    }

    fn passes(&self, record: &str) -> bool {
        match self {
            Self::Matches(regex) => regex.is_match(record),
            Self::Meets(condition) => condition.holds_for(record),
        }
    }
}

impl RecordFilter {
    /// The filter of these `filters` (their regexes and conditions) over pieces cut by
    /// `split`.
    fn new(filters: &[&Filter], split: &Split) -> Result<Self, HostError> {
        let mut tests = Vec::new();
        for filter in filters {
            tests.extend(RecordTest::of(filter)?);
        }
        let record_start = match (split.by, &split.pattern) {
            (SplitBy::Regex, Some(pattern)) => Some(
                rlm_plan::pattern::compile(pattern).map_err(|e| refused(PlanError::Shape(e)))?,
            ),
            _ => None,
        };
        Ok(Self {
            tests,
            record_start,
        })
    }

    /// The records of `text` every filter matches, with their line ends; `text`
    /// itself when there is no filter.
    fn apply(&self, text: String) -> String {
        if self.tests.is_empty() {
            return text;
        }
        let mut kept = String::new();
        let mut record = String::new();
        let mut end_record = |record: &mut String| {
            if self.tests.iter().all(|t| t.passes(record)) {
                kept.push_str(record);
            }
            record.clear();
        };
        for line in text.split_inclusive('\n') {
            let starts = self.record_start.as_ref().is_none_or(|s| s.is_match(line));
            if starts && !record.is_empty() {
                end_record(&mut record);
            }
            record.push_str(line);
        }
        end_record(&mut record);
        kept
    }
}

/// The matches of `pattern` in `text`, one per line (the first group when it has one).
/// `kept` counts the matches kept by every leaf of the map; past [`MAX_EXTRACTED`] the
/// leaf fails with what to do instead.
fn extract(
    pattern: &Regex,
    text: &str,
    kept: &std::sync::atomic::AtomicUsize,
) -> Result<String, HostError> {
    let matches: Vec<&str> = pattern
        .captures_iter(text)
        .filter_map(|c| c.get(1).or_else(|| c.get(0)))
        .map(|m| m.as_str())
        .take(MAX_EXTRACTED + 1)
        .collect();
    let before = kept.fetch_add(matches.len(), std::sync::atomic::Ordering::SeqCst);
    if before + matches.len() > MAX_EXTRACTED {
        return Err(HostError::RespondToModel(format!(
            "the `extract` map found more than {MAX_EXTRACTED} matches of `{}`; count them with `count` instead, or keep fewer pieces with a filter, or narrow the pattern",
            pattern.as_str()
        )));
    }
    Ok(matches.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(json: &str) -> Split {
        serde_json::from_str(json).expect("a valid split")
    }

    #[test]
    fn a_plan_that_does_not_read_names_its_part_and_the_task_s_exact_plan() {
        // The s19c-seed21 reading's plan `pairs` item 1, as the model wrote it.
        let task = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
        let two = json!({"input": "context", "split": {"by": "lines", "size": 1000},
            "filter": {"regex": "year > 2000"},
            "map": {"extract": "city=(\\w+) year=\\d+", "sub_rlm": "person $1: city=$2 year=$3"},
            "reduce": {"op": "pairs"}});
        let Err(refusal) = read_plan(&two, task) else {
            panic!("read");
        };
        let Refusal { message, exact } = *refusal;
        assert!(
            message.starts_with("the plan is not valid: `map` takes one option, not several: it has extract, sub_rlm. The task's exact plan: filter {\"where\": \"year > 2000\"}, map {\"extract\": \"city=(\\\\w+)\"}, reduce {\"op\": \"pairs\"}"),
            "{message}"
        );
        // Its exact plan reads the pieces the model's plan named.
        let exact = exact.expect("the task's exact plan");
        assert_eq!(
            (exact.input.as_str(), exact.split.size),
            ("context", Some(1000))
        );
        // A split the plan checks refuse is not the exact plan's: it keeps its own.
        let size_0 = json!({"input": "  ", "split": {"by": "lines", "size": 0},
            "map": {"extract": "city=(\\w+)"}, "reduce": {"op": "top_k", "k": 1, "separator": ";"}});
        let Err(refusal) = read_plan(&size_0, task) else {
            panic!("read");
        };
        let exact = refusal.exact.expect("the task's exact plan");
        assert_eq!((exact.input.as_str(), exact.split.size), ("context", None));
        // Any other plan that does not read: serde's words, then the exact plan.
        let unknown = json!({"input": "context", "map": {"grep": "x"}, "reduce": {"op": "sum"}});
        let Err(refusal) = read_plan(&unknown, task) else {
            panic!("read");
        };
        let message = refusal.message;
        assert!(
            message.contains("unknown variant `grep`") && message.contains("The task's exact plan"),
            "{message}"
        );
        // With no exact plan for the task, only what is wrong.
        let Err(refusal) = read_plan(&json!({"map": {"count": "a", "ask": "b"}}), "Summarise.")
        else {
            panic!("read");
        };
        let Refusal { message, exact } = *refusal;
        assert_eq!(exact, None);
        assert_eq!(
            message,
            "the plan is not valid: `map` takes one option, not several: it has ask, count"
        );
        assert!(read_plan(
            &json!({"input": "context", "map": {"count": "a"}, "reduce": {"op": "sum"}}),
            task
        )
        .is_ok());
    }

    #[test]
    fn pattern_maps_read_the_lines_every_filter_matches() {
        let lines = split(r#"{"by": "lines", "size": 10}"#);
        let filter = |patterns: &[&str]| {
            let filters: Vec<Filter> = patterns
                .iter()
                .map(|p| Filter::Regex((*p).into()))
                .collect();
            RecordFilter::new(&filters.iter().collect::<Vec<_>>(), &lines).expect("valid")
        };
        let log = "label=shipping amount=5\nlabel=fraud amount=7\nLABEL=Shipping amount=11\nlast label=shipping";
        assert_eq!(
            filter(&["label=shipping"]).apply(log.to_owned()),
            "label=shipping amount=5\nLABEL=Shipping amount=11\nlast label=shipping"
        );
        assert_eq!(
            filter(&["label=shipping", "amount"]).apply(log.to_owned()),
            "label=shipping amount=5\nLABEL=Shipping amount=11\n"
        );
        assert_eq!(filter(&[]).apply(log.to_owned()), log);
    }

    #[test]
    fn a_where_condition_keeps_the_records_it_holds_for() {
        let lines = split(r#"{"by": "lines", "size": 10}"#);
        let born = Filter::Where("year > 2000".into());
        let oslo = Filter::Regex("city=oslo".into());
        let people = "person=a city=Oslo year=2003\nperson=b city=Lima year=1999\nperson=c city=Oslo year=1980\nperson=d city=Lima year=2001\n";
        let filter = RecordFilter::new(&[&born], &lines).expect("valid");
        assert_eq!(
            filter.apply(people.to_owned()),
            "person=a city=Oslo year=2003\nperson=d city=Lima year=2001\n"
        );
        let both = RecordFilter::new(&[&born, &oslo], &lines).expect("valid");
        assert_eq!(
            both.apply(people.to_owned()),
            "person=a city=Oslo year=2003\n"
        );
        // A question asks a model per piece: it chooses no records.
        let asked = Filter::Ask("is it about Oslo?".into());
        let none = RecordFilter::new(&[&asked], &lines).expect("valid");
        assert_eq!(none.apply(people.to_owned()), people);
    }

    #[test]
    fn every_reduction_the_tools_offer_is_one_a_plan_runs() {
        for op in crate::env::tools::REDUCE_OPS {
            let reduce = match op {
                "top_k" => serde_json::json!({"op": op, "k": 1}),
                "ask" => serde_json::json!({"op": op, "instruction": "merge"}),
                _ => serde_json::json!({"op": op}),
            };
            let parsed = serde_json::from_value::<rlm_plan::Reduce>(reduce);
            assert!(parsed.is_ok(), "{op}: {parsed:?}");
        }
    }

    #[test]
    fn under_a_regex_split_a_filter_keeps_whole_records() {
        // A record of several lines (a header and its details): the filter's match on
        // one line keeps the lines the pattern reads on the others.
        let records = split(r#"{"by": "regex", "pattern": "^Record"}"#);
        let shipping = Filter::Regex("label=shipping".into());
        let filter = RecordFilter::new(&[&shipping], &records).expect("valid");
        let log = "preamble\nRecord 1 label=shipping\n  amount=5\nRecord 2 label=fraud\n  amount=7\nRecord 3 label=shipping\n  amount=11\n";
        assert_eq!(
            filter.apply(log.to_owned()),
            "Record 1 label=shipping\n  amount=5\nRecord 3 label=shipping\n  amount=11\n"
        );
    }
}

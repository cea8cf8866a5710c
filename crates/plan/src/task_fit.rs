//! Plans whose shape cannot give the kind of answer their task asks for, refused
//! before any call with the plan that can. Each was seen in the after-tools-2 or -3
//! reading (docs/eval.md), where a 1.5B model wrote plans through `ctx_map_reduce`:
//!
//! - an `ask` map that asks every piece "how many…" while a filter (or the question
//!   itself) already names what to count: each leaf read a 3 300-token piece and
//!   answered "3", and the sum of the leaves' guesses was the answer. A `count` map of
//!   that pattern is exact and asks no model.
//! - an `extract` map reduced by `count` (or `sum`, `min`, `max`) for a task that asks
//!   which value is the most frequent, how many are distinct, or how many pairs share
//!   one: the plan answered how many values there were (596) instead of which.
//! - a `count` of a field's name for a task that asks for the sum of that field: it
//!   counted the records (36) instead of adding their amounts.
//! - an `ask` map under a filter whose regex already captures the values a task ranks
//!   (`label=(\w+)` for "which label appears in the most records"): each leaf counted
//!   the labels of its piece, and no reduction of those lists says which is the most
//!   (after-tools-3, items 1 and 4). An `extract` of the filter's pattern lists them.
//!
//! Where one plan answers the task exactly, a refusal carries it ([`Refusal::exact`]):
//! the orchestrator runs it in place of the same refused plan written again (the
//! local model repeated a refused plan word for word and then guessed, docs/eval.md,
//! after-tools-7).
//!
//! The same reading of the task gives [`exact_plan_for_question`], the plan a question
//! a summary would guess ("how many `key=value`", "which label is the most") should be
//! answered with instead.
//!
//! The checks read only the plan and the task's words; a plan they do not recognise
//! runs as written.

use std::sync::LazyLock;

use regex::Regex;

use crate::condition::Condition;
use crate::reduce::{called_value_reduction, value_reductions};
use crate::spec::{Filter, Map, Plan, Reduce};
use crate::words::{mentions, words};
use crate::PlanError;

/// Words of a task that ask about the values themselves, not one number of them: the
/// most frequent, the distinct ones, the pairs that share one.
const ABOUT_THE_VALUES: [&str; 6] = ["most", "frequent", "common", "distinct", "unique", "pair"];

/// Why a plan cannot answer its task, and the plan that can when there is exactly one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What is wrong and what to write instead, for the model.
    pub message: String,
    /// The plan that answers the task exactly, where the refusal names one: the
    /// refused plan with its map or reduction replaced, its input, split and (where
    /// kept) filter as the model wrote them.
    pub exact: Option<Plan>,
}

impl Refusal {
    fn new(message: String, exact: Option<Plan>) -> Self {
        Self { message, exact }
    }

    /// The refusal that names `exact`, its message written around the plan's parts
    /// ([`parts_of`]).
    fn offering(exact: Plan, message: impl FnOnce(&str) -> String) -> Self {
        let message = message(&parts_of(&exact));
        Self::new(message, Some(exact))
    }
}

/// The task's `exact` plan over the pieces `written` reads: its input and split kept.
fn over_the_same_pieces(exact: Plan, written: &Plan) -> Plan {
    Plan {
        input: written.input.clone(),
        split: written.split.clone(),
        ..exact
    }
}

/// Refuses `plan` when its map or reduction cannot answer `task`, saying which plan
/// can.
pub fn check(plan: &Plan, task: &str) -> Result<(), PlanError> {
    refusal(plan, task).map_or(Ok(()), |refusal| Err(PlanError::Shape(refusal.message)))
}

/// Why `plan` cannot answer `task` ([`check`]), with the exact plan where there is
/// one; `None` when it may run.
pub fn refusal(plan: &Plan, task: &str) -> Option<Refusal> {
    // Before `counting_ask`: a leaf asked "how many label=fraud" under such a filter is
    // still a ranking task, not a count.
    // The field and the filter before the reduction: a refusal of the reduction keeps
    // the model's filter and extract, and one that kept a filter on something else was
    // answered as named (docs/eval.md, s20-seed23 plan `pairs` item 0).
    ask_over_captured_values(plan, task)
        .or_else(|| counting_ask(plan, task))
        .or_else(|| extract_of_another_field(plan, task))
        .or_else(|| count_for_the_values(plan, task))
        .or_else(|| filter_left_out(plan, task))
        .or_else(|| another_value_reduction(plan, task))
        .or_else(|| extract_reduced_as_a_number(plan, task))
        .or_else(|| count_for_a_sum(plan, task))
}

/// The checks that read a map alone, for `ctx_map` (a plan written a step at a time):
/// why `map` under `filter`, the last filter that kept its pieces, cannot answer
/// `task`; `None` when it may run. The reduction is not known yet, so only the `ask`
/// maps that cannot answer `task` are refused (the local model split, then asked every
/// piece "how many records have label=payments", docs/eval.md, js-1). The refusal's
/// exact plan names the map to run in its place and the reduction that answers the
/// task with its results; its input and split are placeholders (the pieces are cut).
pub fn map_refusal(map: &Map, filter: Option<&Filter>, task: &str) -> Option<Refusal> {
    let plan = of_context(filter.cloned(), map.clone(), Reduce::Sum);
    ask_over_captured_values(&plan, task).or_else(|| counting_ask(&plan, task))
}

/// `plan` with `map` and `reduce` in place of its own.
fn with(plan: &Plan, map: Map, reduce: Reduce) -> Plan {
    Plan {
        map,
        reduce,
        ..plan.clone()
    }
}

/// The refusal of an `ask` map that asks each piece to count: with the task's exact
/// plan when the task sums a field or ranks its values, or when the count names no
/// pattern ([`counted_without_a_pattern`]); else with the count of what a pattern names
/// exactly: a filter on a field (`label=payments`, `year > 2000`), or a `key=value` in
/// the question or the task. A filter on a plain word (`payment`) may keep more than
/// the question counts ("failed payments", said in many ways): that ask runs.
fn counting_ask(plan: &Plan, task: &str) -> Option<Refusal> {
    let Map::Ask(question) = &plan.map else {
        return None;
    };
    let bare = names_only_what_to_count(question, task);
    if !asks_a_count(question) && !bare {
        return None;
    }
    let lead = if bare {
        format!("`map.ask` sends each piece only {}, so a model reads it and answers as it likes, and the sum of its answers is not a count", json(question.trim()))
    } else {
        "`map.ask` asks each piece \"how many\", and a model's count of a piece it reads is not exact (it guesses)".to_owned()
    };
    // A task that sums a field or ranks its values is not answered by the count the
    // question asks (s18c-seed16 plan-text `aggregate` item 2: "how many records have
    // label=fraud" for the sum of their amounts, and the count ran in its place).
    let task_plan = exact_plan_for_task(task);
    let sums_or_ranks = task_plan.as_ref().is_some_and(|exact| {
        matches!(
            (&exact.map, &exact.reduce),
            (
                Map::Extract(_),
                Reduce::Sum | Reduce::TopK { .. } | Reduce::Vote
            )
        )
    });
    if sums_or_ranks {
        return counted_without_a_pattern(plan, task_plan, &lead);
    }
    let (pattern, whence) = match &plan.filter {
        Some(Filter::Regex(pattern)) if key_value(pattern) == Some(pattern.trim()) => {
            (pattern.trim().to_owned(), "your filter already picks")
        }
        Some(Filter::Where(text)) => (
            Condition::parse(text).ok()?.field().to_owned(),
            "names the field of the records your filter keeps",
        ),
        Some(Filter::Ask(_)) => return None,
        Some(Filter::Regex(_)) | None => match key_value(question).or_else(|| key_value(task)) {
            Some(key_value) => (key_value.to_owned(), "the task names"),
            None => return counted_without_a_pattern(plan, task_plan, &lead),
        },
    };
    if mentions(task, &["pair"]) || mentions(question, &["pair"]) {
        let key = shared_key(task);
        // The whole plan, the model's own filter in it: told to "keep your filter", the
        // model rebuilt the plan from step tools without it and counted the pairs of
        // every record (after-tools-4, pairs items 0 and 4).
        let filter = plan
            .filter
            .as_ref()
            .and_then(filter_part)
            .map_or(String::new(), |part| format!("{part}, "));
        let extract = format!("{}=(\\w+)", key.unwrap_or("KEY"));
        return Some(Refusal::new(
            format!(
                "{lead}. For how many pairs share a value, list the values with no model and let the reduction count the pairs, in one plan: {filter}map {{\"extract\": {}}}, reduce {{\"op\": \"pairs\"}}",
                json(&extract)
            ),
            key.map(|_| with(plan, Map::Extract(extract), Reduce::Pairs)),
        ));
    }
    Some(Refusal::new(
        format!(
            "{lead}. {} {whence}: map {{\"count\": {}}}, reduce {{\"op\": \"sum\"}} counts its matches exactly, with no model call",
            json(&pattern),
            json(&pattern)
        ),
        Some(with(plan, Map::Count(pattern), Reduce::Sum)),
    ))
}

/// The refusal of a counting `ask` with `task_plan`, the task's exact plan, when its
/// words name one: for an ask that names no pattern to count ("How many times does the label
/// 'fraud' appear?" — the local model asked that of every piece, one label after
/// another, six model calls a label, for "which label appears in the most records":
/// docs/eval.md, s18c-seed16 plan-text `aggregate` item 1), and for any count asked
/// where the task sums a field or ranks its values. `None` when the task names no
/// plan: the ask runs.
fn counted_without_a_pattern(plan: &Plan, task_plan: Option<Plan>, lead: &str) -> Option<Refusal> {
    Some(Refusal::offering(
        over_the_same_pieces(task_plan?, plan),
        |parts| format!("{lead}. Answer the task exactly, with no model call: {parts}"),
    ))
}

/// The refusal of an `ask` map under a filter whose regex captures a value (`label=(\w+)`)
/// when the task asks about the values themselves: the capture lists them exactly, and
/// leaves' counts of them cannot be reduced to which is the most.
fn ask_over_captured_values(plan: &Plan, task: &str) -> Option<Refusal> {
    let (Map::Ask(_), Some(Filter::Regex(pattern))) = (&plan.map, &plan.filter) else {
        return None;
    };
    let captures = crate::pattern::compile(pattern).is_ok_and(|re| re.captures_len() > 1);
    if !captures || !mentions(task, &ABOUT_THE_VALUES) {
        return None;
    }
    let exact = called_value_reduction(task).map(|reduce| Plan {
        filter: None,
        ..with(plan, Map::Extract(pattern.clone()), reduce)
    });
    Some(Refusal::new(
        format!(
            "`map.ask` has a model count the values in each piece, and no reduction of those counts says which value this task asks for. Your filter's group already captures the values: list them with no model, map {{\"extract\": {}}} (no filter needed), then {}",
            json(pattern),
            value_reductions(task, None).join("; ")
        ),
        exact,
    ))
}

/// The refusal of an `extract` reduced to a number where the task asks about the
/// values themselves (the most frequent, the distinct ones, the pairs).
fn extract_reduced_as_a_number(plan: &Plan, task: &str) -> Option<Refusal> {
    let Map::Extract(_) = &plan.map else {
        return None;
    };
    let op = match plan.reduce {
        Reduce::Count => "count",
        Reduce::Sum => "sum",
        Reduce::Min => "min",
        Reduce::Max => "max",
        _ => return None,
    };
    if !mentions(task, &ABOUT_THE_VALUES) {
        return None;
    }
    let exact = called_value_reduction(task).map(|reduce| with(plan, plan.map.clone(), reduce));
    Some(Refusal::new(
        format!(
            "the extract gives values, and `{op}` makes one number of them, which is not what this task asks: {}",
            value_reductions(task, Some(&plan.reduce)).join("; ")
        ),
        exact,
    ))
}

/// The refusal of an `extract` that does not read the field the task asks about, when
/// the task's exact plan extracts that field (`label=(\w+)` for "which label appears in
/// the most records"): it captures other text, every word of a record for `(\w+)`, and
/// its most frequent item is no value of the field. The local model, told its
/// `{"extract": "label"}` had no group, wrote `(\w+)` and answered `03`, a part of the
/// records' times (docs/eval.md, s18c-seed16 plan `aggregate` item 4).
fn extract_of_another_field(plan: &Plan, task: &str) -> Option<Refusal> {
    let Map::Extract(pattern) = &plan.map else {
        return None;
    };
    let exact = exact_plan_for_task(task)?;
    let Map::Extract(field_pattern) = &exact.map else {
        return None;
    };
    let field = field_pattern.split_once('=')?.0.to_owned();
    // The field its first group captures, where it names one (`user` of `user=(\w+)
    // city=(\w+)`: s19-seed19 plan `pairs` item 0 paired users, not cities); else the
    // field named anywhere in it.
    let reads_the_field = match captured_field(pattern) {
        Some(captured) => captured.eq_ignore_ascii_case(&field),
        None => pattern.to_lowercase().contains(&field.to_lowercase()),
    };
    if reads_the_field {
        return None;
    }
    Some(Refusal::offering(
        over_the_same_pieces(exact, plan),
        |parts| {
            format!(
            "the task asks about the `{field}=` values, and map {{\"extract\": {}}} captures other text of the records, so its results are no `{field}=` values. Answer the task exactly with {parts}",
            json(pattern)
        )
        },
    ))
}

/// The refusal of a plan with no filter, or a filter on something else, where the
/// task's exact plan selects its records by one (`label=payments`, `year > 2000`) and
/// the plan's map does not name it: it adds, ranks or pairs other records. The local
/// model was told the exact plan, sent it without its filter, and answered the sum of
/// every amount, 289680 for 11810 (docs/eval.md, s19c-seed21 plan-text `aggregate` item
/// 2); it filtered the pairs task's records by `person`, which every record names, and
/// answered the pairs of all of them, 34555 for 3752 (s20-seed23 plan `pairs` item 0).
fn filter_left_out(plan: &Plan, task: &str) -> Option<Refusal> {
    if matches!(plan.map, Map::Ask(_) | Map::Plan(_)) {
        return None;
    }
    let exact = exact_plan_for_task(task)?;
    let task_filter = exact.filter.as_ref()?;
    let filter = written_filter(task_filter)?;
    let selected = match task_filter {
        Filter::Regex(pattern) | Filter::Where(pattern) => pattern.to_lowercase(),
        Filter::Ask(_) => return None,
    };
    let map_names_it = match &plan.map {
        Map::Count(pattern) | Map::Extract(pattern) => pattern.to_lowercase().contains(&selected),
        _ => false,
    };
    if map_names_it {
        return None;
    }
    let what_it_reads = match &plan.filter {
        None => "this plan has no filter, so it reads every record".to_owned(),
        Some(own) if selects_by_the_same(own, task_filter) => return None,
        Some(own) => format!(
            "your filter {} does not select by that, so the plan reads other records",
            written_filter(own)?
        ),
    };
    Some(Refusal::offering(
        over_the_same_pieces(exact, plan),
        |parts| {
            format!(
            "the task asks only about the records that {filter} keeps, and {what_it_reads}. Answer the task exactly with {parts}"
        )
        },
    ))
}

/// Whether `own`, a plan's filter, selects records by what `task_filter` does: a
/// condition on the same field, or a regex that names the field and a number
/// (`year=(20[0-9][1-9])`), for a stated comparison; a filter naming the value
/// (`payments`, `label=payments`) for a `key=value`. A filter that only names the
/// field (`year`, which every record has) does not; one this cannot read (an `ask`,
/// a condition that does not parse) is let run.
fn selects_by_the_same(own: &Filter, task_filter: &Filter) -> bool {
    let field_of = |condition: &str| {
        Condition::parse(condition)
            .ok()
            .map(|c| c.field().to_lowercase())
    };
    match (task_filter, own) {
        (Filter::Ask(_), _) | (_, Filter::Ask(_)) => true,
        (Filter::Where(condition), Filter::Where(text)) => {
            match (field_of(condition), field_of(text)) {
                (Some(field), Some(own_field)) => field == own_field,
                _ => true,
            }
        }
        (Filter::Where(condition), Filter::Regex(pattern)) => {
            field_of(condition).is_none_or(|field| {
                let pattern = pattern.to_lowercase();
                pattern.contains(&field) && pattern.contains(|c: char| c.is_ascii_digit())
            })
        }
        (Filter::Regex(key_value), Filter::Regex(text) | Filter::Where(text)) => {
            let value = key_value
                .split_once('=')
                .map_or(key_value.as_str(), |(_, v)| v);
            text.to_lowercase().contains(&value.to_lowercase())
        }
    }
}

/// The refusal of an `extract` reduced to another kind of answer about its values than
/// the task asks for — the most frequent for how many pairs share one, or the reverse:
/// the local model ranked the cities with `top_k` for the pairs task and, its next plan
/// refused, answered 0 (docs/eval.md, s20-seed23 plan `pairs` item 2).
fn another_value_reduction(plan: &Plan, task: &str) -> Option<Refusal> {
    let Map::Extract(_) = &plan.map else {
        return None;
    };
    let exact = exact_plan_for_task(task)?;
    let asked = answer_about_values(&exact.reduce)?;
    let given = answer_about_values(&plan.reduce)?;
    if asked == given {
        return None;
    }
    let written = spaced(&plan.reduce);
    Some(Refusal::offering(
        over_the_same_pieces(exact, plan),
        |parts| {
            format!(
                "reduce {written} gives {given}, and this task asks for {asked}. Answer the task exactly with {parts}"
            )
        },
    ))
}

/// What a reduction of extracted values answers, for the ones that answer about the
/// values themselves; `None` for one that makes a number of them.
fn answer_about_values(reduce: &Reduce) -> Option<&'static str> {
    match reduce {
        Reduce::Pairs => Some("the number of pairs that share a value"),
        Reduce::TopK { .. } | Reduce::Vote => Some("the most frequent values"),
        Reduce::Union | Reduce::Join { .. } => Some("each value once"),
        _ => None,
    }
}

/// The field whose value the first capturing group of `pattern` reads: the last name
/// written before that group, its escapes (`\s*`) left out (`user` of `user=(\w+)
/// city=(\w+)`, `city` of `city:\s*(\w+)`); `None` when the pattern has no capturing
/// group or no name comes before it.
fn captured_field(pattern: &str) -> Option<&str> {
    let group = first_capturing_group(pattern)?;
    last_name(&pattern[..group])
}

/// Where the first capturing group of `pattern` opens: a `(` not escaped, plain or
/// named (`(?P<name>`, `(?<name>`), not `(?:`, a flag group or a look-around.
fn first_capturing_group(pattern: &str) -> Option<usize> {
    let mut escaped = false;
    pattern.char_indices().find_map(|(at, c)| {
        let opens = !escaped && c == '(';
        escaped = !escaped && c == '\\';
        let rest = &pattern[at..];
        let capturing = !rest.starts_with("(?")
            || rest.starts_with("(?P<")
            || (rest.starts_with("(?<") && !rest.starts_with("(?<=") && !rest.starts_with("(?<!"));
        (opens && capturing).then_some(at)
    })
}

/// The last name in `text` (letters, digits and `_`, not starting with a digit), the
/// letter of an escape (`\s`, `\d`) not one.
fn last_name(text: &str) -> Option<&str> {
    let mut last = None;
    let mut start = None;
    let mut escaped = false;
    for (at, c) in text.char_indices() {
        if !escaped && (c.is_alphanumeric() || c == '_') {
            start.get_or_insert(at);
            continue;
        }
        if let Some(from) = start.take() {
            last = Some(&text[from..at]);
        }
        escaped = !escaped && c == '\\';
    }
    if let Some(from) = start {
        last = Some(&text[from..]);
    }
    last.filter(|name| !name.starts_with(|c: char| c.is_ascii_digit()))
}

/// The refusal of a `count` of a field's name for a task that asks for the sum of the
/// field's values: it counts the records that have the field (after-tools-3: `{"count":
/// "amount"}` gave 36 records for "the sum of the amount fields").
fn count_for_a_sum(plan: &Plan, task: &str) -> Option<Refusal> {
    let Map::Count(pattern) = &plan.map else {
        return None;
    };
    let field = pattern.trim().trim_end_matches(['=', ':']);
    let is_name = !field.is_empty() && field.chars().all(|c| c.is_alphanumeric() || c == '_');
    let named = words(task).any(|w| w == field.to_lowercase());
    // "The total number of error lines" asks for a count.
    if !is_name || !named || !mentions(task, &["sum", "total"]) || asks_a_count(task) {
        return None;
    }
    let extract = format!("{field}=(\\d+)");
    Some(Refusal::new(
        format!(
            "`map.count` {} counts the records that name the field, not the sum of its values this task asks for: list the values with map {{\"extract\": {}}} and add them with reduce {{\"op\": \"sum\"}} (keep your filter)",
            json(pattern),
            json(&extract)
        ),
        Some(with(plan, Map::Extract(extract), Reduce::Sum)),
    ))
}

/// The refusal of a `count` map for a task about the values of a field — the one most
/// records hold, the pairs that share one — whose own exact plan lists them
/// ([`exact_plan_for_task`]): a count of one pattern is one number and says neither
/// (after-literal-seed6 `aggregate` item 1: `{"count": "label=loyalty"}` summed gave 32
/// for "which label appears in the most records", and 32 was answered).
fn count_for_the_values(plan: &Plan, task: &str) -> Option<Refusal> {
    let Map::Count(pattern) = &plan.map else {
        return None;
    };
    let exact = exact_plan_for_task(task)?;
    let what = match exact.reduce {
        Reduce::Pairs => "count the pairs",
        Reduce::TopK { .. } => "rank them",
        _ => return None,
    };
    let exact = Plan {
        filter: exact.filter,
        map: exact.map,
        reduce: exact.reduce,
        ..plan.clone()
    };
    Some(Refusal::new(
        format!(
            "`map.count` {} counts the matches of one pattern, one number, and this task asks about the values themselves: list them with no model and let the reduction {what}, in one plan: {}",
            json(pattern),
            parts_of(&exact)
        ),
        Some(exact),
    ))
}

/// The plan to name for a question a reading of the text would guess (a summary asked
/// it), as the parts of a plan (`filter …, map …, reduce …`): a count ("how many"), or
/// one about the values themselves (the most frequent, the pairs) or their sum; `None`
/// for any other question. The task's own exact plan ([`exact_plan_for_task`]) where
/// its words name one: the question is a step toward it, and a count of the question's
/// `key=value` would not answer a ranking or a pair count (after-literal-seed6
/// `aggregate` item 1: asked to count `label=loyalty` for "which label appears in the
/// most records", the model was named that count; item 4 asked a summary the task's
/// own question). Else, for a count, the question's `key=value` counted with a `count`
/// map, no model call — or, when `task` asks for the sum of a field of those records,
/// they are the filter and the field's values are extracted and added (after-tools-4:
/// told to count `label=shipping`, the model answered the count, 36, for "the sum of
/// the amount fields").
pub fn exact_plan_for_question(question: &str, task: &str) -> Option<String> {
    let adds = words(question).any(|w| w == "sum" || w == "total");
    if !asks_a_count(question) && !adds && !mentions(question, &ABOUT_THE_VALUES) {
        return None;
    }
    if let Some(plan) = exact_plan_for_task(task) {
        // The local model asked a summary "how many records have the label 'fraud'"
        // for "which label appears in the most records"; four 6 500-token sub-calls
        // later it answered 2 (docs/eval.md, after-review `aggregate` item 1).
        return Some(parts_of(&plan));
    }
    let pattern = counted_pattern(question)?.to_owned();
    let plan = match summed_field(task) {
        Some(field) => of_context(
            Some(Filter::Regex(pattern)),
            Map::Extract(format!("{field}=(\\d+)")),
            Reduce::Sum,
        ),
        None => of_context(None, Map::Count(pattern), Reduce::Sum),
    };
    Some(parts_of(&plan))
}

/// The plan that answers `task` exactly, when its words say which: a count of the
/// `key=value` it names ("how many records have label=payments"), the sum of a field
/// over the records with that `key=value` ("the sum of the amount fields of the records
/// with label=shipping"), the pairs of records sharing a field ("how many pairs … live
/// in the same city"), or the value of a field that most records hold ("which label
/// appears in the most records") — the last two over the records the task picks by a
/// `key=value` or a stated comparison ("(year > 2000)"), else over all. `None` for any
/// other task. Its input is `context` and its split the default: a caller puts in its
/// own. A plan that copied the worked example's question carries it (the local model
/// copied that question as its `ctx_map` ask twice for the sum of a field, docs/eval.md,
/// after-map-repeat `aggregate` item 2).
pub fn exact_plan_for_task(task: &str) -> Option<Plan> {
    if mentions(task, &["pair"]) {
        let key = shared_key(task)?;
        return Some(of_context(
            picked_records(task),
            Map::Extract(format!("{key}=(\\w+)")),
            Reduce::Pairs,
        ));
    }
    if let Some(field) = ranked_field(task) {
        let reduce = called_value_reduction(task)?;
        return Some(of_context(
            picked_records(task),
            Map::Extract(format!("{field}=(\\w+)")),
            reduce,
        ));
    }
    let key_value = key_value(task)?.to_owned();
    if let Some(field) = summed_field(task) {
        return Some(of_context(
            Some(Filter::Regex(key_value)),
            Map::Extract(format!("{field}=(\\d+)")),
            Reduce::Sum,
        ));
    }
    asks_a_count(task).then(|| of_context(None, Map::Count(key_value), Reduce::Sum))
}

/// The filter that keeps the records `task` is about: the `key=value` it names, else
/// the comparison it states; `None` when it names neither (all records).
fn picked_records(task: &str) -> Option<Filter> {
    key_value(task)
        .map(|pattern| Filter::Regex(pattern.to_owned()))
        .or_else(|| stated_condition(task).map(Filter::Where))
}

/// A comparison of a field with a number written in `task` ("born after 2000 (year >
/// 2000)" → `year > 2000`), when it reads as a filter condition.
fn stated_condition(task: &str) -> Option<String> {
    static COMPARISON: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r"\b[A-Za-z_][A-Za-z0-9_]*[ \t]*(?:>=|<=|!=|==|>|<)[ \t]*-?\d+(?:\.\d+)?").ok()
    });
    let text = COMPARISON.as_ref()?.find(task)?.as_str().to_owned();
    Condition::parse(&text).ok().map(|_| text)
}

/// The field whose most (or least) frequent value `task` asks for, among records or
/// lines: the word after "which" or "what" ("Which label appears in the most records"
/// → `label`); `None` when that word names no field ("which of these words", "what
/// is the sum").
fn ranked_field(task: &str) -> Option<String> {
    const NOT_A_FIELD: [&str; 10] = [
        "of", "one", "is", "are", "was", "the", "a", "an", "word", "words",
    ];
    if !mentions(task, &["record", "line", "entr", "row"]) {
        return None;
    }
    let mut words = words(task);
    words.find(|w| w == "which" || w == "what")?;
    words.next().filter(|w| !NOT_A_FIELD.contains(&w.as_str()))
}

/// A plan of the context (the default split) with `filter`, `map` and `reduce`: what
/// the task readings above name, and the stand-in whole plan of a `ctx_map` step.
fn of_context(filter: Option<Filter>, map: Map, reduce: Reduce) -> Plan {
    Plan {
        input: "context".to_owned(),
        split: crate::spec::Split::default(),
        filter,
        map,
        reduce,
    }
}

/// `plan` written as a refusal names it: `filter {"regex": …}, map {…}, reduce {…}`
/// (JSON with a space after each `:` and `,`, as the messages write it).
pub fn parts_of(plan: &Plan) -> String {
    call_parts(plan)
        .iter()
        .map(|(name, part)| format!("{name} {part}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `plan`'s filter (unless it asks a model), map and reduction, each named and written
/// as [`parts_of`] writes it:
/// the arguments of a `map_reduce` call.
pub fn call_parts(plan: &Plan) -> Vec<(&'static str, String)> {
    let mut parts = Vec::with_capacity(3);
    if let Some(filter) = plan.filter.as_ref().and_then(written_filter) {
        parts.push(("filter", filter));
    }
    parts.push(("map", spaced(&plan.map)));
    parts.push(("reduce", spaced(&plan.reduce)));
    parts
}

/// `part` as JSON with a space after each `:` and `,` (`{"op": "top_k", "k": 1}`).
fn spaced(part: &impl serde::Serialize) -> String {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, Spaced);
    match part.serialize(&mut serializer) {
        Ok(()) => String::from_utf8_lossy(&out).into_owned(),
        Err(_) => String::new(),
    }
}

/// The JSON formatter of [`spaced`].
struct Spaced;

impl serde_json::ser::Formatter for Spaced {
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        separate(writer, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        separate(writer, first)
    }
}

/// The `, ` before every key or item but the first.
fn separate<W: ?Sized + std::io::Write>(writer: &mut W, first: bool) -> std::io::Result<()> {
    if first {
        Ok(())
    } else {
        writer.write_all(b", ")
    }
}

/// `text` as a JSON string, as a plan holds it (`"label=(\\w+)"`).
fn json(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// A filter as a refusal writes it into a plan (`filter {"where": "year > 2000"}`);
/// `None` for an `ask` filter, which a refusal never repeats (it costs a model call a
/// piece).
fn filter_part(filter: &Filter) -> Option<String> {
    written_filter(filter).map(|filter| format!("filter {filter}"))
}

/// `filter` as spaced JSON (`{"where": "year > 2000"}`), unless it asks a model.
fn written_filter(filter: &Filter) -> Option<String> {
    (!matches!(filter, Filter::Ask(_))).then(|| spaced(filter))
}

/// The `key=value` that `question` asks to count ("How many lines match
/// 'label=shipping'?" → `label=shipping`), when it asks for a count of one: what a
/// `count` map counts exactly, where a model reading would guess.
fn counted_pattern(question: &str) -> Option<&str> {
    asks_a_count(question)
        .then(|| key_value(question))
        .flatten()
}

/// The field whose values `task` asks to add: the first word after "sum" or "total"
/// that names something ("the sum of the amount fields" → `amount`); `None` when the
/// task asks for a count ("the total number of lines").
fn summed_field(task: &str) -> Option<String> {
    const FILLER: [&str; 8] = ["of", "the", "all", "a", "an", "values", "value", "numbers"];
    if asks_a_count(task) {
        return None;
    }
    let mut words = words(task);
    words.find(|w| w == "sum" || w == "total")?;
    words.find(|w| !FILLER.contains(&w.as_str()))
}

/// True when `question` asks for a count: "how many…", "count…", "the number of…".
fn asks_a_count(question: &str) -> bool {
    let words: Vec<String> = words(question).collect();
    words.first().is_some_and(|w| w == "count")
        || words.windows(2).any(|pair| {
            matches!(
                (pair[0].as_str(), pair[1].as_str()),
                ("how", "many") | ("number", "of")
            )
        })
}

/// True when `question` is nothing but a `key=value` token of a `task` that asks "how
/// many": the local model sent `ctx_map(pieces, {ask: 'label=returns'})` for "How many
/// records have label=returns?" and waited out two 900-second timeouts on the leaves'
/// answers (docs/eval.md, after-shown-seed7 `aggregate` item 0).
fn names_only_what_to_count(question: &str, task: &str) -> bool {
    let question = question.trim();
    key_value(question) == Some(question) && key_value(task) == Some(question) && asks_a_count(task)
}

/// The field two items share, as a task names it: the word after "same" ("live in the
/// same city" → `city`).
fn shared_key(task: &str) -> Option<&str> {
    let mut words = task.split(|c: char| !c.is_alphanumeric() && c != '_');
    words.find(|w| w.eq_ignore_ascii_case("same"))?;
    words.find(|w| !w.is_empty())
}

/// The first `key=value` token of `text` (`label=payments`): what a count map counts
/// exactly.
fn key_value(text: &str) -> Option<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '=' | '_' | '.' | '-')))
        .map(|token| token.trim_matches(|c| c == '.' || c == '-'))
        .find(|token| {
            token.split_once('=').is_some_and(|(key, value)| {
                key.starts_with(|c: char| c.is_alphabetic())
                    && !value.is_empty()
                    && !value.contains('=')
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(json: &str) -> Plan {
        Plan::from_json(json).expect("a valid plan")
    }

    fn refusal(json: &str, task: &str) -> Option<String> {
        check(&plan(json), task).err().map(|e| e.to_string())
    }

    const LABEL_COUNT: &str =
        "How many records in the context have label=payments? Answer with a number.";
    const MOST: &str =
        "Which label appears in the most records of the context? Answer with the label only.";
    const PAIRS: &str = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";

    #[test]
    fn a_count_asked_for_a_sum_task_is_told_the_sum_plan_not_the_count() {
        // The s18c-seed16 reading's plan-text `aggregate` item 2, as the model wrote it:
        // the count it named ran in place and 194 records was the answer.
        let task = "What is the sum of the amount fields of the records with label=fraud? Answer with a number.";
        let refused = refusal(
            r#"{"input": "context", "map": {"ask": "How many records have label=fraud? Answer with a number."}, "reduce": {"op": "sum"}}"#,
            task,
        )
        .expect("refused");
        assert!(
            refused.contains(r#"filter {"regex": "label=fraud"}, map {"extract": "amount=(\\d+)"}, reduce {"op": "sum"}"#),
            "{refused}"
        );
    }

    #[test]
    fn a_count_asked_of_one_value_for_a_ranking_task_is_told_the_task_s_plan() {
        // The s18c-seed16 reading's plan-text `aggregate` item 1, as the model wrote it.
        let refused = refusal(
            r#"{"input": "context", "map": {"ask": "How many times does the label 'fraud' appear in the context? Answer with a number."},
                "reduce": {"op": "sum"}}"#,
            MOST,
        )
        .expect("refused");
        assert!(
            refused.contains(r#"exactly, with no model call: map {"extract": "label=(\\w+)"}, reduce {"op": "top_k", "k": 1}"#),
            "{refused}"
        );
        // A count asked for a task that names no plan still runs.
        assert_eq!(
            refusal(
                r#"{"input": "context", "map": {"ask": "How many failed payments are there?"}, "reduce": {"op": "sum"}}"#,
                "Summarise the failures."
            ),
            None
        );
    }

    #[test]
    fn a_plan_without_the_task_s_filter_is_told_the_exact_plan() {
        // The s19c-seed21 reading's plan-text `aggregate` item 2, as the model wrote it.
        let sum = "What is the sum of the amount fields of the records with label=payments? Answer with a number.";
        let refused = refusal(
            r#"{"input": "context", "map": {"extract": "amount=(\\d+)"}, "reduce": {"op": "sum"}}"#,
            sum,
        )
        .expect("refused");
        assert!(
            refused.contains(r#"only about the records that {"regex": "label=payments"} keeps"#)
                && refused.contains(r#"exactly with filter {"regex": "label=payments"}, map {"extract": "amount=(\\d+)"}, reduce {"op": "sum"}"#),
            "{refused}"
        );
        // The pairs task's where filter, left out: refused alike.
        let pairs = refusal(
            r#"{"input": "context", "map": {"extract": "city=(\\w+)"}, "reduce": {"op": "pairs"}}"#,
            PAIRS,
        )
        .expect("refused");
        assert!(
            pairs.contains(r#"{"where": "year > 2000"} keeps"#),
            "{pairs}"
        );
        // A map that names the selection itself, a plan with a filter, a task that
        // selects nothing: they run.
        for (json, task) in [
            (
                r#"{"input": "context", "map": {"count": "label=payments"}, "reduce": {"op": "sum"}}"#,
                "How many records in the context have label=payments? Answer with a number.",
            ),
            (
                r#"{"input": "context", "filter": {"regex": "payments"}, "map": {"extract": "amount=(\\d+)"}, "reduce": {"op": "sum"}}"#,
                sum,
            ),
            (
                r#"{"input": "context", "map": {"extract": "label=(\\w+)"}, "reduce": {"op": "top_k", "k": 1}}"#,
                MOST,
            ),
        ] {
            assert_eq!(refusal(json, task), None, "{json}");
        }
    }

    #[test]
    fn a_filter_on_something_else_is_told_the_exact_plan() {
        // The s20-seed23 reading's plan `pairs` items 0 and 2, as the model wrote them.
        let exact = r#"exactly with filter {"where": "year > 2000"}, map {"extract": "city=(\\w+)"}, reduce {"op": "pairs"}"#;
        for (json, its_filter) in [
            (
                r#"{"input": "context", "split": {"by": "lines", "size": 20000}, "filter": {"regex": "person"},
                    "map": {"extract": "city=(\\w+) year=(\\d+)"}, "reduce": {"op": "pairs"}}"#,
                r#"your filter {"regex": "person"} does not select by that"#,
            ),
            (
                r#"{"input": "context", "filter": {"regex": "year"}, "map": {"extract": "city=(\\w+)"}, "reduce": {"op": "pairs"}}"#,
                r#"your filter {"regex": "year"} does not select by that"#,
            ),
            (
                r#"{"input": "context", "filter": {"regex": "city"}, "map": {"extract": "city=(\\w+)"}, "reduce": {"op": "top_k", "k": 2}}"#,
                r#"your filter {"regex": "city"} does not select by that"#,
            ),
        ] {
            let refused = refusal(json, PAIRS).expect("refused");
            assert!(
                refused.contains(r#"only about the records that {"where": "year > 2000"} keeps"#)
                    && refused.contains(its_filter)
                    && refused.contains(exact),
                "{refused}"
            );
        }
        // A filter on the task's field and a number, or on its condition, or naming the
        // task's value: they run.
        let sum = "What is the sum of the amount fields of the records with label=payments? Answer with a number.";
        for (json, task) in [
            (
                r#"{"input": "context", "filter": {"where": "year >= 2001"}, "map": {"extract": "city=(\\w+)"}, "reduce": {"op": "pairs"}}"#,
                PAIRS,
            ),
            (
                r#"{"input": "context", "filter": {"regex": "year=(20[0-9][1-9])"}, "map": {"extract": "city=(\\w+)"}, "reduce": {"op": "pairs"}}"#,
                PAIRS,
            ),
            (
                r#"{"input": "context", "filter": {"regex": "label=payments"}, "map": {"extract": "amount=(\\d+)"}, "reduce": {"op": "sum"}}"#,
                sum,
            ),
            (
                r#"{"input": "context", "filter": {"ask": "Is the person born after 2000?"}, "map": {"extract": "city=(\\w+)"}, "reduce": {"op": "pairs"}}"#,
                PAIRS,
            ),
        ] {
            assert_eq!(refusal(json, task), None, "{json}");
        }
        // A filter on another value of the task's field is one on something else.
        let other = refusal(
            r#"{"input": "context", "filter": {"regex": "label=fraud"}, "map": {"extract": "amount=(\\d+)"}, "reduce": {"op": "sum"}}"#,
            sum,
        )
        .expect("refused");
        assert!(
            other.contains(
                r#"filter {"regex": "label=payments"}, map {"extract": "amount=(\\d+)"}"#
            ),
            "{other}"
        );
    }

    #[test]
    fn a_ranking_for_a_pairs_task_or_pairs_for_a_ranking_is_told_the_exact_plan() {
        let refused = refusal(
            r#"{"input": "context", "filter": {"where": "year > 2000"}, "map": {"extract": "city=(\\w+)"}, "reduce": {"op": "top_k", "k": 2}}"#,
            PAIRS,
        )
        .expect("refused");
        assert!(
            refused.contains(r#"reduce {"op": "top_k", "k": 2} gives the most frequent values, and this task asks for the number of pairs that share a value"#)
                && refused.contains(r#"reduce {"op": "pairs"}"#),
            "{refused}"
        );
        let ranked = refusal(
            r#"{"input": "context", "map": {"extract": "label=(\\w+)"}, "reduce": {"op": "pairs"}}"#,
            MOST,
        )
        .expect("refused");
        assert!(
            ranked.contains(r#"map {"extract": "label=(\\w+)"}, reduce {"op": "top_k", "k": 1}"#),
            "{ranked}"
        );
        // Another reduction that answers the same: it runs.
        assert_eq!(
            refusal(
                r#"{"input": "context", "map": {"extract": "label=(\\w+)"}, "reduce": {"op": "vote"}}"#,
                MOST,
            ),
            None
        );
    }

    #[test]
    fn the_captured_field_is_the_last_name_before_the_first_group() {
        for (pattern, field) in [
            ("label=(\\w+)", Some("label")),
            ("user=(\\w+) city=(\\w+)", Some("user")),
            ("person \\d+: city=(\\w+)", Some("city")),
            ("city:\\s*(\\w+)", Some("city")),
            ("city=(?P<c>\\w+)", Some("city")),
            ("(?:city|town)=(\\w+)", Some("town")),
            ("(?i)city=(\\w+)", Some("city")),
            ("(\\w+)", None),
            ("city=\\w+", None),
            ("\\(city\\)", None),
            ("2026=(\\w+)", None),
        ] {
            assert_eq!(captured_field(pattern), field, "{pattern}");
        }
    }

    #[test]
    fn an_extract_that_does_not_read_the_task_s_field_is_told_the_field_s_extract() {
        // The s18c-seed16 reading's plan `aggregate` item 4, as the model wrote it.
        let refused = refusal(
            r#"{"input": "context", "split": {"by": "lines", "size": 20000},
                "filter": {"regex": "label"}, "map": {"extract": "(\\w+)"},
                "reduce": {"op": "top_k", "k": 1}}"#,
            MOST,
        )
        .expect("refused");
        assert!(
            refused.contains(r#"map {"extract": "(\\w+)"} captures other text"#)
                && refused.contains(r#"exactly with map {"extract": "label=(\\w+)"}, reduce {"op": "top_k", "k": 1}"#),
            "{refused}"
        );
        // The pairs task's field, read by another extract: refused alike.
        let pairs = refusal(
            r#"{"input": "context", "map": {"extract": "year=(\\d+)"}, "reduce": {"op": "pairs"}}"#,
            PAIRS,
        )
        .expect("refused");
        assert!(pairs.contains("the `city=` values"), "{pairs}");
        // The field named, but the first group reads another (s19-seed19 plan `pairs`
        // item 0: `user=(\w+) city=(\w+)`, pairs of users, none found, 0 answered).
        let users = refusal(
            r#"{"input": "context", "filter": {"where": "year > 2000"}, "map": {"extract": "user=(\\w+) city=(\\w+)"}, "reduce": {"op": "pairs"}}"#,
            PAIRS,
        )
        .expect("refused");
        assert!(
            users.contains("the `city=` values")
                && users.contains(r#"map {"extract": "city=(\\w+)"}"#),
            "{users}"
        );
        // The field read, in any case, and a task with no exact plan: the plan runs.
        for (json, task) in [
            (
                r#"{"input": "context", "map": {"extract": "Label=(\\w+)"}, "reduce": {"op": "top_k", "k": 1}}"#,
                MOST,
            ),
            (
                r#"{"input": "context", "map": {"extract": "(\\w+)"}, "reduce": {"op": "top_k", "k": 1}}"#,
                "Which words are the most frequent?",
            ),
        ] {
            assert_eq!(refusal(json, task), None, "{json}");
        }
    }

    #[test]
    fn an_ask_map_counting_what_its_filter_picks_is_told_the_count_map() {
        // The after-tools-2 reading's item 0, as the model wrote it.
        let text = refusal(
            r#"{"input": "context", "filter": {"regex": "label=payments"},
                "map": {"ask": "How many records have label=payments?"},
                "reduce": {"op": "sum"}}"#,
            LABEL_COUNT,
        )
        .expect("refused");
        assert!(
            text.contains(r#"map {"count": "label=payments"}, reduce {"op": "sum"}"#),
            "{text}"
        );
        assert!(text.contains("your filter already picks"), "{text}");
    }

    #[test]
    fn without_a_filter_the_question_s_key_value_is_the_pattern() {
        let text = refusal(
            r#"{"input": "context", "map": {"ask": "Count the records with label=fraud."},
                "reduce": {"op": "sum"}}"#,
            "How many records have label=fraud?",
        )
        .expect("refused");
        assert!(text.contains(r#"{"count": "label=fraud"}"#), "{text}");
    }

    #[test]
    fn an_ask_of_only_the_task_s_key_value_is_a_count_asked_of_a_model() {
        // The after-shown-seed7 reading's `aggregate` item 0, as the model wrote it.
        let task = "How many records in the context have label=returns? Answer with a number.";
        let map = Map::Ask("label=returns".to_owned());
        let refused = map_refusal(&map, None, task).expect("refused");
        assert!(
            refused
                .message
                .contains(r#"map {"count": "label=returns"}, reduce {"op": "sum"}"#),
            "{}",
            refused.message
        );
        assert!(
            refused
                .message
                .contains(r#"sends each piece only "label=returns""#),
            "{}",
            refused.message
        );
        assert_eq!(
            refused.exact.map(|plan| plan.map),
            Some(Map::Count("label=returns".to_owned()))
        );
    }

    #[test]
    fn a_bare_key_value_ask_runs_when_the_task_counts_nothing_or_names_another() {
        let map = Map::Ask("label=returns".to_owned());
        assert_eq!(map_refusal(&map, None, MOST), None);
        assert_eq!(map_refusal(&map, None, LABEL_COUNT), None);
        let question = Map::Ask("Does this piece mention label=payments at all?".to_owned());
        assert_eq!(map_refusal(&question, None, LABEL_COUNT), None);
    }

    #[test]
    fn under_a_where_filter_its_field_is_counted() {
        let text = refusal(
            r#"{"input": "context", "filter": {"where": "year > 2000"},
                "map": {"ask": "How many persons are listed?"}, "reduce": {"op": "sum"}}"#,
            "How many persons were born after 2000?",
        )
        .expect("refused");
        assert!(text.contains(r#"{"count": "year"}"#), "{text}");
    }

    #[test]
    fn a_counting_ask_for_pairs_is_told_the_pairs_recipe_with_the_shared_field() {
        // The after-tools-2 reading's pairs item 0: a right filter, the whole question.
        let text = refusal(
            r#"{"input": "context", "filter": {"where": "year > 2000"},
                "map": {"ask": "How many pairs of persons live in the same city?"},
                "reduce": {"op": "sum"}}"#,
            PAIRS,
        )
        .expect("refused");
        assert!(
            text.contains(
                r#"in one plan: filter {"where": "year > 2000"}, map {"extract": "city=(\\w+)"}, reduce {"op": "pairs"}"#
            ),
            "{text}"
        );
    }

    #[test]
    fn asks_that_name_nothing_to_count_or_do_not_count_run() {
        // Nothing a pattern could count: the model reads.
        assert_eq!(
            refusal(
                r#"{"input": "context", "map": {"ask": "How many essays argue for startups?"},
                    "reduce": {"op": "sum"}}"#,
                "How many essays argue for startups?",
            ),
            None
        );
        // Not a count.
        assert_eq!(
            refusal(
                r#"{"input": "context", "filter": {"regex": "label=fraud"},
                    "map": {"ask": "Which user is named?"}, "reduce": {"op": "union"}}"#,
                "Which users have label=fraud?",
            ),
            None
        );
        // The worked example: a filter on a word keeps more than the question counts.
        assert_eq!(
            refusal(
                r#"{"input": "context", "filter": {"regex": "payment"},
                    "map": {"ask": "How many failed payments are listed? Answer with a number."},
                    "reduce": {"op": "sum"}}"#,
                "How many failed payments are listed?",
            ),
            None
        );
        // A yes/no filter asks a model per piece: nothing to count exactly.
        assert_eq!(
            refusal(
                r#"{"input": "context", "filter": {"ask": "Is it about money?"},
                    "map": {"ask": "How many amounts?"}, "reduce": {"op": "sum"}}"#,
                "How many amounts?",
            ),
            None
        );
    }

    #[test]
    fn an_extract_counted_for_a_which_most_task_is_told_top_k_first() {
        // The after-tools-2 reading's item 4: the right extract, counted.
        let text = refusal(
            r#"{"input": "context", "map": {"extract": "label=(\\w+)"}, "reduce": {"op": "count"}}"#,
            MOST,
        )
        .expect("refused");
        assert!(text.contains("`count` makes one number"), "{text}");
        let advice = text.split_once(": ").map(|(_, a)| a).unwrap_or_default();
        assert!(
            advice.contains(r#"for the most frequent use {"op": "top_k", "k": 1}"#),
            "{text}"
        );
        // Not the reduction it refuses (the model wrote `count` again, after-tools-7).
        assert!(!advice.contains(r#"{"op": "count"}"#), "{text}");
    }

    #[test]
    fn a_count_of_a_field_for_its_sum_is_told_the_extract() {
        // The after-tools-3 reading's item 2, as the model wrote it.
        let sum = "What is the sum of the amount fields of the records with label=shipping? Answer with a number.";
        let text = refusal(
            r#"{"input": "context", "filter": {"regex": "label=shipping"},
                "map": {"count": "amount"}, "reduce": {"op": "sum"}}"#,
            sum,
        )
        .expect("refused");
        assert!(
            text.contains(
                r#"map {"extract": "amount=(\\d+)"} and add them with reduce {"op": "sum"}"#
            ),
            "{text}"
        );
        // A count of what the task counts runs.
        assert_eq!(
            refusal(
                r#"{"input": "context", "map": {"count": "label=shipping"}, "reduce": {"op": "sum"}}"#,
                "How many records have label=shipping?",
            ),
            None
        );
        assert_eq!(
            refusal(
                r#"{"input": "context", "map": {"count": "error"}, "reduce": {"op": "sum"}}"#,
                "What is the total number of error lines?",
            ),
            None
        );
    }

    #[test]
    fn an_extract_summed_for_a_sum_task_runs() {
        let sum = "What is the sum of the amount fields of the records with label=shipping?";
        assert_eq!(
            refusal(
                r#"{"input": "context", "filter": {"regex": "label=shipping"},
                    "map": {"extract": "amount=(\\d+)"}, "reduce": {"op": "sum"}}"#,
                sum,
            ),
            None
        );
        // The right plans of the other kinds run too.
        for (json, task) in [
            (
                r#"{"input": "context", "map": {"extract": "label=(\\w+)"}, "reduce": {"op": "top_k", "k": 1}}"#,
                MOST,
            ),
            (
                r#"{"input": "context", "filter": {"where": "year > 2000"}, "map": {"extract": "city=(\\w+)"}, "reduce": {"op": "pairs"}}"#,
                PAIRS,
            ),
            (
                r#"{"input": "context", "map": {"count": "label=payments"}, "reduce": {"op": "sum"}}"#,
                LABEL_COUNT,
            ),
        ] {
            assert_eq!(refusal(json, task), None, "{json}");
        }
    }

    /// The exact plan `json` is refused with for `task`, as JSON.
    fn exact(json: &str, task: &str) -> Option<serde_json::Value> {
        let refusal = super::refusal(&plan(json), task).expect("refused");
        refusal
            .exact
            .map(|p| serde_json::to_value(p).expect("a plan is JSON"))
    }

    #[test]
    fn a_refusal_that_names_one_plan_carries_it() {
        // The after-tools-7 reading's item 0: the model's filter and split kept.
        let count = exact(
            r#"{"input": "context", "split": {"by": "lines", "size": 50}, "filter": {"regex": "label=payments"},
                "map": {"ask": "How many records have label=payments?"}, "reduce": {"op": "sum"}}"#,
            LABEL_COUNT,
        )
        .expect("one plan");
        assert_eq!(
            count["filter"],
            serde_json::json!({"regex": "label=payments"})
        );
        assert_eq!(count["split"]["size"], 50);
        assert_eq!(count["map"], serde_json::json!({"count": "label=payments"}));
        assert_eq!(count["reduce"], serde_json::json!({"op": "sum"}));

        let pairs = exact(
            r#"{"input": "context", "filter": {"where": "year > 2000"},
                "map": {"ask": "How many pairs of persons live in the same city?"}, "reduce": {"op": "sum"}}"#,
            PAIRS,
        )
        .expect("one plan");
        assert_eq!(pairs["filter"], serde_json::json!({"where": "year > 2000"}));
        assert_eq!(pairs["map"], serde_json::json!({"extract": "city=(\\w+)"}));
        assert_eq!(pairs["reduce"], serde_json::json!({"op": "pairs"}));

        // The after-tools-7 reading's item 1: the right extract, counted.
        let most = exact(
            r#"{"input": "context", "filter": {"regex": "label=(\\w+)"}, "map": {"extract": "label=(\\w+)"}, "reduce": {"op": "count"}}"#,
            MOST,
        )
        .expect("one plan");
        assert_eq!(most["reduce"], serde_json::json!({"op": "top_k", "k": 1}));
        let captured = exact(
            r#"{"input": "context", "filter": {"regex": "label=(\\w+)"}, "map": {"ask": "How many records have this label?"}, "reduce": {"op": "sum"}}"#,
            MOST,
        )
        .expect("one plan");
        assert_eq!(captured.get("filter"), None, "the capture needs no filter");
        assert_eq!(
            captured["map"],
            serde_json::json!({"extract": "label=(\\w+)"})
        );

        let sum = exact(
            r#"{"input": "context", "filter": {"regex": "label=shipping"}, "map": {"count": "amount"}, "reduce": {"op": "sum"}}"#,
            "What is the sum of the amount fields of the records with label=shipping?",
        )
        .expect("one plan");
        assert_eq!(sum["map"], serde_json::json!({"extract": "amount=(\\d+)"}));
    }

    #[test]
    fn a_refusal_that_leaves_a_choice_carries_no_plan() {
        // "most" and "distinct" both called: which one is the model's to say.
        assert_eq!(
            exact(
                r#"{"input": "context", "map": {"extract": "label=(\\w+)"}, "reduce": {"op": "count"}}"#,
                "Which distinct label appears most?",
            ),
            None
        );
        // Pairs of what: the task names no shared field.
        assert_eq!(
            exact(
                r#"{"input": "context", "map": {"ask": "How many pairs are there?"}, "reduce": {"op": "sum"}}"#,
                "How many pairs of records have label=fraud?",
            ),
            None
        );
    }

    #[test]
    fn a_map_alone_is_checked_for_what_its_pieces_are_asked() {
        let ask = Map::Ask(LABEL_COUNT.to_owned());
        let refusal = map_refusal(&ask, None, LABEL_COUNT).expect("refused");
        assert!(
            refusal
                .message
                .contains(r#"map {"count": "label=payments"}"#),
            "{}",
            refusal.message
        );
        let exact = refusal.exact.expect("an exact plan");
        assert_eq!(
            (exact.map, exact.reduce),
            (Map::Count("label=payments".into()), Reduce::Sum)
        );
        // The reduction is not known: an extract for a "which most" task runs.
        assert!(map_refusal(&Map::Extract("label=(\\w+)".into()), None, MOST).is_none());
        let captured = Filter::Regex("label=(\\w+)".into());
        assert!(map_refusal(&Map::Ask("How many?".into()), Some(&captured), MOST).is_some());
    }

    #[test]
    fn a_task_naming_what_to_count_sum_or_pair_has_an_exact_plan() {
        let parts = |task: &str| exact_plan_for_task(task).map(|plan| parts_of(&plan));
        assert_eq!(
            parts(LABEL_COUNT).as_deref(),
            Some(r#"map {"count": "label=payments"}, reduce {"op": "sum"}"#)
        );
        assert_eq!(
            parts("What is the sum of the amount fields of the records with label=shipping? Answer with a number.").as_deref(),
            Some(r#"filter {"regex": "label=shipping"}, map {"extract": "amount=(\\d+)"}, reduce {"op": "sum"}"#)
        );
        assert_eq!(
            parts("How many pairs of records with label=fraud live in the same city?").as_deref(),
            Some(
                r#"filter {"regex": "label=fraud"}, map {"extract": "city=(\\w+)"}, reduce {"op": "pairs"}"#
            )
        );
        assert_eq!(
            parts(PAIRS).as_deref(),
            Some(
                r#"filter {"where": "year > 2000"}, map {"extract": "city=(\\w+)"}, reduce {"op": "pairs"}"#
            )
        );
        assert_eq!(
            parts(MOST).as_deref(),
            Some(r#"map {"extract": "label=(\\w+)"}, reduce {"op": "top_k", "k": 1}"#)
        );
        assert_eq!(
            parts("Which city do the records with label=fraud name most?").as_deref(),
            Some(
                r#"filter {"regex": "label=fraud"}, map {"extract": "city=(\\w+)"}, reduce {"op": "top_k", "k": 1}"#
            )
        );
        // No key=value and no ranked field, or words that are no field: no one plan.
        assert_eq!(parts("Summarise the incidents in these lines."), None);
        assert_eq!(
            parts("Which of these words occurs in the most lines: cat, dog?"),
            None
        );
        assert_eq!(parts("What is the most common error in the records?"), None);
    }

    #[test]
    fn key_values_are_read_out_of_prose() {
        assert_eq!(key_value(LABEL_COUNT), Some("label=payments"));
        assert_eq!(key_value("lines with status=500."), Some("status=500"));
        assert_eq!(key_value("a = b, x==y"), None);
    }

    #[test]
    fn the_counted_pattern_is_a_key_value_in_a_counting_question() {
        assert_eq!(
            counted_pattern("How many lines match 'label=shipping'"),
            Some("label=shipping")
        );
        assert_eq!(counted_pattern("List the lines with label=shipping"), None);
        assert_eq!(counted_pattern("How many lines mention shipping?"), None);
    }

    #[test]
    fn an_ask_over_a_filter_that_captures_the_values_is_told_to_extract_them() {
        // The after-tools-3 reading's items 1 and 4, as the model wrote them.
        for question in [
            "How many times does fraud appear?",
            "How many times does each label appear?",
            // A count of one key=value under such a filter is still a ranking task.
            "How many records have label=fraud?",
        ] {
            let json = format!(
                r#"{{"input": "context", "filter": {{"regex": "label=(\\w+)"}},
                    "map": {{"ask": "{question}"}}, "reduce": {{"op": "sum"}}}}"#
            );
            let text = refusal(&json, MOST).expect("refused");
            assert!(
                text.contains(r#"map {"extract": "label=(\\w+)"} (no filter needed), then for the most frequent use {"op": "top_k", "k": 1}"#),
                "{question}: {text}"
            );
        }
        // Without a group, or for a task that asks one number, the ask runs (or meets
        // the other checks).
        assert_eq!(
            refusal(
                r#"{"input": "context", "filter": {"regex": "label"},
                    "map": {"ask": "Which label is named?"}, "reduce": {"op": "union"}}"#,
                MOST,
            ),
            None
        );
        assert_eq!(
            refusal(
                r#"{"input": "context", "filter": {"regex": "amount=(\\d+)"},
                    "map": {"ask": "What is the largest amount?"}, "reduce": {"op": "max"}}"#,
                "What is the largest amount?",
            ),
            None
        );
    }

    #[test]
    fn a_count_map_for_a_ranking_or_pairs_task_is_told_the_tasks_plan() {
        // The after-literal-seed6 reading's aggregate item 1, as the model wrote it.
        let refused = plan(
            r#"{"input": "context", "filter": {"regex": "label=loyalty"},
                "map": {"count": "label=loyalty"}, "reduce": {"op": "sum"}}"#,
        );
        let found = super::refusal(&refused, MOST).expect("refused");
        assert!(
            found.message.contains(
                r#"let the reduction rank them, in one plan: map {"extract": "label=(\\w+)"}, reduce {"op": "top_k", "k": 1}"#
            ),
            "{}",
            found.message
        );
        // The model's filter would keep one label: the task's plan has none.
        let exact = found.exact.expect("an exact plan");
        assert_eq!(exact.filter, None);
        assert_eq!(exact.input, "context");
        let pairs = refusal(
            r#"{"input": "context", "map": {"count": "city=Lima"}, "reduce": {"op": "sum"}}"#,
            PAIRS,
        )
        .expect("refused");
        assert!(
            pairs.contains(
                r#"count the pairs, in one plan: filter {"where": "year > 2000"}, map {"extract": "city=(\\w+)"}, reduce {"op": "pairs"}"#
            ),
            "{pairs}"
        );
        // A count for a count or a sum task is the task's own plan, or another check's.
        assert_eq!(
            refusal(
                r#"{"input": "context", "map": {"count": "label=payments"}, "reduce": {"op": "sum"}}"#,
                LABEL_COUNT
            ),
            None
        );
    }

    #[test]
    fn a_count_asked_with_no_key_value_gets_the_tasks_own_plan() {
        assert_eq!(
            exact_plan_for_question(
                "How many records have the label 'fraud'? Answer with a number.",
                MOST
            )
            .as_deref(),
            Some(r#"map {"extract": "label=(\\w+)"}, reduce {"op": "top_k", "k": 1}"#)
        );
        // A count of a `key=value` asked for a ranking task: the ranking, which the
        // count is a step toward (after-literal-seed6 `aggregate` item 1).
        assert_eq!(
            exact_plan_for_question("How many records of the context have label=loyalty?", MOST)
                .as_deref(),
            Some(r#"map {"extract": "label=(\\w+)"}, reduce {"op": "top_k", "k": 1}"#)
        );
        // The task's own question asked of a summary (after-literal-seed6 item 4).
        assert_eq!(
            exact_plan_for_question(
                "which label appears in the most records of the context?",
                MOST
            )
            .as_deref(),
            Some(r#"map {"extract": "label=(\\w+)"}, reduce {"op": "top_k", "k": 1}"#)
        );
        assert_eq!(
            exact_plan_for_question("Summarise the records.", MOST),
            None
        );
        // No count asked, or a task with no exact plan: nothing to name.
        assert_eq!(
            exact_plan_for_question("Which labels are there?", MOST),
            None
        );
        assert_eq!(
            exact_plan_for_question("How many lines mention shipping?", "Summarise the log."),
            None
        );
    }

    #[test]
    fn the_exact_plan_for_a_count_question_follows_the_task() {
        let question = "How many lines match 'label=shipping'";
        assert_eq!(
            exact_plan_for_question(question, "How many records have label=shipping?").as_deref(),
            Some(r#"map {"count": "label=shipping"}, reduce {"op": "sum"}"#)
        );
        // The after-tools-4 reading's item 2: the model asked the count, the task a sum.
        assert_eq!(
            exact_plan_for_question(
                question,
                "What is the sum of the amount fields of the records with label=shipping? Answer with a number."
            )
            .as_deref(),
            Some(
                r#"filter {"regex": "label=shipping"}, map {"extract": "amount=(\\d+)"}, reduce {"op": "sum"}"#
            )
        );
        assert_eq!(
            exact_plan_for_question("Summarise label=shipping", "Sum the amounts"),
            None
        );
    }

    #[test]
    fn the_summed_field_is_the_first_name_after_sum_or_total() {
        assert_eq!(
            summed_field("What is the sum of the amount fields?").as_deref(),
            Some("amount")
        );
        assert_eq!(
            summed_field("The total of the values of price, please").as_deref(),
            Some("price")
        );
        assert_eq!(
            summed_field("What is the total number of error lines?"),
            None
        );
        assert_eq!(summed_field("Which label is the most common?"), None);
    }

    #[test]
    fn the_shared_field_is_the_word_after_same() {
        assert_eq!(shared_key(PAIRS), Some("city"));
        assert_eq!(shared_key("How many pairs share a user?"), None);
    }
}

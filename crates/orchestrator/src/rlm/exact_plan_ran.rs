//! A `ctx_map_reduce` of the task's own exact plan that gave one line: under `--env
//! plan` and `--env tools`, that line is the answer. Qwen2.5-Coder-1.5B ran the exact
//! plan for "which label appears in the most records" (`support (182)`), sent it again
//! until the repeats were stopped, and its forced answer was the label its first step
//! had asked about (docs/eval.md: s18e and s19c plan-text `aggregate` item 4, and the
//! s20-seed23 item 1 replayed). After such a result it is told that the plan is the
//! task's and given the `final_answer` call to make, as the code media give the exact
//! `FINAL` line after a plan that ran in place of a refused one.

use rlm_plan::Plan;
use rlm_plan::{Filter, Map, Reduce};
use serde_json::Value;

use crate::env::ToolOutcome;
use crate::provider::ToolCall;

/// The notice after `call`, when it is a `ctx_map_reduce` of `task`'s exact plan (its
/// filter, map and reduction; any input and split) that ran, not shown again as a
/// repeat, and gave one line: the answer that line holds, and the call to answer with.
pub(super) fn notice(call: &ToolCall, outcome: &ToolOutcome, task: &str) -> Option<String> {
    if call.name != "ctx_map_reduce" || outcome.is_error || outcome.repeated {
        return None;
    }
    let arguments: Value = serde_json::from_str(&call.arguments).ok()?;
    let exact = exact_plan_for_task(task)?;
    let filter: Option<Filter> = match arguments.get("filter") {
        None | Some(Value::Null) => None,
        Some(filter) => Some(serde_json::from_value(filter.clone()).ok()?),
    };
    let map: Map = serde_json::from_value(arguments.get("map")?.clone()).ok()?;
    let reduce: Reduce = serde_json::from_value(arguments.get("reduce")?.clone()).ok()?;
    // A filter the exact plan has not, that keeps every line its extract reads
    // (`{"regex": "label"}` before `label=(\w+)`), changes nothing: s20d-seed26 plan
    // `aggregate` item 4 ran that plan, sent it until stopped, and was forced on `label`.
    let same_filter = filter == exact.filter
        || (exact.filter.is_none()
            && filter
                .as_ref()
                .is_some_and(|filter| keeps_every_line_read(filter, &map)));
    if !same_filter || (map, reduce) != (exact.map, exact.reduce) {
        return None;
    }
    let answer = answer_of(&outcome.content)?;
    Some(crate::prompt::exact_plan_answered(&answer))
}

/// Whether `filter` keeps every line `map` reads: a regex of plain text (letters,
/// digits, `_`, `=`) that the text of an `extract` before its first group holds, so
/// that any line the extract matches matches it too.
fn keeps_every_line_read(filter: &Filter, map: &Map) -> bool {
    let (Filter::Regex(text), Map::Extract(pattern)) = (filter, map) else {
        return false;
    };
    let text = text.trim();
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '='));
    let before_group = pattern.split('(').next().unwrap_or_default();
    plain && before_group.to_lowercase().contains(&text.to_lowercase())
}

/// The answer a plan's result gives: its first line (the lines after it are the plan's
/// figures), without the count a `top_k` writes after a value (`support (182)` →
/// `support`, [`rlm_plan::reduce::ranked_item`]); `None` when it is empty.
fn answer_of(result: &str) -> Option<String> {
    let line = result.lines().next()?.trim();
    let value = rlm_plan::reduce::ranked_item(line).unwrap_or(line).trim();
    (!value.is_empty()).then(|| value.to_owned())
}

/// `rlm_plan::task_fit` is gone (issue 50: nothing reads the task to answer it): no
/// task names an exact plan any more, so this module's notices never fire. Kept only
/// so the loop builds until the loop's rewrite deletes this module.
fn exact_plan_for_task(_task: &str) -> Option<Plan> {
    None
}

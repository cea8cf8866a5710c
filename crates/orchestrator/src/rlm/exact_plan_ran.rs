//! A `ctx_map_reduce` of the task's own exact plan that gave one line: under `--env
//! plan` and `--env tools`, that line is the answer. Qwen2.5-Coder-1.5B ran the exact
//! plan for "which label appears in the most records" (`support (182)`), sent it again
//! until the repeats were stopped, and its forced answer was the label its first step
//! had asked about (docs/eval.md: s18e and s19c plan-text `aggregate` item 4, and the
//! s20-seed23 item 1 replayed). After such a result it is told that the plan is the
//! task's and given the `final_answer` call to make, as the code media give the exact
//! `FINAL` line after a plan that ran in place of a refused one.

use rlm_plan::task_fit::exact_plan_for_task;
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

#[cfg(test)]
mod tests {
    use super::*;

    const MOST: &str =
        "Which label appears in the most records of the context? Answer with the label only.";

    fn map_reduce(arguments: Value) -> ToolCall {
        ToolCall {
            id: "1".into(),
            name: "ctx_map_reduce".into(),
            arguments: arguments.to_string(),
        }
    }

    const RANKED: &str = "support (182)\n(plan: 6 pieces, 6 kept, 0 calls; each piece's result is in the variable plan-1-results)";

    #[test]
    fn the_task_s_exact_plan_that_gave_a_line_is_told_to_answer_with_it() {
        // The s20-seed23 reading's plan-text `aggregate` item 1, replayed.
        let exact = map_reduce(serde_json::json!({
            "map": {"extract": "label=(\\w+)"}, "reduce": {"op": "top_k", "k": 1}
        }));
        let told = notice(&exact, &ToolOutcome::result(RANKED), MOST).expect("told");
        assert!(
            told.contains("task's exact plan") && told.contains(r#"{"answer": "support"}"#),
            "{told}"
        );
        // Any input and split; a pairs task's number as it is.
        let pairs = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
        let split = map_reduce(serde_json::json!({
            "variable": "context", "split": {"by": "lines", "size": 1000},
            "filter": {"where": "year > 2000"}, "map": {"extract": "city=(\\w+)"},
            "reduce": {"op": "pairs"}
        }));
        let told = notice(
            &split,
            &ToolOutcome::result("3752\n(plan: 1 pieces)"),
            pairs,
        )
        .expect("told");
        assert!(told.contains(r#"{"answer": "3752"}"#), "{told}");
    }

    #[test]
    fn a_filter_that_keeps_every_line_the_extract_reads_is_the_exact_plan() {
        // The s20d-seed26 reading's plan `aggregate` item 4, as the model wrote it.
        let filtered = map_reduce(serde_json::json!({
            "variable": "context", "split": {"by": "lines", "size": 20000},
            "filter": {"regex": "label"}, "map": {"extract": "label=(\\w+)"},
            "reduce": {"op": "top_k", "k": 1}
        }));
        let told = notice(&filtered, &ToolOutcome::result(RANKED), MOST).expect("told");
        assert!(told.contains(r#"{"answer": "support"}"#), "{told}");
        // A filter that keeps some of those lines only, or is a pattern: not told.
        for filter in ["fraud", "label=fraud", "lab.l", "year"] {
            let other = map_reduce(serde_json::json!({
                "filter": {"regex": filter}, "map": {"extract": "label=(\\w+)"},
                "reduce": {"op": "top_k", "k": 1}
            }));
            assert_eq!(
                notice(&other, &ToolOutcome::result(RANKED), MOST),
                None,
                "{filter}"
            );
        }
    }

    #[test]
    fn other_plans_errors_and_repeats_are_not_told() {
        let other = map_reduce(serde_json::json!({
            "map": {"extract": "label=(\\w+)"}, "reduce": {"op": "top_k", "k": 3}
        }));
        assert_eq!(notice(&other, &ToolOutcome::result(RANKED), MOST), None);
        let exact = map_reduce(serde_json::json!({
            "map": {"extract": "label=(\\w+)"}, "reduce": {"op": "top_k", "k": 1}
        }));
        assert_eq!(notice(&exact, &ToolOutcome::error("failed"), MOST), None);
        let mut shown_again = ToolOutcome::result(RANKED);
        shown_again.repeated = true;
        assert_eq!(notice(&exact, &shown_again, MOST), None);
        assert_eq!(
            notice(
                &exact,
                &ToolOutcome::result(RANKED),
                "Summarise the context."
            ),
            None
        );
    }

    #[test]
    fn the_answer_is_the_first_line_without_a_count() {
        assert_eq!(
            answer_of("support (182)\n(plan: …)").as_deref(),
            Some("support")
        );
        assert_eq!(answer_of("3752").as_deref(), Some("3752"));
        assert_eq!(answer_of("a (b)").as_deref(), Some("a (b)"));
        assert_eq!(answer_of(""), None);
    }
}

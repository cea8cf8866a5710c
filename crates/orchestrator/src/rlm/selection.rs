//! The values a task selects its records by — `fraud` of "the records with
//! label=fraud", `2000` of "born after 2000 (year > 2000)" — and code that names none of
//! them. An answer printed by such code counted or added every record: the local model
//! summed every `amount=` for "the sum of the amount fields of the records with
//! label=fraud" and answered 308268 for 98784 (docs/eval.md, s19-seed19 python
//! `aggregate` item 2; its only mention of `label=fraud` was a comment).
//!
//! Only the task's exact plan (`rlm_plan::task_fit::exact_plan_for_task`, now gone) says what
//! selects: a filter's `key=value` or number, a count's `key=value`. The check is a
//! reason to question an answer once, not to refuse it: code may name a value another
//! way, and the same answer sent again is taken.

use rlm_plan::spec::{Filter, Map};
use rlm_plan::Plan;

/// The values `task`'s exact plan selects its records by: the value of a filter's or
/// a count's `key=value` pattern (`fraud` of `label=fraud`), the numbers of a `where`
/// condition (`2000` of `year > 2000`). Empty when the task names no exact plan or the
/// plan selects nothing (the most frequent label: every record counts).
pub(super) fn selecting_values(task: &str) -> Vec<String> {
    let Some(plan) = exact_plan_for_task(task) else {
        return Vec::new();
    };
    let counted = match &plan.map {
        Map::Count(pattern) => value_of(pattern),
        _ => None,
    };
    let filtered = match &plan.filter {
        Some(Filter::Regex(pattern)) => value_of(pattern).into_iter().collect(),
        Some(Filter::Where(condition)) => numbers_in(condition),
        _ => Vec::new(),
    };
    counted.into_iter().chain(filtered).collect()
}

/// The first of `values` that `code` does not name (compared ignoring case, and not as
/// a part of a longer name), its lines that are only a comment (`#` or `//` first) left
/// out: a comment restating the task selects nothing.
pub(super) fn unnamed<'a>(code: &str, values: &'a [String]) -> Option<&'a str> {
    let code = uncommented(code);
    values
        .iter()
        .find(|value| !names(&code, &value.to_lowercase()))
        .map(String::as_str)
}

/// `code` lowercased, its lines that are only a comment (`#` or `//` first) left out.
pub(super) fn uncommented(code: &str) -> String {
    code.lines()
        .filter(|line| {
            let line = line.trim_start();
            !line.starts_with('#') && !line.starts_with("//")
        })
        .collect::<Vec<_>>()
        .join("\n")
        .to_lowercase()
}

/// True when `value` occurs in `code` not as a part of a longer name: `fraud` in
/// `'label=fraud'` or `== "fraud"`, not in `fraud_records` (s19-seed19 python
/// `aggregate` item 2 named its list of every amount so).
fn names(code: &str, value: &str) -> bool {
    let in_name = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(value).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + value.len()..].chars().next();
        !before.is_some_and(in_name) && !after.is_some_and(in_name)
    })
}

/// The value of a `key=value` pattern whose value is a plain word (`fraud` of
/// `label=fraud`); `None` for a pattern of another form, whose spelling in code cannot
/// be told.
fn value_of(pattern: &str) -> Option<String> {
    let (field, value) = pattern.split_once('=')?;
    let plain =
        |text: &str| !text.is_empty() && text.chars().all(|c| c.is_alphanumeric() || c == '_');
    (plain(field) && plain(value)).then(|| value.to_owned())
}

/// The numbers a `where` condition compares with (`2000` of `year > 2000`).
fn numbers_in(condition: &str) -> Vec<String> {
    condition
        .split(|c: char| c.is_whitespace() || "<>=!&".contains(c))
        .filter(|token| !token.is_empty() && token.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_owned)
        .collect()
}

/// `rlm_plan::task_fit` is gone (issue 50: nothing reads the task to answer it): no
/// task names an exact plan any more, so this module's notices never fire. Kept only
/// so the loop builds until the loop's rewrite deletes this module.
fn exact_plan_for_task(_task: &str) -> Option<Plan> {
    None
}

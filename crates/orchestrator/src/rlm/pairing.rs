//! A task that asks how many pairs of records share a field's value, and code that
//! pairs nothing. The local model filtered the people born after 2000 and printed how
//! many there were — `len(filtered_pairs)`, 293 for 3584 pairs — on four of five items
//! of two held-out seeds (docs/eval.md, s19-seed19 and s19b-seed20 python `pairs`).
//!
//! Pairing shows in code as a count per value and `n * (n - 1) / 2`, `combinations`, a
//! `Counter` or a grouping, an inner loop from `i + 1`, or a plan's `pairs` reduction;
//! code with none of these counted records. Like [`super::selection`], the check is a
//! reason to question an answer once with the task's call, not to refuse it.

use rlm_plan::spec::{Map, Reduce};
use rlm_plan::Plan;

use super::selection::uncommented;

/// What code that pairs records shows, lowercased (Python and JavaScript alike).
const PAIRING_SIGNS: [&str; 16] = [
    "combinations",
    "comb(",
    "//2",
    "// 2",
    "/2",
    "/ 2",
    "-1",
    "- 1",
    "counter",
    "defaultdict",
    "groupby",
    "setdefault",
    "i+1",
    "i + 1",
    "'pairs'",
    "\"pairs\"",
];

/// The field whose shared values `task` asks to pair (`city` of "how many pairs of
/// different persons … live in the same city"), where its exact plan reduces to pairs.
pub(super) fn paired_field(task: &str) -> Option<String> {
    let plan = exact_plan_for_task(task)?;
    let (Reduce::Pairs, Map::Extract(pattern)) = (&plan.reduce, &plan.map) else {
        return None;
    };
    let (field, _) = pattern.split_once('=')?;
    Some(field.to_owned())
}

/// True when `code`, its comment lines left out, shows no sign of pairing records
/// ([`PAIRING_SIGNS`]).
pub(super) fn pairs_nothing(code: &str) -> bool {
    let code = uncommented(code);
    !PAIRING_SIGNS.iter().any(|sign| code.contains(sign))
}

/// `rlm_plan::task_fit` is gone (issue 50: nothing reads the task to answer it): no
/// task names an exact plan any more, so this module's notices never fire. Kept only
/// so the loop builds until the loop's rewrite deletes this module.
fn exact_plan_for_task(_task: &str) -> Option<Plan> {
    None
}

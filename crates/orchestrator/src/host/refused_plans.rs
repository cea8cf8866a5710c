//! A plan refused for its shape and written again unchanged. The refusal named the
//! plan that answers the task exactly ([`rlm_plan::task_fit::Refusal::exact`]), and a
//! 1.5B model wrote its own refused plan again instead, then guessed (docs/eval.md,
//! after-tools-7, `aggregate` item 0: the same counting `ask` three times, then `0`).
//! The second time, the named plan runs in its place and the reply says so; the model
//! still reads the result and gives the answer. The same holds for a plan written a
//! step at a time: a `ctx_map` refused and called again with the same map over pieces
//! the same filter kept runs the named plan over those pieces, its results reduced as
//! that plan says (docs/eval.md, js-2: the same refused `ctx_map` five times, then a
//! guess).
//!
//! A whole plan refused with the same exact plan as an earlier one runs that plan too:
//! the local model, told the pairs task's exact plan for a ranking of cities, wrote
//! another plan the same check refused, with the same exact plan named, then answered
//! `0` (docs/eval.md, s20-seed23 plan `pairs` item 2, replayed).

use std::sync::{Mutex, PoisonError};

use rlm_plan::task_fit::Refusal;
use rlm_plan::{Filter, Map, Plan};

/// What the model wrote that was refused for its shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Written {
    /// A whole plan (`map_reduce`, `ctx_map_reduce`, `--env plan`).
    Plan(Plan),
    /// A `ctx_map` step: its map, and the last filter that kept its pieces (the pieces
    /// variable itself is new at each split, so it is not part of what was written).
    Map {
        /// The step's map.
        map: Map,
        /// The last filter of its pieces, if any.
        filter: Option<Filter>,
    },
    /// A plan's JSON that does not read as a plan (a reduction with a field of another
    /// one, a map of two options), as the model sent it.
    Unread(serde_json::Value),
}

/// What a run wrote and had refused for its shape, to recognise it written again.
#[derive(Debug, Default)]
pub(crate) struct RefusedPlans(Mutex<Refused>);

/// What the refusals of a run saw.
#[derive(Debug, Default)]
struct Refused {
    /// Everything refused, each once.
    written: Vec<Written>,
    /// The exact plans named to whole plans ([`same_answer`] tells one named again).
    named: Vec<Plan>,
}

/// What to do with a plan the task checks refuse.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Repeat {
    /// Refuse it with the message (the first time, or no exact plan is known).
    Refuse(String),
    /// Run this plan in its place: the same plan was refused before.
    RunInstead(Plan),
    /// Run this plan in its place: another whole plan was refused before with it named.
    RunNamedAgain(Plan),
}

impl RefusedPlans {
    /// What to do with `written`, which `refusal` refuses: run the refusal's exact plan
    /// if `written` was refused before, or — a whole plan — if that plan was named to
    /// an earlier refused plan; else refuse it (and remember both).
    pub fn decide(&self, written: Written, refusal: Refusal) -> Repeat {
        let mut refused = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let again = refused.written.contains(&written);
        let whole = !matches!(written, Written::Map { .. });
        if let Some(exact) = refusal.exact {
            if again {
                return Repeat::RunInstead(exact);
            }
            if whole && refused.named.iter().any(|named| same_answer(named, &exact)) {
                return Repeat::RunNamedAgain(exact);
            }
            if whole {
                refused.named.push(exact);
            }
        }
        if !again {
            refused.written.push(written);
        }
        Repeat::Refuse(refusal.message)
    }
}

/// Whether plans `a` and `b` answer alike: the same filter, map and reduction, over
/// whatever pieces (the pieces a plan reads do not change what it answers).
fn same_answer(a: &Plan, b: &Plan) -> bool {
    (&a.filter, &a.map, &a.reduce) == (&b.filter, &b.map, &b.reduce)
}

/// The note a reply carries when the exact plan ran in place of the model's (the plan
/// written in its fields' order, as a plan reads: input, split, filter, map, reduce).
pub(crate) fn ran_instead(exact: &Plan) -> String {
    let written = serde_json::to_string(exact).unwrap_or_default();
    format!(
        "Your plan was refused before, for the reason it was refused then, so the plan that refusal named ran in its place: {written}. Its result is the answer below; answer from it."
    )
}

/// The note a reply carries when the exact plan ran in place of a plan refused for the
/// first time, because an earlier refusal had named the same plan.
pub(crate) fn named_again(exact: &Plan) -> String {
    let written = serde_json::to_string(exact).unwrap_or_default();
    format!(
        "Your plan was refused, and the refusal names the same exact plan as the refusal of your earlier plan, so that plan ran in its place: {written}. Its result is the answer below; answer from it."
    )
}

/// The note a `ctx_map` reply carries when the exact plan ran over the model's pieces
/// in place of its map: that plan, and the `answer` it gives — or, when its reduction
/// asks a model and so was not run, the results variable to reduce.
pub(crate) fn map_ran_instead(exact: &Plan, answer: Option<&str>, results: &str) -> String {
    let lead = format!(
        "Your map was refused before, for the reason it was refused then, so the plan that refusal named ran over your pieces in its place: {}.",
        rlm_plan::task_fit::parts_of(exact)
    );
    match answer {
        // The exact line, as the loop's other notes give it: told only to "answer from
        // that", the local model sent FINAL of the next line its code printed, the
        // results variable's key (after-echo-seed6, js `aggregate` item 0).
        Some(answer) => format!(
            "{lead} It gives {answer}. If that answers the task, reply with exactly this line and nothing else:\nFINAL({answer})"
        ),
        None => format!("{lead} Its map's results are in `{results}`: reduce them as it says."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlm_plan::Map;

    fn plan(map: Map) -> Plan {
        Plan::from_json(r#"{"map": {"count": "x"}, "reduce": {"op": "sum"}}"#)
            .map(|p| Plan { map, ..p })
            .expect("a valid plan")
    }

    #[test]
    fn a_plan_refused_again_runs_the_exact_plan_and_other_plans_are_refused() {
        let refused = RefusedPlans::default();
        let asked = Written::Plan(plan(Map::Ask("How many?".into())));
        let exact = plan(Map::Count("label=payments".into()));
        let refusal = || Refusal {
            message: "use the count".into(),
            exact: Some(exact.clone()),
        };
        assert_eq!(
            refused.decide(asked.clone(), refusal()),
            Repeat::Refuse("use the count".into())
        );
        // Another refused plan with no exact plan is refused the first time too.
        let other = Written::Plan(plan(Map::Ask("How many records?".into())));
        let choose = Refusal {
            message: "choose".into(),
            exact: None,
        };
        assert_eq!(
            refused.decide(other, choose),
            Repeat::Refuse("choose".into())
        );
        assert_eq!(
            refused.decide(asked.clone(), refusal()),
            Repeat::RunInstead(exact.clone())
        );
        // No exact plan: refused however often.
        let no_exact = Refusal {
            message: "choose".into(),
            exact: None,
        };
        assert_eq!(
            refused.decide(asked, no_exact),
            Repeat::Refuse("choose".into())
        );
        assert!(ran_instead(&exact).contains(r#""map":{"count":"label=payments"}"#));
    }

    #[test]
    fn a_whole_plan_refused_with_a_plan_named_before_runs_it() {
        let refused = RefusedPlans::default();
        let exact = plan(Map::Count("label=payments".into()));
        let refusal = || Refusal {
            message: "use the count".into(),
            exact: Some(exact.clone()),
        };
        let first = Written::Plan(plan(Map::Ask("How many?".into())));
        assert_eq!(
            refused.decide(first, refusal()),
            Repeat::Refuse("use the count".into())
        );
        // Another plan, the same exact plan named, over other pieces: it runs.
        let other = Written::Plan(plan(Map::Ask("How many records?".into())));
        let over_lines = Plan {
            input: "other".into(),
            ..exact.clone()
        };
        let named = Refusal {
            message: "use the count".into(),
            exact: Some(over_lines.clone()),
        };
        assert_eq!(
            refused.decide(other, named),
            Repeat::RunNamedAgain(over_lines.clone())
        );
        assert!(named_again(&over_lines).contains("names the same exact plan"));
        // Map steps keep to their own rule: another step is refused the first time.
        let step = Written::Map {
            map: Map::Ask("How many?".into()),
            filter: None,
        };
        assert_eq!(
            refused.decide(step, refusal()),
            Repeat::Refuse("use the count".into())
        );
    }

    #[test]
    fn a_map_step_refused_again_under_the_same_filter_runs_the_exact_map() {
        let refused = RefusedPlans::default();
        let exact = plan(Map::Count("label=payments".into()));
        let refusal = || Refusal {
            message: "count it".into(),
            exact: Some(exact.clone()),
        };
        let step = |filter: Option<&str>| Written::Map {
            map: Map::Ask("How many?".into()),
            filter: filter.map(|f| Filter::Regex(f.into())),
        };
        assert_eq!(
            refused.decide(step(None), refusal()),
            Repeat::Refuse("count it".into())
        );
        // The same map over pieces another filter kept is another step.
        assert_eq!(
            refused.decide(step(Some("payments")), refusal()),
            Repeat::Refuse("count it".into())
        );
        assert_eq!(
            refused.decide(step(None), refusal()),
            Repeat::RunInstead(exact.clone())
        );
        let note = map_ran_instead(&exact, Some("36"), "results-1");
        assert!(
            note.contains(r#"in its place: map {"count": "label=payments"}, reduce {"op": "sum"}. It gives 36. If that answers the task, reply with exactly this line and nothing else:"#)
                && note.ends_with("\nFINAL(36)"),
            "{note}"
        );
        let note = map_ran_instead(&exact, None, "results-1");
        assert!(
            note.ends_with("are in `results-1`: reduce them as it says."),
            "{note}"
        );
    }
}

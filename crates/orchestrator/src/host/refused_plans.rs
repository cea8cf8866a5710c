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
pub(crate) struct RefusedPlans(Mutex<Vec<Written>>);

/// What to do with a plan the task checks refuse.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Repeat {
    /// Refuse it with the message (the first time, or no exact plan is known).
    Refuse(String),
    /// Run this plan in its place: the same plan was refused before.
    RunInstead(Plan),
}

impl RefusedPlans {
    /// What to do with `written`, which `refusal` refuses: run the refusal's exact plan
    /// if it was refused before, else refuse it (and remember it).
    pub fn decide(&self, written: Written, refusal: Refusal) -> Repeat {
        let mut refused = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let again = refused.contains(&written);
        match refusal.exact {
            Some(exact) if again => Repeat::RunInstead(exact),
            _ => {
                if !again {
                    refused.push(written);
                }
                Repeat::Refuse(refusal.message)
            }
        }
    }
}

/// The note a reply carries when the exact plan ran in place of the model's (the plan
/// written in its fields' order, as a plan reads: input, split, filter, map, reduce).
pub(crate) fn ran_instead(exact: &Plan) -> String {
    let written = serde_json::to_string(exact).unwrap_or_default();
    format!(
        "Your plan was refused before, for the reason it was refused then, so the plan that refusal named ran in its place: {written}. Its result is the answer below; answer from it."
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
        // Another refused plan is refused the first time too.
        let other = Written::Plan(plan(Map::Ask("How many records?".into())));
        assert_eq!(
            refused.decide(other, refusal()),
            Repeat::Refuse("use the count".into())
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

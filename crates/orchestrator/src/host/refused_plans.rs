//! A plan refused for its shape and written again unchanged. The refusal named the
//! plan that answers the task exactly ([`rlm_plan::task_fit::Refusal::exact`]), and a
//! 1.5B model wrote its own refused plan again instead, then guessed (docs/eval.md,
//! after-tools-7, `aggregate` item 0: the same counting `ask` three times, then `0`).
//! The second time, the named plan runs in its place and the reply says so; the model
//! still reads the result and gives the answer.

use std::sync::{Mutex, PoisonError};

use rlm_plan::task_fit::Refusal;
use rlm_plan::Plan;

/// The plans of a run refused for their shape, to recognise one written again.
#[derive(Debug, Default)]
pub(crate) struct RefusedPlans(Mutex<Vec<Plan>>);

/// What to do with a plan the task checks refuse.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Repeat {
    /// Refuse it with the message (the first time, or no exact plan is known).
    Refuse(String),
    /// Run this plan in its place: the same plan was refused before.
    RunInstead(Plan),
}

impl RefusedPlans {
    /// What to do with `plan`, which `refusal` refuses: run the refusal's exact plan if
    /// `plan` was refused before, else refuse it (and remember it).
    pub fn decide(&self, plan: &Plan, refusal: Refusal) -> Repeat {
        let mut refused = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let again = refused.contains(plan);
        match refusal.exact {
            Some(exact) if again => Repeat::RunInstead(exact),
            _ => {
                if !again {
                    refused.push(plan.clone());
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
        let asked = plan(Map::Ask("How many?".into()));
        let exact = plan(Map::Count("label=payments".into()));
        let refusal = || Refusal {
            message: "use the count".into(),
            exact: Some(exact.clone()),
        };
        assert_eq!(
            refused.decide(&asked, refusal()),
            Repeat::Refuse("use the count".into())
        );
        // Another refused plan is refused the first time too.
        let other = plan(Map::Ask("How many records?".into()));
        assert_eq!(
            refused.decide(&other, refusal()),
            Repeat::Refuse("use the count".into())
        );
        assert_eq!(
            refused.decide(&asked, refusal()),
            Repeat::RunInstead(exact.clone())
        );
        // No exact plan: refused however often.
        let no_exact = Refusal {
            message: "choose".into(),
            exact: None,
        };
        assert_eq!(
            refused.decide(&asked, no_exact),
            Repeat::Refuse("choose".into())
        );
        assert!(ran_instead(&exact).contains(r#""map":{"count":"label=payments"}"#));
    }
}

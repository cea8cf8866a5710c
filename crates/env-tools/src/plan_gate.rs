//! Under `--env plan` the model reads the context only through plans, so an answer
//! given before any plan has produced a result is a guess: small models tend to answer
//! that way after a failed plan (a word of a refused `extract`, `0` after a reduction
//! that found no number) rather than write the plan again. Such an answer — a
//! `final_answer` call or `FINAL(...)` — is refused once a run, with the last plan's
//! error repeated; a second one is taken (a run must be able to end, and the forced
//! last answer is never asked about). So is one given right after a failed plan when an
//! earlier plan gave a result: the earlier result answered another question.
//!
//! Under `--env tools` the model reads with grep and slice as well, so an answer with
//! no plan result is not a guess by itself; but an answer given right after a refused
//! or failed plan is (the model gave up on the plan it meant to run). That answer is
//! refused once a run the same way ([`PlanGate::refuse_after_failed_plan`]).
//!
//! The gate reads only the model's own calls and their results, never the task. The
//! loop asks it through [`rlm_env::ToolBox::refuse_answer`], so a loop that runs with
//! no corrections simply does not ask.

use rlm_env::ToolOutcome;

/// How much of the last plan's error the refusal repeats.
const ERROR_SHOWN_CHARS: usize = 400;

/// What a plan-only run has seen of its plans, to tell an answer from a guess.
#[derive(Debug, Default)]
pub(crate) struct PlanGate {
    /// A plan has produced a result.
    answered: bool,
    /// The error of the last plan, when it failed.
    last_failure: Option<String>,
    /// A guess was refused already.
    refused: bool,
}

impl PlanGate {
    /// Notes what a `ctx_map_reduce` call gave, or a `ctx_reduce` call's result (the
    /// end of a plan written one step at a time).
    pub fn saw_plan(&mut self, outcome: &ToolOutcome) {
        if outcome.is_error {
            self.last_failure = Some(outcome.content.clone());
        } else {
            self.answered = true;
            self.last_failure = None;
        }
    }

    /// Under `--env tools`: why a final answer now would be a guess — the last plan
    /// failed and no plan has given a result since (at most once a run).
    pub fn refuse_after_failed_plan(&mut self) -> Option<String> {
        if self.last_failure.is_none() || self.refused {
            return None;
        }
        self.refused = true;
        let error = self.last_failure.as_deref().unwrap_or_default();
        Some(format!(
            "Answer not taken: your last plan failed and no plan has given a result since, so this answer would be a guess. The plan's error: {}; then answer from its result.",
            write_again(error)
        ))
    }

    /// Under `--env plan`: why a final answer now would be a guess — no plan has given
    /// a result, or the last plan failed and none has since (at most once a run).
    pub fn refuse_guess(&mut self) -> Option<String> {
        if self.answered {
            return self.refuse_after_failed_plan();
        }
        if self.refused {
            return None;
        }
        self.refused = true;
        let what_next = match &self.last_failure {
            Some(error) => format!("Your last plan failed: {}", write_again(error)),
            None => "Call ctx_map_reduce with a plan first".to_owned(),
        };
        Some(format!(
            "Answer not taken: no plan has given a result in this run, so this answer would be a guess. {what_next}; then answer from its result."
        ))
    }
}

/// The start of a failed plan's `error`, and what to do with it.
fn write_again(error: &str) -> String {
    let shown: String = error.chars().take(ERROR_SHOWN_CHARS).collect();
    format!("{shown}\nWrite that plan again as the error says and call ctx_map_reduce with it")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guess_is_refused_once_with_the_last_error_and_an_answer_after_a_result_is_taken() {
        let mut gate = PlanGate::default();
        gate.saw_plan(&ToolOutcome::error(
            "ctx_map_reduce failed: `sum` found no number",
        ));
        let refusal = gate.refuse_guess().expect("a guess is refused");
        assert!(
            refusal.contains("Your last plan failed: ctx_map_reduce failed: `sum` found no number\nWrite that plan again"),
            "{refusal}"
        );
        assert!(gate.refuse_guess().is_none(), "only once a run");

        let mut before_any = PlanGate::default();
        let refusal = before_any.refuse_guess().expect("a guess is refused");
        assert!(refusal.contains("Call ctx_map_reduce with a plan first"));

        let mut answered = PlanGate::default();
        answered.saw_plan(&ToolOutcome::error("failed"));
        answered.saw_plan(&ToolOutcome::result("42"));
        assert!(answered.refuse_guess().is_none(), "a plan gave a result");
    }

    #[test]
    fn under_plan_an_answer_right_after_a_failed_plan_is_refused_though_one_gave_a_result() {
        // A ranking ran, the next plan was refused, and `0` was answered.
        let mut gate = PlanGate::default();
        gate.saw_plan(&ToolOutcome::result("Denver (92)\nRiga (92)"));
        gate.saw_plan(&ToolOutcome::error(
            "ctx_map_reduce failed: the plan cannot run as written",
        ));
        let refusal = gate.refuse_guess().expect("refused");
        assert!(
            refusal.contains("your last plan failed and no plan has given a result since")
                && refusal.contains(
                    "The plan's error: ctx_map_reduce failed: the plan cannot run as written"
                ),
            "{refusal}"
        );
        assert!(gate.refuse_guess().is_none(), "only once a run");
    }

    #[test]
    fn under_tools_only_an_answer_right_after_a_failed_plan_is_refused_once() {
        // No plan yet: grep and slice may have given the answer.
        assert!(PlanGate::default().refuse_after_failed_plan().is_none());
        let mut fixed = PlanGate::default();
        fixed.saw_plan(&ToolOutcome::error("refused"));
        fixed.saw_plan(&ToolOutcome::result("51"));
        assert!(
            fixed.refuse_after_failed_plan().is_none(),
            "a later plan ran"
        );

        let mut gate = PlanGate::default();
        gate.saw_plan(&ToolOutcome::error(
            "ctx_map_reduce failed: use map {\"count\": \"status=404\"}",
        ));
        let refusal = gate.refuse_after_failed_plan().expect("refused");
        assert!(
            refusal.contains("The plan's error: ctx_map_reduce failed: use map {\"count\": \"status=404\"}\nWrite that plan again"),
            "{refusal}"
        );
        assert!(gate.refuse_after_failed_plan().is_none(), "only once a run");
    }
}

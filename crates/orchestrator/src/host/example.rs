//! A plan that copied the prompt's worked example. Every environment's prompt shows one
//! plan whose leaves ask [`PLAN_EXAMPLE_ASK`] ("How many failed payments are
//! listed?…"); a small model copies it word for word as its own plan's question,
//! whatever the task (the second reading of docs/eval.md: two plans of three, for
//! tasks about labels and amounts). Its leaves then answer a question nobody asked and
//! the reduction adds up their noise. Such a plan is refused before any call, naming
//! the field, unless the task itself is about failed payments; so is a sub-call
//! (`ctx_summarize`, `llm_query`, `sub_rlm`) that asks it.

use rlm_plan::task_fit::{exact_plan_for_task, parts_of, Refusal};
use rlm_plan::words::words;
use rlm_plan::{Filter, Map, Plan, PlanError};
use rlm_protocol::host_call::{HostError, PLAN_EXAMPLE_ASK};

/// The advice given with the refusal: what to write instead.
const INSTEAD: &str = "ask each piece what this task needs from it, in the task's own words — or, when the task names a pattern (a word, a key=value), use a map with no model: {\"count\": PATTERN} counts its matches and {\"extract\": PATTERN} lists them (the first group when it has one), both exact";

/// What asks the sub-model: a whole plan (`map_reduce`), or one step's map
/// (`ctx_map`) or filter (`ctx_filter`).
pub(super) enum Asking<'a> {
    /// A plan, with its filter, map and nested plans.
    Plan(&'a Plan),
    /// A `ctx_map` step's map.
    Map(&'a Map),
    /// A `ctx_filter` step's filter.
    Filter(&'a Filter),
}

/// Refuses `asking` when it asks the worked example's question, naming the field —
/// unless the task is the example's own.
pub(super) fn check(asking: Asking<'_>, task: &str) -> Result<(), PlanError> {
    refusal(asking, task).map_or(Ok(()), |refusal| Err(PlanError::Shape(refusal.message)))
}

/// Why `asking` cannot run when it asks the worked example's question ([`check`]),
/// with the plan the task's words call for where there is one
/// ([`rlm_plan::task_fit::exact_plan_for_task`]; a plan's own input and split kept):
/// the refusal names it, and the orchestrator runs it in place of the same copy
/// written again ([`super::refused_plans`]).
pub(super) fn refusal(asking: Asking<'_>, task: &str) -> Option<Refusal> {
    if about_the_example(task) {
        return None;
    }
    let (field, exact) = match asking {
        Asking::Plan(plan) => (
            field_of_plan(plan, "")?,
            exact_plan_for_task(task).map(|exact| Plan {
                input: plan.input.clone(),
                split: plan.split.clone(),
                ..exact
            }),
        ),
        Asking::Map(map) => (field_of_map(map, "")?, exact_plan_for_task(task)),
        Asking::Filter(filter) => (field_of_filter(filter, "")?, None),
    };
    let instead = match &exact {
        Some(exact) => format!(
            "Instead, for this task: {}, exact and with no model call (or {INSTEAD})",
            parts_of(exact)
        ),
        None => format!("Instead, {INSTEAD}"),
    };
    Some(Refusal {
        message: format!(
            "`{field}` is the worked example's question ({PLAN_EXAMPLE_ASK:?}), copied from the instructions; it is not about this task. {instead}."
        ),
        exact,
    })
}

/// Refuses a sub-call whose prompt asks the worked example's question — the
/// instruction of `ctx_summarize`, the prompt of `llm_query`, the query of `sub_rlm`:
/// the local model gave the example's question to `ctx_summarize` too (docs/eval.md,
/// after-plan-8) — unless the task is the example's own.
pub(super) fn check_prompt(prompt: &str, task: &str) -> Result<(), HostError> {
    if about_the_example(task) || !is_the_example(prompt) {
        return Ok(());
    }
    Err(HostError::RespondToModel(format!(
        "the instruction is the worked example's question ({PLAN_EXAMPLE_ASK:?}), copied from the instructions; it is not about this task. Instead, ask what this task needs, in the task's own words"
    )))
}

/// The field (`map.ask`, `map.plan.filter.ask`…) that asks the example's question.
fn field_of_plan(plan: &Plan, prefix: &str) -> Option<String> {
    plan.filter
        .as_ref()
        .and_then(|filter| field_of_filter(filter, prefix))
        .or_else(|| field_of_map(&plan.map, prefix))
}

fn field_of_filter(filter: &Filter, prefix: &str) -> Option<String> {
    match filter {
        Filter::Ask(question) if is_the_example(question) => Some(format!("{prefix}filter.ask")),
        _ => None,
    }
}

fn field_of_map(map: &Map, prefix: &str) -> Option<String> {
    match map {
        Map::Ask(text) if is_the_example(text) => Some(format!("{prefix}map.ask")),
        Map::SubRlm(text) if is_the_example(text) => Some(format!("{prefix}map.sub_rlm")),
        Map::Agent(text) if is_the_example(text) => Some(format!("{prefix}map.agent")),
        Map::Plan(inner) => field_of_plan(inner, &format!("{prefix}map.plan.")),
        _ => None,
    }
}

/// True when `text` asks the example's question: its words (case and punctuation
/// ignored) begin with the example's question sentence.
fn is_the_example(text: &str) -> bool {
    let question = PLAN_EXAMPLE_ASK
        .split_once('?')
        .map_or(PLAN_EXAMPLE_ASK, |(question, _)| question);
    // Only as many words of `text` as the question has are read: a prompt may be long.
    let question: Vec<String> = words(question).collect();
    let start: Vec<String> = words(text).take(question.len()).collect();
    start == question
}

/// True when the task is itself about failed payments: then the example's question may
/// well be the right one.
fn about_the_example(task: &str) -> bool {
    let task = words(task).collect::<Vec<_>>().join(" ");
    task.contains("failed payment")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(json: &str) -> Plan {
        Plan::from_json(json).expect("a valid plan")
    }

    /// The refusal of `asking` for `task`, without the error's prefix.
    fn refusal_of(asking: Asking<'_>, task: &str) -> Option<String> {
        check(asking, task).err().map(|error| {
            let text = error.to_string();
            text.trim_start_matches("the plan cannot run as written: ")
                .to_owned()
        })
    }

    const LABEL_TASK: &str =
        "How many records in the context have label=payments? Answer with a number.";

    #[test]
    fn a_sub_call_asking_the_example_is_refused_unless_the_task_is_about_it() {
        let refused = check_prompt(PLAN_EXAMPLE_ASK, LABEL_TASK).expect_err("refused");
        assert!(
            refused.to_string().contains("in the task's own words"),
            "{refused}"
        );
        assert!(check_prompt("How many records have label=payments?", LABEL_TASK).is_ok());
        assert!(check_prompt(PLAN_EXAMPLE_ASK, "Count the failed payments.").is_ok());
    }

    #[test]
    fn the_example_copied_word_for_word_is_refused_naming_the_field() {
        // The plan the local model wrote for a task about labels.
        let copied = plan(
            r#"{"split": {"by": "chars", "size": 20000}, "filter": {"regex": "payments"},
                "map": {"ask": "How many failed payments are listed? Answer with a number."},
                "reduce": {"op": "sum"}}"#,
        );
        let why = refusal_of(Asking::Plan(&copied), LABEL_TASK).expect("refused");
        assert!(
            why.starts_with("`map.ask` is the worked example's question"),
            "{why}"
        );
        assert!(why.contains("{\"count\": PATTERN}"), "{why}");
        // The task names what to count: the refusal names the plan, which keeps the
        // copy's input and split.
        assert!(
            why.contains(r#"Instead, for this task: map {"count": "label=payments"}, reduce {"op": "sum"}, exact"#),
            "{why}"
        );
        let exact = refusal(Asking::Plan(&copied), LABEL_TASK)
            .and_then(|r| r.exact)
            .expect("an exact plan");
        assert_eq!(exact.split, copied.split);
        assert_eq!(exact.filter, None);
    }

    #[test]
    fn spacing_case_and_a_changed_tail_are_still_the_example() {
        for ask in [
            "how many FAILED payments are listed?",
            "How many failed payments are listed? Reply with one number only.",
            "  How many failed payments are listed  ",
        ] {
            assert!(is_the_example(ask), "{ask}");
        }
        for ask in [
            "How many records have label=payments? Answer with a number.",
            "How many failed logins are listed?",
            "Which label is most frequent?",
        ] {
            assert!(!is_the_example(ask), "{ask}");
        }
    }

    #[test]
    fn a_task_about_failed_payments_may_ask_it() {
        let copied = plan(
            r#"{"split": {"by": "chars"}, "map": {"ask": "How many failed payments are listed? Answer with a number."}, "reduce": {"op": "sum"}}"#,
        );
        assert_eq!(
            refusal_of(
                Asking::Plan(&copied),
                "Count the failed payments in this log."
            ),
            None
        );
    }

    #[test]
    fn a_copied_filter_or_a_nested_plans_question_is_found_too() {
        let filter = plan(
            r#"{"split": {"by": "lines", "size": 100}, "filter": {"ask": "How many failed payments are listed?"}, "map": {"count": "x"}, "reduce": {"op": "sum"}}"#,
        );
        assert!(refusal_of(Asking::Plan(&filter), LABEL_TASK)
            .expect("refused")
            .starts_with("`filter.ask`"));
        let nested = plan(
            r#"{"split": {"by": "lines", "size": 100}, "map": {"plan": {"split": {"by": "lines", "size": 10}, "map": {"ask": "How many failed payments are listed?"}, "reduce": {"op": "sum"}}}, "reduce": {"op": "sum"}}"#,
        );
        assert!(refusal_of(Asking::Plan(&nested), LABEL_TASK)
            .expect("refused")
            .starts_with("`map.plan.map.ask`"));
        assert!(refusal_of(Asking::Map(&Map::Ask(PLAN_EXAMPLE_ASK.into())), LABEL_TASK).is_some());
        assert!(refusal_of(
            Asking::Filter(&Filter::Ask(PLAN_EXAMPLE_ASK.into())),
            LABEL_TASK
        )
        .is_some());
        assert_eq!(
            refusal_of(
                Asking::Map(&Map::Count("label=payments".into())),
                LABEL_TASK
            ),
            None
        );
    }

    #[test]
    fn the_code_environments_show_the_example_this_module_recognises() {
        // A prompt showing another text would escape the check (`--env tools` and
        // `plan` test theirs in rlm-env-tools).
        let features = rlm_env::PromptFeatures::default();
        for (env, delegate) in [
            ("python", rlm_env_python::guide(features).delegate),
            ("js", rlm_env_js::guide(features).delegate),
        ] {
            assert!(delegate.contains(PLAN_EXAMPLE_ASK), "{env}: {delegate}");
        }
    }
}

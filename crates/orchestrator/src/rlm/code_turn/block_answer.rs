//! What a block that ran answers: its `FINAL("…")`/`FINAL_VAR` call, a `SUBMIT` that
//! fits `--output-schema`, a bare `FINAL(word)`, a bare word its code printed last — and
//! the notices when it does not: a `FINAL` of a value no output showed, or of a zero
//! the task's call did not give, is questioned once ([`unprinted_answer`]), a word no
//! variable has is offered the task's call.

use serde_json::Value;

use super::RanBefore;
use crate::env::FinalAnswer;
use crate::events::{AnswerSource, EventData, EventSink};
use crate::prompt;
use crate::rlm::answer_form::{self, TaskAnswer};
use crate::rlm::bare_final::{self, BareFinal};
use crate::rlm::{outcome_of, unprinted_answer, word_as_code, LoopOutcome, LoopSettings};

/// What a block that ran gave besides its output, for [`answer_of_block`].
pub(super) struct BlockRan<'a> {
    /// Its code.
    pub code: &'a str,
    /// The `FINAL`, `FINAL_VAR` or `SUBMIT` it called.
    pub final_answer: Option<FinalAnswer>,
    /// The error it raised, if any.
    pub error: Option<&'a str>,
    /// Its reading as a bare `FINAL(word)`, made before its output joined the run's.
    pub bare: Option<BareFinal>,
}

/// What [`answer_of_block`] checks an answer against.
pub(super) struct AnswerChecks<'a> {
    /// `--output-schema`, for `SUBMIT`.
    pub settings: &'a LoopSettings,
    /// The task's exact call, offered after a word sent as code.
    pub task_call: Option<&'a str>,
    /// What the task says of its answer: its shape and its stated form.
    pub task_answer: TaskAnswer<'a>,
    /// Where a questioned answer is traced.
    pub sink: &'a EventSink,
}

/// The answer a block that ran gives, if any — its `FINAL("…")` or `FINAL_VAR` call
/// (a literal no output showed questioned once), a `SUBMIT` that fits the schema, a
/// bare `FINAL(word)` or a bare word its code printed last — with what the model is told
/// otherwise pushed to `notices`.
pub(super) fn answer_of_block<'a>(
    block: BlockRan<'_>,
    ran: &mut RanBefore,
    checks: &AnswerChecks<'a>,
    notices: &mut Vec<String>,
) -> BlockAnswer<'a> {
    let BlockRan {
        code,
        final_answer,
        error,
        bare,
    } = block;
    let AnswerChecks {
        settings,
        task_call,
        task_answer,
        sink,
    } = *checks;
    match final_answer {
        Some(FinalAnswer::Var { value, .. }) => {
            // A value written into `FINAL("…")` may be one the code never found; a
            // variable's value is questioned on what the task's call can tell (s19c-seed21
            // python `aggregate` item 2: `FINAL(total_amount)` of a 0).
            let (answer, written) = match unprinted_answer::literal_in_code(code) {
                Some(literal) => (literal.trim(), true),
                None => (value.trim(), false),
            };
            let task = (task_call, task_answer);
            match question_answer(answer, written, ran, task, sink) {
                Questioned::Notice(notice) => notices.push(notice),
                Questioned::RunCall(call) => {
                    return BlockAnswer::RunCall {
                        answer: answer.to_owned(),
                        call,
                    }
                }
                Questioned::Taken => {
                    return BlockAnswer::Answer(outcome_of(value, AnswerSource::FinalVar, None))
                }
            }
        }
        Some(FinalAnswer::Submit { value }) => match validate_submit(settings, &value) {
            Ok(()) => {
                let answer = submitted_answer(&value, settings.output_schema.is_some());
                return BlockAnswer::Answer(outcome_of(
                    answer,
                    AnswerSource::Submit,
                    Some(value),
                ));
            }
            Err(errors) => notices.push(format!(
                "SUBMIT was rejected: the payload does not match the output schema:\n{errors}\nFix it and call SUBMIT again."
            )),
        },
        None => {}
    }
    match bare {
        Some(BareFinal::Answer(word)) => {
            return BlockAnswer::Answer(outcome_of(word, AnswerSource::Final, None))
        }
        Some(BareFinal::Notice(text)) => {
            // A word no output showed, after code that printed another value: the
            // printed value's line, not how to quote the word.
            let unlike = bare_final::bare_word(code).and_then(|word| {
                let printed = ran.printed_instead(word)?;
                Some(prompt::bare_final_unlike_output(word, printed))
            });
            notices.push(unlike.unwrap_or(text));
        }
        None => {}
    }
    let Some(word) = error.and_then(|error| word_as_code::read(code, error)) else {
        return BlockAnswer::None;
    };
    if ran.last_printed.as_deref() == Some(word) {
        // The word its code printed last, sent as code: the answer.
        return BlockAnswer::Answer(outcome_of(word.to_owned(), AnswerSource::Final, None));
    }
    // Sent again, it is refused like a value ([`super::refusal`]).
    ran.refused_values.insert(code.trim().to_owned());
    notices.push(prompt::undefined_word(word, task_call));
    BlockAnswer::None
}

/// The notice questioning a `FINAL` `answer`: a value `written` into the `FINAL` (not
/// a variable's) that no output of the run showed, when the last block that printed
/// ended in another value of its kind ([`unprinted_answer`]); a sentence where the task states its answer's form
/// ([`answer_form`]); or, before the task's call (`task`'s first, where there is one)
/// ran, a value not of the shape the task's answer has, a zero, or the value printed
/// last by code that does not name what the task selects its records by
/// ([`crate::rlm::selection`]) or, for a task about pairs, pairs nothing
/// ([`crate::rlm::pairing`]). [`Questioned::Taken`] takes the answer.
/// Each answer is questioned once: sent again, it is taken — or, when the notice
/// offered the task's call, that call runs in its place and a third send is taken. The
/// trace says why an answer was not taken (`runs show` shows the warning).
pub(super) fn question_answer<'a>(
    answer: &str,
    written: bool,
    ran: &mut RanBefore,
    task: (Option<&'a str>, TaskAnswer<'_>),
    sink: &EventSink,
) -> Questioned<'a> {
    let answer = answer.trim();
    let (task_call, task_answer) = task;
    let call = task_call.filter(|call| !ran.blocks.contains_key(call.trim()));
    let printed_instead = ran.printed_instead(answer).filter(|_| written);
    let (why, notice, offered) = if let Some(printed) = printed_instead {
        (
            format!("it is in no output of the run's code, which printed {printed} last"),
            prompt::answer_unlike_output(answer, printed),
            None,
        )
    } else if let Some(form) = answer_form::unmet(answer, task_answer.form) {
        (
            format!("it is a sentence, where the task says \"{form}\""),
            prompt::answer_not_in_form(form, "FINAL(...)"),
            None,
        )
    } else if let Some((call, kind)) = call.zip(task_answer.kind.filter(|kind| !kind.fits(answer)))
    {
        // Code that read the wrong thing (s18-seed14, js `aggregate` item 4: the time
        // `02:21` taken as the label).
        (
            format!("it is not {}, as the task's answer is", kind.described()),
            prompt::unfit_answer(answer, &kind.described(), call),
            Some(call),
        )
    } else if let Some(call) = call.filter(|_| prompt::is_zero(answer)) {
        // A zero the task's call did not give: most often a pattern that matched
        // nothing (mends-seed11, js `pairs` item 3: its code printed 0, answered 0).
        (
            "a zero the task's call did not give".to_owned(),
            prompt::zero_answer(answer, call),
            Some(call),
        )
    } else if let Some((call, value)) =
        call.zip(ran.unselected_by_printer(answer, task_answer.selects))
    {
        // Code that added every record (s19-seed19 python `aggregate` item 2: every
        // `amount=` summed, `label=fraud` only in a comment, 308268 for 98784).
        (
            format!("the code that printed it names no `{value}`, which the task selects its records by"),
            prompt::unselected_answer(answer, value, call),
            Some(call),
        )
    } else if let Some((call, field)) = call
        .zip(task_answer.paired)
        .filter(|_| ran.unpaired_by_printer(answer))
    {
        // Code that counted records, not pairs (s19b-seed20 python `pairs` items 0–2
        // and 4: `len(filtered_pairs)`, 293 for 3584).
        (
            format!("the code that printed it pairs no records by their `{field}=` value"),
            prompt::unpaired_answer(answer, field, call),
            Some(call),
        )
    } else {
        return Questioned::Taken;
    };
    if !ran.questioned.insert(answer.to_owned()) {
        // Sent again unchanged: the task's call the notice offered runs in its place
        // (the same reading's item: `FINAL(308268)` again, the call never copied).
        return offered.map_or(Questioned::Taken, Questioned::RunCall);
    }
    let again = if offered.is_some() {
        "sent again, the task's call runs in its place"
    } else {
        "sent again, it is taken"
    };
    sink.emit(EventData::Warning {
        message: format!("the answer {answer} is questioned once ({again}): {why}"),
    });
    Questioned::Notice(notice)
}

/// What [`question_answer`] makes of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Questioned<'a> {
    /// It is the answer.
    Taken,
    /// It is questioned: the model is told this.
    Notice(String),
    /// It was questioned with the task's call, which has not run, and came again: the
    /// call runs in its place ([`super::run_in_place`]); sent a third time, it is taken.
    RunCall(&'a str),
}

/// What a block that ran gives toward the answer ([`answer_of_block`]).
#[derive(Debug)]
pub(super) enum BlockAnswer<'a> {
    /// The run's answer.
    Answer(LoopOutcome),
    /// Its `FINAL` of `answer`, questioned before with the task's `call`, came again:
    /// the call runs in its place.
    RunCall { answer: String, call: &'a str },
    /// No answer (what the model is told, if anything, is in the notices).
    None,
}

/// The answer a `SUBMIT(value)` gives: a string as it is, else the value as JSON —
/// but with no `--output-schema` (`schema` false), an object of one member whose value
/// is a string, a number or a boolean gives that value: the caller asked for text,
/// and the model wrapped it (s18b-seed15 python `aggregate` item 4:
/// `SUBMIT({'answer': 'fraud'})` for "Answer with the label only" answered the object).
/// The payload itself is kept beside the answer either way.
fn submitted_answer(value: &Value, schema: bool) -> String {
    let sole = match value {
        Value::Object(members) if !schema && members.len() == 1 => members.values().next(),
        _ => None,
    };
    match (value, sole) {
        (Value::String(text), _) | (_, Some(Value::String(text))) => text.clone(),
        (_, Some(scalar @ (Value::Number(_) | Value::Bool(_)))) => scalar.to_string(),
        (other, _) => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// A SUBMIT payload that does not match `--output-schema`: what is wrong, one line
/// each, for the model to fix.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.join("\n"))]
struct SchemaMismatch(Vec<String>);

/// Checks a SUBMIT payload against `--output-schema`.
fn validate_submit(settings: &LoopSettings, value: &Value) -> Result<(), SchemaMismatch> {
    let Some(schema) = &settings.output_schema else {
        return Ok(());
    };
    let errors: Vec<String> = schema
        .iter_errors(value)
        .map(|e| format!("- at {}: {e}", e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(SchemaMismatch(errors))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::submitted_answer;

    #[test]
    fn a_submitted_object_of_one_scalar_is_that_value_when_no_schema_asks_for_json() {
        assert_eq!(
            submitted_answer(&json!({"answer": "fraud"}), false),
            "fraud"
        );
        assert_eq!(submitted_answer(&json!({"count": 46}), false), "46");
        assert_eq!(submitted_answer(&json!("plain"), false), "plain");
        // With a schema, or with more than one member or a nested value, the JSON.
        assert_eq!(
            submitted_answer(&json!({"answer": "fraud"}), true),
            "{\n  \"answer\": \"fraud\"\n}"
        );
        assert_eq!(
            submitted_answer(&json!({"a": 1, "b": 2}), false),
            "{\n  \"a\": 1,\n  \"b\": 2\n}"
        );
        assert_eq!(
            submitted_answer(&json!({"a": [1]}), false),
            "{\n  \"a\": [\n    1\n  ]\n}"
        );
        assert_eq!(submitted_answer(&json!(7), false), "7");
    }
}

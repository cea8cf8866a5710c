//! The form a task states for its answer ("Answer with the four numbers separated by
//! commas."), and an answer written as a sentence around it: questioned once with that
//! form, and taken when sent again. The local model found the four keys' lines and
//! answered "The special magic numbers for amber-falcon-05, … are 5599158, 9030200,
//! 5043979, and 6488076." — the right numbers among the keys' own, which a caller
//! reading "numbers separated by commas" cannot take apart (docs/eval.md, s18b-seed15
//! tools `multi-needle` item 3).

/// Words an answer may have before it is read as a sentence around the answer (an
/// answer such as "The special magic number for jolly-quokka-91 is 8520563." has nine).
const MAX_ANSWER_WORDS: usize = 12;

/// What the task says of its answer: its shape, where its exact plan names one, and the
/// form its words state.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TaskAnswer<'a> {
    /// The shape of the answer the task's exact call gives ([`super::task_plan`]).
    pub kind: Option<&'a super::task_plan::AnswerKind>,
    /// The task's sentence that states its answer's form ([`stated_form`]).
    pub form: Option<&'a str>,
    /// The values the task selects its records by ([`super::selection`]).
    pub selects: &'a [String],
    /// The field whose shared values the task pairs ([`super::pairing`]).
    pub paired: Option<&'a str>,
}

/// The task's sentence that states its answer's form: the one that begins "Answer
/// with" ("Answer with a number.", "Answer with the label only."), trimmed.
pub(super) fn stated_form(task: &str) -> Option<&str> {
    let lower = task.to_ascii_lowercase();
    let start = lower.find("answer with")?;
    let rest = &task[start..];
    let end = rest
        .find(['.', '?', '!', '\n'])
        .map_or(rest.len(), |end| end + 1);
    Some(rest[..end].trim())
}

/// The task's stated form, when `answer` is a sentence around the answer: more than
/// [`MAX_ANSWER_WORDS`] words, where the task states a form.
pub(super) fn unmet<'t>(answer: &str, form: Option<&'t str>) -> Option<&'t str> {
    form.filter(|_| answer.split_whitespace().count() > MAX_ANSWER_WORDS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MULTI: &str = "What are the special magic numbers for amber-falcon-05 and dusty-yak-07 mentioned in the context? Answer with the four numbers separated by commas.";

    #[test]
    fn the_form_is_the_sentence_that_begins_answer_with() {
        assert_eq!(
            stated_form(MULTI),
            Some("Answer with the four numbers separated by commas.")
        );
        assert_eq!(
            stated_form("Which label appears most? answer with the label only"),
            Some("answer with the label only")
        );
        assert_eq!(stated_form("Summarise the incidents."), None);
    }

    #[test]
    fn a_sentence_of_many_words_does_not_meet_a_stated_form() {
        let form = stated_form(MULTI);
        let sentence = "The special magic numbers for amber-falcon-05, hollow-walrus-18, eager-bison-13 and dusty-yak-07 mentioned in the context are 5599158, 9030200, 5043979, and 6488076.";
        assert_eq!(unmet(sentence, form), form);
        assert_eq!(unmet("5599158, 9030200, 5043979, 6488076", form), None);
        assert_eq!(
            unmet(
                "The special magic number for jolly-quokka-91 is 8520563.",
                form
            ),
            None
        );
        // No stated form: any answer as written.
        assert_eq!(unmet(sentence, None), None);
    }
}

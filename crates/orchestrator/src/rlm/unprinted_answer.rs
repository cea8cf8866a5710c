//! A `FINAL` answer of one value that no output of the run showed, sent after the code
//! printed another single value: an answer the code did not find. Qwen2.5-Coder-1.5B
//! printed `returns` (the label in the most records), then wrote `FINAL(loyalty)` — the
//! value a loop variable was left holding, which the REPL's variable list showed — and,
//! told how to quote a word, `FINAL("loyalty")` (docs/eval.md, final-line-seed9, python
//! `aggregate` item 4).
//!
//! Such an answer is questioned once, with the `FINAL` line of the value the code
//! printed; the same answer sent again is taken ([`super::code_turn`] keeps which).

use super::bare_final::final_argument;
use super::prose_answer::{printed_value, stands_in, ungrouped};

/// The value `last_printed` — the one value the last block that printed anything
/// ended its output with — when `answer` is another single value of the same kind (a
/// number for a number, a word for a word) that none of `outputs` (the run's blocks'
/// outputs) holds; `None` when the answer is what the code showed, is not one value (a
/// list, a sentence), is of another kind — `yes` after a count printed `3` is an answer
/// read from it — or nothing printed one.
pub(super) fn other_printed<'a, 'o>(
    answer: &str,
    last_printed: &'a str,
    outputs: impl IntoIterator<Item = &'o str>,
) -> Option<&'a str> {
    let answer = answer.trim();
    if printed_value(answer) != Some(answer) || answer.eq_ignore_ascii_case(last_printed) {
        return None;
    }
    let plain = ungrouped(answer);
    match (Kind::of(answer), Kind::of(last_printed)) {
        (Some(answered), Some(printed)) if answered == printed => {}
        _ => return None,
    }
    let shown = outputs.into_iter().any(|output| {
        let lower = output.to_lowercase();
        stands_in(&lower, &answer.to_lowercase()) || stands_in(&ungrouped(&lower), &plain)
    });
    (!shown).then_some(last_printed)
}

/// What a single value is, for comparing an answer with what the code printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A number, its digits grouped or not (`90454`, `90,454`, `-3.5`).
    Number,
    /// A word of letters only (`returns`, `loyalty`).
    Word,
}

impl Kind {
    /// The kind of `value`; `None` for anything else — a handle such as
    /// `pieces-ea8872feb37c` names a value, it is not one.
    fn of(value: &str) -> Option<Self> {
        if ungrouped(value).parse::<f64>().is_ok() {
            Some(Self::Number)
        } else if value.chars().all(char::is_alphabetic) {
            Some(Self::Word)
        } else {
            None
        }
    }
}

/// The literal a block that is one `FINAL("text")`, `FINAL('text')` or `FINAL(number)`
/// call answers with: a value written into the code, not one the code computed
/// (`FINAL(most_common)` names a variable and is not read).
pub(super) fn literal_in_code(code: &str) -> Option<&str> {
    let argument = final_argument(code)?;
    let quoted = ['"', '\'', '`'].into_iter().find_map(|quote| {
        argument
            .strip_prefix(quote)?
            .strip_suffix(quote)
            .filter(|inner| !inner.contains(quote))
    });
    let number = argument.parse::<f64>().is_ok().then_some(argument);
    quoted.or(number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_no_output_showed_is_questioned_with_the_printed_one() {
        // The final-line-seed9 reading's python `aggregate` item 4, as the model wrote it.
        assert_eq!(
            other_printed("loyalty", "returns", ["returns\n", "NameError: name 'x'"]),
            Some("returns")
        );
        assert_eq!(other_printed(" 1924 ", "90454", ["90454"]), Some("90454"));
    }

    #[test]
    fn a_value_some_output_showed_is_taken() {
        // Printed by an earlier block, in any case, or with its digits grouped.
        assert_eq!(
            other_printed("loyalty", "45", ["loyalty: 45, returns: 129", "45"]),
            None
        );
        assert_eq!(other_printed("Returns", "returns", ["returns"]), None);
        assert_eq!(other_printed("RETURNS", "12", ["top: returns", "12"]), None);
        assert_eq!(other_printed("90,454", "7", ["sum 90454", "7"]), None);
        // The value the code printed last is the answer.
        assert_eq!(other_printed("129", "129", ["129"]), None);
    }

    #[test]
    fn an_answer_of_another_kind_than_the_printed_value_is_taken() {
        // A word read from a count, a count of what a word named.
        assert_eq!(other_printed("yes", "3", ["3"]), None);
        assert_eq!(other_printed("done", "25", ["30 100 25"]), None);
        assert_eq!(other_printed("12", "billing", ["billing"]), None);
        assert_eq!(other_printed("1,924", "90454", ["90454"]), Some("90454"));
        // A handle a helper printed is not a value an answer is compared with.
        assert_eq!(
            other_printed("done", "pieces-ea8872feb37c", ["pieces-ea8872feb37c"]),
            None
        );
    }

    #[test]
    fn an_answer_of_more_than_one_value_is_taken() {
        assert_eq!(other_printed("12, 40 and 7", "7", ["7"]), None);
        assert_eq!(
            other_printed("the label returns", "loyalty", ["loyalty"]),
            None
        );
        assert_eq!(other_printed("", "7", ["7"]), None);
    }

    #[test]
    fn a_final_call_with_a_literal_gives_it() {
        assert_eq!(literal_in_code("FINAL(\"loyalty\")"), Some("loyalty"));
        assert_eq!(
            literal_in_code("# done\nFINAL('returns');"),
            Some("returns")
        );
        assert_eq!(literal_in_code("FINAL(`129`)"), Some("129"));
        assert_eq!(literal_in_code("FINAL( 129 )"), Some("129"));
    }

    #[test]
    fn a_final_call_of_code_is_not_a_literal() {
        assert_eq!(literal_in_code("FINAL(most_common)"), None);
        assert_eq!(literal_in_code("FINAL(str(total))"), None);
        assert_eq!(literal_in_code("print(1)\nFINAL(\"a\")"), None);
        assert_eq!(literal_in_code("FINAL(\"a\" + \"b\")"), None);
        assert_eq!(literal_in_code("FINAL_VAR(\"a\")"), None);
    }
}

//! Reading values out of outputs and prose, for the rules and the forced answer: the
//! one value an output ends in (`290`, `billing (12)`), whether an output ended in a
//! "nothing" value (`null`, `[]`), whether prose states a value. They read only what
//! the model's code printed and what the model wrote.

/// The longest printed value a correction quotes: a number, a word or a short phrase.
const MAX_VALUE_CHARS: usize = 80;

/// The values a language prints for "nothing found": a result still at its initial
/// `null`, a lookup that missed, an empty list or map.
const NOTHING: [&str; 6] = ["null", "None", "undefined", "NaN", "[]", "{}"];

/// The "nothing" value `last_output` ends with, when its last line ends with one
/// ("The label that appears in the most records is: null"): the block found nothing,
/// so a reply in prose after it states a guess.
pub(super) fn found_nothing(last_output: &str) -> Option<&'static str> {
    let last_line = last_output.trim_end().lines().next_back()?;
    let last = last_line
        .split_whitespace()
        .next_back()?
        .trim_end_matches(['.', ',', ';'])
        .trim_matches(['"', '\'', '`']);
    NOTHING.into_iter().find(|nothing| *nothing == last)
}

/// The value `prose` states out of `last_output`, the last block's output: that output
/// as a whole when it is one short line, else the value its last line ends with
/// ([`printed_value`]: `billing` of `billing (184)`, the count after a note), held by
/// `prose` with no letter or digit touching either end — a number also when the prose
/// groups its digits ("83,810" for `83810`).
pub(super) fn stated<'a>(prose: &str, last_output: &'a str) -> Option<&'a str> {
    let whole = last_output.trim();
    let one_line =
        !whole.is_empty() && !whole.contains('\n') && whole.chars().count() <= MAX_VALUE_CHARS;
    [one_line.then_some(whole), printed_value(last_output)]
        .into_iter()
        .flatten()
        .find(|value| stands_in(prose, value) || stands_in(&ungrouped(prose), value))
}

/// The value `output` ends with, when its last line is one: a number or a single word
/// (`51`, `16459`, `loyalty`), or a ranked value with its count (`billing (12)` →
/// `billing`); not a "nothing" value, a sentence or an error.
pub(super) fn printed_value(output: &str) -> Option<&str> {
    let line = output.trim_end().lines().next_back()?.trim();
    let value = rlm_plan::reduce::ranked_item(line).unwrap_or(line);
    let one_token = !value.is_empty()
        && value.chars().count() <= MAX_VALUE_CHARS
        && value
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | ',' | '-'));
    (one_token && !NOTHING.contains(&value)).then_some(value)
}

/// True when `text` holds `value` with no letter, digit or `_` touching either end
/// (`loyalty` stands in "the most: loyalty (80)", not in "loyalty_2"): how a printed
/// value is recognised in a reply, and a bare `FINAL(word)`'s word in an output
/// ([`super::bare_final`]).
pub(super) fn stands_in(text: &str, value: &str) -> bool {
    let touches = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(value).any(|(at, _)| {
        !touches(text[..at].chars().next_back())
            && !touches(text[at + value.len()..].chars().next())
    })
}

/// `text` with the commas that group digits taken out ("83,810" → "83810").
pub(super) fn ungrouped(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    chars
        .iter()
        .enumerate()
        .filter(|&(i, &c)| {
            let between_digits = i > 0
                && chars[i - 1].is_ascii_digit()
                && chars.get(i + 1).is_some_and(char::is_ascii_digit);
            !(c == ',' && between_digits)
        })
        .map(|(_, &c)| c)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentence_stating_the_printed_value_names_it() {
        assert_eq!(stated("The answer is 290.", "290\n"), Some("290"));
        assert_eq!(
            stated(
                "The label that appears in the most records of the context is `shipping`.",
                "shipping"
            ),
            Some("shipping")
        );
        assert_eq!(stated("It is **95172**.", " 95172 "), Some("95172"));
        // A ranked value with its count, and a count printed after a note.
        assert_eq!(
            stated(
                "The label that appears in the most records of the context is \"billing\".",
                "billing (184)\n"
            ),
            Some("billing")
        );
        assert_eq!(
            stated(
                "The answer is 51.",
                "Your map was refused before … It gives 51.\n51\n"
            ),
            Some("51")
        );
        assert_eq!(
            stated("… born after 2000 is **83,810**.", "83810"),
            Some("83810")
        );
    }

    #[test]
    fn an_output_ending_in_a_nothing_value_is_recognised() {
        assert_eq!(
            found_nothing("The label that appears in the most records is: null\n"),
            Some("null")
        );
        assert_eq!(found_nothing("counts: {}"), Some("{}"));
        assert_eq!(found_nothing("1. first\nresult: None."), Some("None"));
        assert_eq!(found_nothing("'undefined'"), Some("undefined"));
        // A value, or "nothing" before the end, is not.
        assert_eq!(found_nothing("The most common label is: fraud"), None);
        assert_eq!(found_nothing("null labels: 3"), None);
        assert_eq!(found_nothing("0"), None);
        assert_eq!(found_nothing(""), None);
    }

    #[test]
    fn an_output_ending_in_one_value_gives_it() {
        assert_eq!(
            printed_value("Your map was refused before … It gives 51. If that answers the task, reply with exactly this line and nothing else:\nFINAL(51)\n51\n"),
            Some("51")
        );
        assert_eq!(printed_value("16459"), Some("16459"));
        assert_eq!(printed_value("billing (12)\n"), Some("billing"));
        assert_eq!(printed_value("-3.5"), Some("-3.5"));
        // A sentence, an error's last line, "nothing", or no output is not a value.
        assert_eq!(printed_value("total: 51"), None);
        assert_eq!(printed_value("    at <eval> (<cell 1>:5:28)"), None);
        assert_eq!(printed_value("result\nnull"), None);
        assert_eq!(printed_value("[1, 2]"), None);
        assert_eq!(printed_value(""), None);
    }

    #[test]
    fn other_prose_and_other_outputs_name_nothing() {
        // Part of a longer number or word is not the value.
        assert_eq!(stated("The answer is 2901.", "290"), None);
        assert_eq!(stated("The answer is 2,901.", "290"), None);
        // A list's commas are not a number's.
        assert_eq!(stated("Counts: 8, 3 and 1.", "83"), None);
        assert_eq!(stated("shippingly done", "shipping"), None);
        // Prose that does not state the printed value.
        assert_eq!(stated("Let me look at the records first.", "290"), None);
        // A long output is not one value; a many-line one's value is its last line's.
        assert_eq!(stated("see a", "a\nb"), None);
        assert_eq!(stated(&"x".repeat(100), &"x".repeat(90)), None);
        assert_eq!(stated("anything", "  \n"), None);
    }
}

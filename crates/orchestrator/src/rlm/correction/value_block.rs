//! A block that is only a value written into the code — `[["Lima", "Accra"]]`, `42`,
//! `'billing'` — or one sentence of prose is not run: it reads nothing and computes
//! nothing, so running it only echoes the value back (or fails), and a model that sent
//! it once tends to send it again. A value that is one scalar is shown its exact
//! `FINAL` line, in case it is the model's answer sent as code.

use super::{Block, Correction, Form, Rule, Verdict};

/// What a block of only a value holds.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Value<'a> {
    /// One number or one quoted string: what the model may mean as its answer (the
    /// string without its quotes).
    Scalar(&'a str),
    /// A list, tuple, object or more than one value.
    Composite,
}

impl<'a> Value<'a> {
    /// The one value the block holds, when it is a scalar.
    pub(super) fn scalar(&self) -> Option<&'a str> {
        match self {
            Self::Scalar(value) => Some(value),
            Self::Composite => None,
        }
    }
}

/// What `code` holds when it is only literal values — strings, numbers, `true`,
/// `None`, brackets, commas, colons and comments — with at least one string or number;
/// `None` when it names or calls anything.
pub(super) fn read(code: &str) -> Option<Value<'_>> {
    let mut values = Vec::new();
    let mut punctuation = false;
    let mut rest = code;
    loop {
        rest = rest.trim_start();
        let Some(first) = rest.chars().next() else {
            break;
        };
        match first {
            '#' => rest = skip_line(rest),
            '/' if rest.starts_with("//") => rest = skip_line(rest),
            '"' | '\'' | '`' => {
                let end = string_end(rest, first)?;
                values.push(&rest[1..end - 1]);
                rest = &rest[end..];
            }
            '[' | ']' | '{' | '}' | '(' | ')' | ',' | ':' | ';' => {
                if first != ';' {
                    punctuation = true;
                }
                rest = &rest[1..];
            }
            '-' | '+' | '.' | '0'..='9' => {
                let end = number_end(rest)?;
                values.push(&rest[..end]);
                rest = &rest[end..];
            }
            _ => {
                let end = rest
                    .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                    .unwrap_or(rest.len());
                if !KEYWORDS.contains(&&rest[..end]) {
                    return None;
                }
                punctuation = true;
                rest = &rest[end..];
            }
        }
    }
    match values.as_slice() {
        [] => None,
        [value] if !punctuation => Some(Value::Scalar(value)),
        _ => Some(Value::Composite),
    }
}

/// True when `code` is one line of prose — a capitalised sentence of at least four
/// words with none of code's brackets, quotes, operators or calls — such as
/// `The label that appears in the most records is: support`. Like a value, it
/// computes nothing.
pub(super) fn is_sentence(code: &str) -> bool {
    let mut lines = code.lines().map(str::trim).filter(|line| !line.is_empty());
    let (Some(line), None) = (lines.next(), lines.next()) else {
        return false;
    };
    let words: Vec<&str> = line.split_whitespace().collect();
    words.len() >= 4
        && line.starts_with(|c: char| c.is_uppercase())
        && !line.contains(|c: char| "()[]{}=;`'\"<>+*/\\#$&|".contains(c))
        && words.iter().all(|word| {
            word.trim_end_matches([':', ',', '.', '?', '!'])
                .chars()
                .all(char::is_alphanumeric)
        })
}

/// The literal words of Python and JavaScript that are values, not names.
const KEYWORDS: [&str; 8] = [
    "true",
    "false",
    "null",
    "undefined",
    "True",
    "False",
    "None",
    "NaN",
];

/// `text` after its first line.
fn skip_line(text: &str) -> &str {
    text.find('\n').map_or("", |end| &text[end..])
}

/// The byte just past the string `text` opens with `quote`; `None` when it is not
/// closed on its line, or when a template literal computes (`${…}`).
fn string_end(text: &str, quote: char) -> Option<usize> {
    let mut escaped = false;
    for (at, c) in text.char_indices().skip(1) {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '\n' if quote != '`' => return None,
            '$' if quote == '`' && text[at..].starts_with("${") => return None,
            _ if c == quote => return Some(at + c.len_utf8()),
            _ => {}
        }
    }
    None
}

/// The byte just past the number `text` starts with (a sign, digits, one point, an
/// exponent); `None` when no digit is there, as in a lone `-` or `.`.
fn number_end(text: &str) -> Option<usize> {
    let end = text
        .char_indices()
        .skip(1)
        .find(|(_, c)| !(c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '_')))
        .map_or(text.len(), |(at, _)| at);
    let number = &text[..end];
    let digits = number.trim_start_matches(['-', '+']);
    let plain = digits.replace('_', "");
    (digits.starts_with(|c: char| c.is_ascii_digit() || c == '.') && plain.parse::<f64>().is_ok())
        .then_some(end)
}

/// The rule.
pub(super) struct ValueBlock;

impl Correction for ValueBlock {
    fn rule(&self) -> Rule {
        Rule::ValueBlock
    }

    fn before_block(&self, block: &Block<'_>) -> Verdict {
        if !matches!(block.form, Form::Code { .. }) {
            return Verdict::Take;
        }
        if is_sentence(block.code) {
            return Verdict::Refuse(format!(
                "Code not run: `{}` is a sentence, not code; it computes nothing. Write code that computes the answer from `context` and prints it; once it has, reply with FINAL(answer).",
                one_line(block.code, 80)
            ));
        }
        let Some(value) = read(block.code) else {
            return Verdict::Take;
        };
        let shown = one_line(block.code, 60);
        Verdict::Refuse(match value.scalar() {
            Some(scalar) => format!(
                "Code not run: it is only a value written into the code (`{shown}`); it reads nothing from `context` and computes nothing.\n\nIf {scalar} is your answer, reply with exactly this line and nothing else:\nFINAL({scalar})\nOtherwise write code that computes the answer from `context`."
            ),
            None => format!(
                "Code not run: `{shown}` is only a value written into the code; it reads nothing from `context` and computes nothing. Write code that computes the answer from `context` and prints it."
            ),
        })
    }
}

/// `code` on one line (its lines joined by spaces), cut to `limit` characters with `…`.
fn one_line(code: &str, limit: usize) -> String {
    let joined = code.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= limit {
        joined
    } else {
        let cut: String = joined.chars().take(limit).collect();
        format!("{cut} …")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy as _;

    #[test]
    fn reads_a_nested_list_of_strings_as_composite() {
        assert_eq!(
            read("[[\"Lima\", \"Accra\", \"Quito\", \"Osaka\"]]"),
            Some(Value::Composite)
        );
    }

    #[test]
    fn reads_one_number_or_string_as_a_scalar() {
        assert_eq!(read("42"), Some(Value::Scalar("42")));
        assert_eq!(read("-3.5;"), Some(Value::Scalar("-3.5")));
        assert_eq!(read("'billing'"), Some(Value::Scalar("billing")));
        assert_eq!(read("\"billing\"\n"), Some(Value::Scalar("billing")));
        assert_eq!(read("# the answer\n172"), Some(Value::Scalar("172")));
        assert_eq!(read("// the answer\n`172`;"), Some(Value::Scalar("172")));
    }

    #[test]
    fn reads_lists_tuples_objects_and_keywords_as_composite() {
        for code in [
            "['Lima', 'Riga']",
            "(1, 2)",
            "{\"label\": \"fraud\", \"count\": 3}",
            "[1, None, True]",
            "1\n2",
            "[null, 2];",
        ] {
            assert_eq!(read(code), Some(Value::Composite), "{code}");
        }
    }

    #[test]
    fn reads_a_sentence_sent_as_code() {
        assert!(is_sentence(
            "The label that appears in the most records is: support"
        ));
        assert!(is_sentence("\nThe answer is 42.\n"));
    }

    #[test]
    fn leaves_code_and_short_or_lowercase_lines_alone() {
        for code in [
            "print('The label is support')",
            "The answer is = 42",
            "return x if y else z",
            "Answer: support",
            "The label is\nsupport here now",
            "console.log(context.length)",
            "SyntaxError: expecting ';'",
            "Counter(labels).most_common(1)",
        ] {
            assert!(!is_sentence(code), "{code}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_read_without_a_panic_or_a_hang(code in "\\PC{0,200}") {
            let _ = read(&code);
        }

        #[test]
        fn a_json_list_of_numbers_and_strings_reads_as_a_value(
            items in proptest::collection::vec(
                proptest::prop_oneof![
                    (-1_000_000i64..1_000_000).prop_map(serde_json::Value::from),
                    "[a-zA-Z0-9 ,.=]{0,12}".prop_map(serde_json::Value::from),
                ],
                1..8,
            )
        ) {
            let code = serde_json::Value::from(items).to_string();
            proptest::prop_assert_eq!(read(&code), Some(Value::Composite));
        }
    }

    #[test]
    fn leaves_code_that_names_or_computes_anything_alone() {
        for code in [
            "print(42)",
            "console.log([1, 2])",
            "x = 1",
            "context",
            "[c for c in cities]",
            "`${context.length}`",
            "1 + 2",
            "-",
            "len(context)",
            "[]",
            "None",
            "'unclosed",
            "",
            "# only a comment",
        ] {
            assert_eq!(read(code), None, "{code}");
        }
    }

    fn ask(code: &str) -> Verdict {
        ValueBlock.before_block(&Block {
            form: Form::Code { language: "python" },
            code,
            log: &crate::rlm::log::BlockLog::new(),
            context_chars: 0,
        })
    }

    #[test]
    fn values_and_sentences_are_refused_and_code_runs() {
        for (code, refused) in [
            ("42", true),
            ("[\"Lima\", \"Accra\"]", true),
            ("The answer is 42 here.", true),
            ("print(42)", false),
            ("len(context)", false),
        ] {
            assert_eq!(matches!(ask(code), Verdict::Refuse(_)), refused, "{code}");
        }
    }

    #[test]
    fn the_texts_the_model_reads() {
        insta::assert_debug_snapshot!("value_block_scalar", ask("'billing'"));
        insta::assert_debug_snapshot!(
            "value_block_list",
            ask("[[\"Lima\", \"Accra\", \"Quito\"]]")
        );
        insta::assert_debug_snapshot!(
            "value_block_sentence",
            ask("The busiest day is the fourteenth")
        );
    }
}

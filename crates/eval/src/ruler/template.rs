//! RULER's templates and answer prefixes (`scripts/data/synthetic/constants.py`, the
//! benchmark's definition, reproduced word for word), how an item's parts are cut from
//! them, and how an input built from them is read back (the oracle reads the baseline's
//! prompt so).

use regex::Regex;

use crate::framing::Framing;

/// A task family's template (with `{context}` and its other slots), its answer prefix
/// and the tokens RULER lets the model generate.
pub(crate) struct Template {
    pub template: &'static str,
    pub answer_prefix: &'static str,
    pub tokens_to_generate: u32,
}

/// `niah`.
pub(crate) const NIAH: Template = Template {
    template: "Some special magic {type_needle_v} are hidden within the following text. Make sure to memorize it. I will quiz you about the {type_needle_v} afterwards.\n{context}\nWhat are all the special magic {type_needle_v} for {query} mentioned in the provided text?",
    answer_prefix: " The special magic {type_needle_v} for {query} mentioned in the provided text are",
    tokens_to_generate: 128,
};

/// `variable_tracking`.
pub(crate) const VT: Template = Template {
    template: "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\nQuestion: Find all variables that are assigned the value {query} in the text above.",
    answer_prefix: " Answer: According to the chain(s) of variable assignment in the text above, {num_v} variables are assigned the value {query}, they are: ",
    tokens_to_generate: 30,
};

/// `common_words_extraction`.
pub(crate) const CWE: Template = Template {
    template: "Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones that appear most often.\n{context}\nQuestion: What are the 10 most common words in the above list?",
    answer_prefix: " Answer: The top 10 words that appear most often in the list are:",
    tokens_to_generate: 120,
};

/// `freq_words_extraction`.
pub(crate) const FWE: Template = Template {
    template: "Read the following coded text and track the frequency of each coded word. Find the three most frequently appeared coded words. {context}\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are the three most frequently appeared words in the above coded text?",
    answer_prefix: " Answer: According to the coded text above, the three most frequently appeared words are:",
    tokens_to_generate: 50,
};

/// An item's input cut at its context: few-shot examples, the template's words before
/// and after the context, the answer prefix.
#[derive(Debug, Clone, Default)]
pub(crate) struct Parts {
    /// Few-shot examples before the template (each a whole input and its answer,
    /// ending with a newline), or nothing.
    pub examples: String,
    /// The template up to `{context}`.
    pub before: String,
    /// The template after `{context}` (the question).
    pub query: String,
    /// The answer prefix.
    pub prefix: String,
    /// RULER's `tokens_to_generate`.
    pub tokens: u32,
}

impl Parts {
    /// `template` with its slots filled from `vars`; `singular` applies the rewording
    /// `niah.py` does when one value is asked (`Some` → `A`, `are all`/`are` → `is`).
    pub fn render(template: &Template, vars: &[(&str, &str)], singular: bool) -> Self {
        let fill = |text: &str| {
            let mut text = text.to_owned();
            if singular {
                text = text
                    .replace("Some", "A")
                    .replace("are all", "is")
                    .replace("are", "is")
                    .replace("answers", "answer");
            }
            for (name, value) in vars {
                text = text.replace(&format!("{{{name}}}"), value);
            }
            text
        };
        let whole = fill(template.template);
        let (before, query) = whole.split_once("{context}").unwrap_or((&whole, ""));
        Self {
            examples: String::new(),
            before: before.to_owned(),
            query: query.to_owned(),
            prefix: fill(template.answer_prefix),
            tokens: template.tokens_to_generate,
        }
    }

    /// The whole input around `context`, answer prefix included (what a few-shot
    /// example is made of).
    pub fn input(&self, context: &str) -> String {
        format!(
            "{}{}{context}{}{}",
            self.examples, self.before, self.query, self.prefix
        )
    }

    /// The question of the arms given the context apart: the template's words before
    /// and after the context, one line each.
    pub fn question(&self) -> String {
        format!("{}\n{}", self.before.trim(), self.query.trim())
    }

    /// The baseline's framing: RULER's input around the context, answer prefix last
    /// (RULER's API client sends `input + answer_prefix` as the user's message).
    pub fn framing(&self) -> Framing {
        Framing::Around {
            before: format!("{}{}", self.examples, self.before),
            after: format!("{}{}", self.query, self.prefix),
            answer_tokens: Some(self.tokens),
        }
    }
}

/// The instruction each template starts with and the question after its context.
const SHAPES: [(&str, &str); 4] = [
    (
        r"(?:Some|A) special magic \w+ (?:are|is) hidden within the following text\. Make sure to memorize it\. I will quiz you about the \w+ afterwards\.\n",
        r"\nWhat (?:are all|is) the special magic \w+ for .+? mentioned in the provided text\?",
    ),
    (
        r"Memorize and track the chain\(s\) of variable assignment hidden in the following text\.\n\n",
        r"\nQuestion: Find all variables that are assigned the value \d+ in the text above\.",
    ),
    (
        r"Below is a numbered list of words\. In these words, some appear more often than others\. Memorize the ones that appear most often\.\n",
        r"\nQuestion: What are the 10 most common words in the above list\?",
    ),
    (
        r"Read the following coded text and track the frequency of each coded word\. Find the three most frequently appeared coded words\. ",
        r"\nQuestion: Do not provide any explanation\. Please ignore the dots '\.\.\.\.'\. What are the three most frequently appeared words in the above coded text\?",
    ),
];

/// Reads a RULER input back: the question (as [`Parts::question`] words it) and the
/// context, taken after the last instruction before the last question, so few-shot
/// examples are passed over. `None` when `input` is not one.
pub fn split_input(input: &str) -> Option<(String, &str)> {
    for (instruction, question) in SHAPES {
        let (Ok(instruction), Ok(question)) = (Regex::new(instruction), Regex::new(question))
        else {
            continue;
        };
        let Some(asked) = question.find_iter(input).last() else {
            continue;
        };
        let Some(told) = instruction.find_iter(&input[..asked.start()]).last() else {
            continue;
        };
        let context = &input[told.end()..asked.start()];
        return Some((
            format!("{}\n{}", told.as_str().trim(), asked.as_str().trim()),
            context,
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_asked_value_is_worded_in_the_singular_as_niah_py_does() {
        let single = Parts::render(
            &NIAH,
            &[("type_needle_v", "number"), ("query", "brave-otter")],
            true,
        );
        assert_eq!(
            single.input("CTX"),
            "A special magic number is hidden within the following text. Make sure to memorize it. I will quiz you about the number afterwards.\nCTX\nWhat is the special magic number for brave-otter mentioned in the provided text? The special magic number for brave-otter mentioned in the provided text is"
        );
        let plural = Parts::render(
            &NIAH,
            &[("type_needle_v", "numbers"), ("query", "a, b, c, and d")],
            false,
        );
        assert_eq!(
            plural.question(),
            "Some special magic numbers are hidden within the following text. Make sure to memorize it. I will quiz you about the numbers afterwards.\nWhat are all the special magic numbers for a, b, c, and d mentioned in the provided text?"
        );
        assert_eq!(plural.tokens, 128);
    }

    #[test]
    fn an_input_is_read_back_past_its_few_shot_example() {
        for (template, vars) in [
            (&VT, vec![("query", "12345"), ("num_v", "5")]),
            (&CWE, vec![]),
            (&FWE, vec![]),
            (&NIAH, vec![("type_needle_v", "uuids"), ("query", "x-y")]),
        ] {
            let parts = Parts::render(template, &vars, false);
            let example = format!("{} 1. a\n", parts.input("EXAMPLE"));
            let input = format!("{example}\n{}", parts.input("THE CONTEXT"));
            let (question, context) = split_input(&input).unwrap();
            assert_eq!(context, "THE CONTEXT");
            assert_eq!(question, parts.question());
        }
        assert_eq!(split_input("Context:\n<<<\nx\n>>>"), None);
    }
}

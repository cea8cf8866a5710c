//! The oracle: a scripted model that answers every suite right when it can see the
//! data, so the evaluation pipeline can be proved offline (`mock-llm --oracle`).
//!
//! As the RLM arm's root model it writes the Python code that computes the answer
//! from `context`, then answers `FINAL_VAR(answer)` once it has seen the output. As the
//! baseline arm's model it computes the answer from the context in its prompt — which
//! is cut to the baseline window, so past the window it answers from part of the data,
//! as a real model would, and its score falls off. It reads the baseline's prompt in
//! `eval`'s own form and in the public benchmarks' framings (RULER's input, OOLONG's
//! system message). OOLONG's labels are not in its contexts: the oracle classifies an
//! instance by its wording, which is right on the tests' files only.

use std::collections::BTreeMap;

use regex::Regex;

mod oolong;
#[cfg(test)]
mod public_tests;
mod ruler;

/// How the baseline arm's prompt starts.
pub const BASELINE_OPENING: &str = "Context:\n<<<\n";
/// What closes the context in the baseline prompt.
const BASELINE_CLOSING: &str = "\n>>>\n\nQuestion: ";

/// How the official library (`rlms` 0.1.3) opens its root prompt, and what follows
/// the question there.
const RLMS_OPENING: &str = "Answer the following: ";
const RLMS_CLOSING: &str = "\n\nYour context is";

/// The baseline arm's prompt: the (cut) context, then the question.
pub fn baseline_prompt(context: &str, question: &str) -> String {
    format!(
        "{BASELINE_OPENING}{context}{BASELINE_CLOSING}{question}\nAnswer with the answer only, no explanation."
    )
}

/// The oracle's reply to a conversation, given every message's text in order: `None`
/// when it is neither a baseline prompt nor an RLM run of one of the suites.
pub fn reply(messages: &[&str]) -> Option<String> {
    let last = messages.last()?;
    let dunno = || "I do not know.".to_owned();
    if let Some(rest) = last.strip_prefix(BASELINE_OPENING) {
        let (context, after) = rest.split_once(BASELINE_CLOSING)?;
        let question = after
            .rsplit_once("\nAnswer with the answer only")
            .map_or(after, |(question, _)| question);
        return Some(solve(question, context).unwrap_or_else(dunno));
    }
    // RULER's input (the baseline of a `ruler/*` item).
    if let Some((question, context)) = crate::ruler::split_input(last) {
        return Some(solve(&question, context).unwrap_or_else(dunno));
    }
    // OOLONG's framing: the window in the system message, the question the user's.
    if let [system, .., question] = messages {
        let preamble = format!("{}\n", crate::framing::OOLONG_PREAMBLE);
        if let Some(context) = system.strip_prefix(&preamble) {
            return Some(solve(question, context).unwrap_or_else(dunno));
        }
    }
    // The official library's (`rlms`) root prompt; its REPL ends a run when the
    // model's code sets `answer["ready"]` (the dict the library puts there).
    if let Some(question) = messages
        .iter()
        .find_map(|m| m.strip_prefix(RLMS_OPENING))
        .and_then(|rest| rest.split(RLMS_CLOSING).next())
    {
        let code = code_for(question.trim())?;
        return Some(format!(
            "Let me compute it.\n```repl\n_slot = answer\n{code}\n_slot[\"content\"] = str(answer)\n_slot[\"ready\"] = True\nanswer = _slot\n```"
        ));
    }
    let question = messages
        .iter()
        .find_map(|m| m.split("Task: ").nth(1))
        .and_then(|rest| rest.split("\n\n").next())?
        .trim();
    if messages.iter().any(|m| m.contains("REPL output:")) {
        return Some("FINAL_VAR(answer)".to_owned());
    }
    code_for(question).map(|code| format!("Let me compute it.\n```repl\n{code}\n```"))
}

/// What a question asks, read from its wording.
#[derive(Debug, PartialEq)]
enum Question {
    Needle(String),
    Needles(Vec<String>),
    Count(String),
    MostFrequent,
    Sum(String),
    Pairs,
    WordCount(String),
    WordLines(String),
    MostFrequentWord(Vec<String>),
    Ruler(ruler::Ask),
    Oolong(crate::oolong::Question),
}

fn read_question(question: &str) -> Option<Question> {
    // The public benchmarks' wordings first: RULER's needle question would read as the
    // project's own.
    if let Some(ask) = ruler::read(question) {
        return Some(Question::Ruler(ask));
    }
    if let Some(asked) = crate::oolong::Question::parse(question) {
        return Some(Question::Oolong(asked));
    }
    let grab = |pattern: &str| {
        Regex::new(pattern)
            .ok()
            .and_then(|re| re.captures(question))
            .and_then(|c| c.get(1))
            .map(|m| m.as_str().to_owned())
    };
    if let Some(keys) = grab(r"special magic numbers for (.+?) mentioned") {
        let keys = keys
            .replace(" and ", ", ")
            .split(", ")
            .map(str::to_owned)
            .collect();
        return Some(Question::Needles(keys));
    }
    if let Some(key) = grab(r"special magic number for (\S+) mentioned") {
        return Some(Question::Needle(key));
    }
    // The record suites' questions, in every wording `--variant reworded` gives them.
    let count = [
        r"How many records in the context have label=(\w+)",
        r"Count the orders whose label is (\w+)\.",
        r"how many orders were filed under (\w+)\?",
        r"How often does the (\w+) label occur",
    ];
    if let Some(label) = count.iter().find_map(|pattern| grab(pattern)) {
        return Some(Question::Count(label));
    }
    let most = [
        "Which label appears in the most records",
        "Which category has the most orders",
        "What is the most common label among these orders",
        "which label shows up most often",
    ];
    if most.iter().any(|wording| question.contains(wording)) {
        return Some(Question::MostFrequent);
    }
    let sum = [
        r"sum of the amount fields of the records with label=(\w+)",
        r"Add up the amounts of all (\w+) orders",
        r"total amount across the orders labelled (\w+)\?",
        r"How much do the (\w+) orders come to",
    ];
    if let Some(label) = sum.iter().find_map(|pattern| grab(pattern)) {
        return Some(Question::Sum(label));
    }
    if let Some(word) = grab(r#"How many times does the word "([a-z]+)" occur"#) {
        return Some(Question::WordCount(word));
    }
    if let Some(word) = grab(r#"How many lines of the context contain the word "([a-z]+)""#) {
        return Some(Question::WordLines(word));
    }
    if let Some(list) = grab(r"Which of the words (.+?) occurs most often") {
        let words = list
            .split('"')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        return Some(Question::MostFrequentWord(words));
    }
    let pairs = [
        "How many pairs of different persons",
        "Count the pairs of people who share a city",
        "How many two-person pairs live in the same city",
        "how many pairs have the same home city",
    ];
    pairs
        .iter()
        .any(|wording| question.contains(wording))
        .then_some(Question::Pairs)
}

/// The records of a record suite's context, each as its fields, in whichever form
/// (`--variant`) it was written: `key=value` lines, JSON lines, or CSV with a header.
fn records_of(context: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = context.lines().filter(|line| !line.trim().is_empty());
    let Some(first) = lines.next() else {
        return Vec::new();
    };
    let all = std::iter::once(first).chain(lines);
    if first.starts_with('{') {
        return all
            .filter_map(|line| {
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(line).ok()
            })
            .map(|object| {
                object
                    .into_iter()
                    .map(|(key, value)| match value {
                        serde_json::Value::String(text) => (key, text),
                        other => (key, other.to_string()),
                    })
                    .collect()
            })
            .collect();
    }
    if !first.contains('=') && first.contains(',') {
        let header: Vec<&str> = first.split(',').collect();
        return all
            .skip(1)
            .map(|line| {
                header
                    .iter()
                    .zip(line.split(','))
                    .map(|(key, value)| ((*key).to_owned(), value.to_owned()))
                    .collect()
            })
            .collect();
    }
    all.map(|line| {
        line.split_whitespace()
            .filter_map(|word| word.split_once('='))
            .map(|(key, value)| (key.to_owned(), value.to_owned()))
            .collect()
    })
    .collect()
}

/// The Python the oracle's code starts with for a record suite: `rows`, the records as
/// dicts, in whichever form they were written.
const ROWS_CODE: &str = "import json, re\nlines = [l for l in context.splitlines() if l.strip()]\nif lines and lines[0].startswith('{'):\n    rows = [json.loads(l) for l in lines]\nelif lines and ',' in lines[0] and '=' not in lines[0]:\n    head = lines[0].split(',')\n    rows = [dict(zip(head, l.split(','))) for l in lines[1:]]\nelse:\n    rows = [dict(re.findall(r'(\\w+)=(\\S+)', l)) for l in lines]\n";

/// The answer computed from `context` (what the oracle sees of it).
fn solve(question: &str, context: &str) -> Option<String> {
    let needle = |key: &str| {
        Regex::new(&format!(
            r"The special magic number for {} is (\d+)\.",
            regex::escape(key)
        ))
        .ok()?
        .captures(context)
        .map(|c| c[1].to_owned())
    };
    let records = || records_of(context);
    let field = |record: &BTreeMap<String, String>, key: &str| record.get(key).cloned();
    let words_of = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_ascii_alphabetic())
            .filter(|w| !w.is_empty())
            .map(str::to_ascii_lowercase)
            .collect()
    };
    let count_of = |word: &str| words_of(context).iter().filter(|w| *w == word).count();
    Some(match read_question(question)? {
        Question::Ruler(ask) => ruler::solve(&ask, context)?,
        Question::Oolong(asked) => oolong::solve(&asked, context)?,
        Question::Needle(key) => needle(&key)?,
        Question::WordCount(word) => count_of(&word).to_string(),
        Question::WordLines(word) => context
            .split('\n')
            .filter(|line| words_of(line).contains(&word))
            .count()
            .to_string(),
        Question::MostFrequentWord(words) => {
            let counts: BTreeMap<String, usize> =
                words_of(context)
                    .into_iter()
                    .fold(BTreeMap::new(), |mut m, w| {
                        *m.entry(w).or_default() += 1;
                        m
                    });
            words
                .into_iter()
                .max_by_key(|w| counts.get(w).copied().unwrap_or(0))?
        }
        Question::Needles(keys) => keys
            .iter()
            .filter_map(|key| needle(key))
            .collect::<Vec<_>>()
            .join(", "),
        Question::Count(label) => records()
            .iter()
            .filter(|r| field(r, "label").as_deref() == Some(label.as_str()))
            .count()
            .to_string(),
        Question::MostFrequent => {
            let mut counts: BTreeMap<String, u64> = BTreeMap::new();
            for label in records().iter().filter_map(|r| field(r, "label")) {
                *counts.entry(label).or_default() += 1;
            }
            counts.into_iter().max_by_key(|(_, n)| *n)?.0
        }
        Question::Sum(label) => records()
            .iter()
            .filter(|r| field(r, "label").as_deref() == Some(label.as_str()))
            .filter_map(|r| field(r, "amount")?.parse::<u64>().ok())
            .sum::<u64>()
            .to_string(),
        Question::Pairs => {
            let mut young: BTreeMap<String, u64> = BTreeMap::new();
            for record in records() {
                let year: Option<u64> = field(&record, "year").and_then(|y| y.parse().ok());
                if let (Some(city), Some(year)) = (field(&record, "city"), year) {
                    if year > 2000 {
                        *young.entry(city).or_default() += 1;
                    }
                }
            }
            young
                .values()
                .map(|n| n * n.saturating_sub(1) / 2)
                .sum::<u64>()
                .to_string()
        }
    })
}

/// The Python code an RLM's root model would write for `question`, leaving the answer
/// in `answer`.
fn code_for(question: &str) -> Option<String> {
    Some(match read_question(question)? {
        Question::Ruler(ask) => ruler::code(&ask),
        Question::Oolong(asked) => oolong::code(&asked),
        Question::Needle(key) => format!(
            "import re\nm = re.search(r'The special magic number for {} is (\\d+)\\.', context)\nanswer = m.group(1) if m else 'not found'\nprint(answer)",
            regex::escape(&key)
        ),
        Question::Needles(keys) => format!(
            "import re\nfound = []\nfor key in {keys:?}:\n    m = re.search(r'The special magic number for ' + re.escape(key) + r' is (\\d+)\\.', context)\n    if m:\n        found.append(m.group(1))\nanswer = ', '.join(found)\nprint(answer)"
        ),
        Question::Count(label) => format!(
            "{ROWS_CODE}answer = str(sum(1 for r in rows if r.get('label') == {label:?}))\nprint(answer)"
        ),
        Question::MostFrequent => format!("{ROWS_CODE}from collections import Counter\ncounts = Counter(r.get('label') for r in rows if r.get('label'))\nanswer = counts.most_common(1)[0][0]\nprint(counts.most_common(3))"),
        Question::Sum(label) => format!(
            "{ROWS_CODE}answer = str(sum(int(r['amount']) for r in rows if r.get('label') == {label:?}))\nprint(answer)"
        ),
        Question::WordCount(word) => format!(
            "import re\nwords = [w.lower() for w in re.findall(r'[A-Za-z]+', context)]\nanswer = str(words.count({word:?}))\nprint(answer)"
        ),
        Question::WordLines(word) => format!(
            "import re\nanswer = str(sum(1 for line in context.split('\\n') if {word:?} in {{w.lower() for w in re.findall(r'[A-Za-z]+', line)}}))\nprint(answer)"
        ),
        Question::MostFrequentWord(words) => format!(
            "import re\nfrom collections import Counter\ncounts = Counter(w.lower() for w in re.findall(r'[A-Za-z]+', context))\nanswer = max({words:?}, key=lambda w: counts[w])\nprint([(w, counts[w]) for w in {words:?}])"
        ),
        Question::Pairs => format!("{ROWS_CODE}from collections import Counter\nyoung = Counter(r['city'] for r in rows if 'city' in r and int(r.get('year', 0)) > 2000)\nanswer = str(sum(n * (n - 1) // 2 for n in young.values()))\nprint(young, answer)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::score;
    use crate::suite::{generate, generate_with, Options, Suite};

    #[test]
    fn the_oracle_solves_every_suite_from_the_whole_context() {
        let hay = crate::suite::tests::fixture();
        for suite in Suite::ALL {
            for (index, distractors) in [(0, 0), (1, 3), (2, 1)] {
                let mut text = Vec::new();
                let options = Options {
                    haystack: Some(&hay).filter(|_| suite.needs_haystack() || index > 0),
                    distractors,
                    ..Options::default()
                };
                let item = generate_with(suite, 30_000, index, 3, 11, &options, &mut text).unwrap();
                let context = String::from_utf8(text).unwrap();
                let prompt = baseline_prompt(&context, &item.question);
                let answer = reply(&[&prompt]).unwrap();
                assert_eq!(
                    score(&item.expected, &answer),
                    1.0,
                    "{suite} {index}: {answer}"
                );
                assert!(code_for(&item.question).is_some(), "{}", item.question);
            }
        }
    }

    /// Every form of the record suites (`--variant`) is solved, by the baseline's
    /// reading of the context and by the code the RLM arm runs (checked for the
    /// question it reads; the code itself runs in the binary's end-to-end tests).
    #[test]
    fn the_oracle_solves_every_form_of_the_record_suites() {
        for suite in [Suite::Aggregate, Suite::Pairs] {
            for form in crate::variant::Form::ALL {
                for index in 0..9 {
                    let options = Options {
                        form,
                        ..Options::default()
                    };
                    let mut text = Vec::new();
                    let item =
                        generate_with(suite, 20_000, index, 9, 4, &options, &mut text).unwrap();
                    let context = String::from_utf8(text).unwrap();
                    let answer = reply(&[&baseline_prompt(&context, &item.question)]).unwrap();
                    assert_eq!(
                        score(&item.expected, &answer),
                        1.0,
                        "{suite} {form} {index}: {} -> {answer}",
                        item.question
                    );
                    assert!(code_for(&item.question).is_some(), "{}", item.question);
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// Every item of every seed is generated the same twice and its answer is
        /// checkable: computed again from the text, it scores 1.
        #[test]
        fn every_seed_gives_a_checkable_item(
            seed in proptest::prelude::any::<u64>(),
            suite in 0_usize..4,
            index in 0_u32..3,
            length in 1024_u64..40_000,
        ) {
            let suite = Suite::ALL[suite];
            let mut text = Vec::new();
            let item = generate(suite, length, index, 3, seed, &mut text).unwrap();
            let mut again = Vec::new();
            proptest::prop_assert_eq!(&generate(suite, length, index, 3, seed, &mut again).unwrap(), &item);
            proptest::prop_assert_eq!(&again, &text);
            let context = String::from_utf8(text).unwrap();
            let answer = reply(&[&baseline_prompt(&context, &item.question)]).unwrap();
            proptest::prop_assert_eq!(score(&item.expected, &answer), 1.0, "{} {}: {}", suite, item.question, answer);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

        /// With the fixture haystack and distractors too: every item is generated the
        /// same twice, its needles are there once, and the oracle's answer, computed
        /// from the text, scores 1.
        #[test]
        fn every_seed_gives_a_checkable_haystack_item(
            seed in proptest::prelude::any::<u64>(),
            suite in proptest::sample::select(vec![Suite::Sniah, Suite::MultiNeedle, Suite::WordCount]),
            index in 0_u32..3,
            length in 1024_u64..40_000,
            distractors in 0_u32..5,
        ) {
            let hay = crate::suite::tests::fixture();
            let options = Options { haystack: Some(&hay), distractors, ..Options::default() };
            let mut text = Vec::new();
            let item = generate_with(suite, length, index, 3, seed, &options, &mut text).unwrap();
            let mut again = Vec::new();
            proptest::prop_assert_eq!(&generate_with(suite, length, index, 3, seed, &options, &mut again).unwrap(), &item);
            proptest::prop_assert_eq!(&again, &text);
            let context = String::from_utf8(text).unwrap();
            let needles = crate::suite::tests::needles_in(&context);
            let asked = match suite {
                Suite::Sniah => 1,
                Suite::MultiNeedle => 4,
                _ => 0,
            };
            let planted = if asked == 0 { 0 } else { asked + distractors as usize };
            proptest::prop_assert_eq!(needles.len(), planted);
            if suite == Suite::WordCount {
                proptest::prop_assert_eq!(&crate::suite::tests::recount(&context, &item.question), &item.expected);
            }
            let answer = reply(&[&baseline_prompt(&context, &item.question)]).unwrap();
            proptest::prop_assert_eq!(score(&item.expected, &answer), 1.0, "{} {}: {}", suite, item.question, answer);
        }
    }

    #[test]
    fn cut_short_the_needle_is_missed() {
        let mut text = Vec::new();
        let item = generate(Suite::Sniah, 30_000, 2, 3, 11, &mut text).unwrap();
        let context = String::from_utf8(text).unwrap();
        let prompt = baseline_prompt(&context[..10_000], &item.question);
        assert_eq!(score(&item.expected, &reply(&[&prompt]).unwrap()), 0.0);
    }

    #[test]
    fn as_the_root_model_it_writes_code_then_answers_by_variable() {
        let task = "Task: What is the special magic number for amber-otter-07 mentioned in the context?\n\nContext: …";
        let first = reply(&["system", task]).unwrap();
        assert!(
            first.contains("```repl") && first.contains("amber\\-otter\\-07"),
            "{first}"
        );
        let second = reply(&["system", task, &first, "REPL output:\n1234567\n"]).unwrap();
        assert_eq!(second, "FINAL_VAR(answer)");
        assert_eq!(reply(&["hello"]), None);
    }

    /// As the official library's root model: one block that computes the answer and
    /// hands it to the library's `answer` dict.
    #[test]
    fn as_the_official_librarys_root_model_it_fills_its_answer_dict() {
        let prompt = "Answer the following: What is the special magic number for amber-otter-07 mentioned in the context?\n\nYour context is a str of 8119 total characters.";
        let first = reply(&["You are a Recursive Language Model (RLM)", prompt]).unwrap();
        assert!(
            first.contains("```repl") && first.contains("amber\\-otter\\-07"),
            "{first}"
        );
        assert!(first.contains("_slot[\"ready\"] = True"), "{first}");
    }
}

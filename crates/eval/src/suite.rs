//! The suites: what each item's context, question and answer are, generated from a
//! seed (and, with a `Haystack`, from its text; for the public benchmarks' suites, from
//! their definitions and data files).
//!
//! A context is plain ASCII text (so characters and bytes count the same) of about the
//! requested length, written to any [`Write`] as it is generated, so a 64 M-character
//! context never sits in memory (the RULER and OOLONG contexts are built in memory
//! first). Items of one suite and length differ by index: the needle's depth for
//! `sniah` (10 % to 90 %), the question for `aggregate` and `word-count`. The needles
//! of `sniah` and `multi-needle` sit in generated filler or, with a haystack, in real
//! prose, among optional distractor needles whose keys differ from the asked ones by a
//! word or a digit. `ruler/*` items are RULER's tasks ([`crate::ruler`]), `oolong/*`
//! items OOLONG's ([`crate::oolong`]).

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::EvalError;
use crate::framing::{Framing, Posed};
use crate::oolong::Set;
use crate::rng::Rng;
use crate::ruler::Task;
use crate::score::Expected;
use crate::text::{distractors, filler_with_needles, word_count, Counting, Needle};
pub use crate::text::{WordTally, WORD_RULE};
pub use crate::variant::{Form, Options, Variant};

/// A benchmark suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Suite {
    /// One needle ("The special magic number for KEY is N.") in filler text, at a
    /// depth from 10 % to 90 %.
    Sniah,
    /// Four needles with different keys; all four numbers must be given.
    MultiNeedle,
    /// Thousands of labelled records: a count, the most frequent label, or a sum.
    Aggregate,
    /// Records of people and cities: how many pairs share a city (quadratic work).
    Pairs,
    /// Real text (a haystack is required): how often a word occurs, how many lines
    /// hold it, which of five words is the most frequent, over the whole context.
    WordCount,
    /// One of RULER's synthetic tasks (`ruler/<task>`).
    Ruler(Task),
    /// OOLONG (`oolong/trec_coarse`, `oolong/released`).
    Oolong(Set),
}

impl Suite {
    /// The project's own suites, in table order.
    pub const ALL: [Suite; 5] = [
        Self::Sniah,
        Self::MultiNeedle,
        Self::Aggregate,
        Self::Pairs,
        Self::WordCount,
    ];

    /// Every suite: the project's own, RULER's eleven, OOLONG's two.
    pub fn every() -> impl Iterator<Item = Suite> {
        Self::ALL
            .into_iter()
            .chain(Task::ALL.into_iter().map(Self::Ruler))
            .chain(Set::ALL.into_iter().map(Self::Oolong))
    }

    /// Whether its items can only be made from a haystack (`--haystack`).
    pub fn needs_haystack(self) -> bool {
        match self {
            Self::WordCount => true,
            Self::Ruler(task) => task.needs_essay(),
            _ => false,
        }
    }

    /// The error of this suite asked for without a haystack.
    pub fn haystack_required(self) -> EvalError {
        match self {
            Self::Ruler(task) => EvalError::EssayRequired(task.suite_name()),
            _ => EvalError::HaystackRequired(self.name()),
        }
    }

    /// The variant `options` make for its items: `Options::variant` and, for a suite
    /// built from a data file, that file.
    pub fn variant(self, options: &Options<'_>) -> Variant {
        let data = match self {
            Self::Oolong(Set::TrecCoarse) => options.trec.map(|t| t.id().clone()),
            Self::Oolong(Set::Released) => options.released.map(|r| r.id().clone()),
            _ => None,
        };
        Variant {
            data,
            ..options.variant()
        }
    }

    /// The data file it is built from (`--data`), if any.
    pub fn data_needed(self) -> Option<Set> {
        match self {
            Self::Oolong(set) => Some(set),
            _ => None,
        }
    }

    /// The suite's name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sniah => "sniah",
            Self::MultiNeedle => "multi-needle",
            Self::Aggregate => "aggregate",
            Self::Pairs => "pairs",
            Self::WordCount => "word-count",
            Self::Ruler(task) => task.suite_name(),
            Self::Oolong(set) => set.suite_name(),
        }
    }

    /// The suite's name as a file name (no `/`).
    pub fn file_name(self) -> String {
        self.name().replace('/', "-")
    }

    /// What mixes into its items' random streams (fixed forever: changing it changes
    /// every item).
    fn stream(self) -> u64 {
        match self {
            Self::Sniah => 0,
            Self::MultiNeedle => 1,
            Self::Aggregate => 2,
            Self::Pairs => 3,
            Self::WordCount => 4,
            Self::Ruler(task) => 16 + task as u64,
            Self::Oolong(set) => 32 + set as u64,
        }
    }
}

impl fmt::Display for Suite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Suite {
    type Err = EvalError;

    fn from_str(text: &str) -> Result<Self, EvalError> {
        let wanted = text.trim().to_ascii_lowercase();
        Self::every()
            .find(|suite| {
                suite.name() == wanted || (wanted == "multi" && *suite == Self::MultiNeedle)
            })
            .ok_or_else(|| EvalError::UnknownSuite(text.to_owned()))
    }
}

impl Serialize for Suite {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Suite {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// Reads a context length: characters, with an optional `k` (×1024) or `m`
/// (×1024²) suffix; at least 1k.
pub fn parse_length(text: &str) -> Result<u64, EvalError> {
    let lower = text.trim().to_ascii_lowercase();
    let (digits, scale) = match lower.strip_suffix('k') {
        Some(digits) => (digits, 1 << 10),
        None => match lower.strip_suffix('m') {
            Some(digits) => (digits, 1 << 20),
            None => (lower.as_str(), 1),
        },
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| EvalError::BadLength(text.to_owned()))?;
    match n.checked_mul(scale) {
        Some(length) if length >= 1 << 10 => Ok(length),
        _ => Err(EvalError::BadLength(text.to_owned())),
    }
}

/// A length as the tables show it: `8k`, `1m`, `64m`.
pub fn format_length(length: u64) -> String {
    if length >= 1 << 20 && length.is_multiple_of(1 << 20) {
        format!("{}m", length >> 20)
    } else if length.is_multiple_of(1 << 10) {
        format!("{}k", length >> 10)
    } else {
        length.to_string()
    }
}

/// One benchmark item: its question and expected answer (its context is written by
/// [`generate`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// The suite.
    pub suite: Suite,
    /// The context's requested length, in characters.
    pub length: u64,
    /// Which item of its suite and length, from 0.
    pub index: u32,
    /// The seed it was generated from.
    pub seed: u64,
    /// The question asked.
    pub question: String,
    /// The right answer.
    pub expected: Expected,
    /// Where the needle is, in percent of the context (`sniah`).
    pub depth_percent: Option<u32>,
    /// The haystack and distractors of the run it was made for (absent: generated
    /// filler, no distractors).
    #[serde(default, skip_serializing_if = "Variant::is_default")]
    pub variant: Variant,
    /// How the baseline is asked, for a public benchmark's item (absent: `eval`'s own
    /// prompt, `oracle::baseline_prompt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framing: Option<Framing>,
}

/// Writes the context of item `index` (of `count` per suite and length) of `suite` at
/// `length` characters to `out`, from generated text, and returns the item.
pub fn generate(
    suite: Suite,
    length: u64,
    index: u32,
    count: u32,
    seed: u64,
    out: &mut dyn Write,
) -> Result<Item, EvalError> {
    generate_with(suite, length, index, count, seed, &Options::default(), out)
}

/// `count` needles with different keys and different numbers: a key drawn twice would
/// ask for the same number twice, which a set cannot score. A needle that repeats a key
/// or a number is drawn again, so items with no repeat keep the bytes they always had.
fn distinct_needles(rng: &mut Rng, count: usize) -> Vec<Needle> {
    let mut needles: Vec<Needle> = Vec::with_capacity(count);
    while needles.len() < count {
        let needle = Needle::new(rng);
        if !needles
            .iter()
            .any(|n| n.key == needle.key || n.value == needle.value)
        {
            needles.push(needle);
        }
    }
    needles
}

/// Writes the context of item `index` (of `count` per suite and length) of `suite` at
/// `length` characters to `out`, with `options` (a haystack, distractors), and returns
/// the item. Without options the bytes are those [`generate`] writes.
pub fn generate_with(
    suite: Suite,
    length: u64,
    index: u32,
    count: u32,
    seed: u64,
    options: &Options<'_>,
    out: &mut dyn Write,
) -> Result<Item, EvalError> {
    let stream = suite.stream() << 40 ^ length << 8 ^ u64::from(index);
    let mut rng = Rng::new(seed, stream);
    let mut out = Counting { out, written: 0 };
    let mut framing = None;
    let mut pose = |context: String, posed: Posed, out: &mut Counting<'_>| {
        out.line(&context).map_err(EvalError::Write)?;
        framing = Some(posed.framing);
        Ok::<_, EvalError>((posed.question, posed.expected, None))
    };
    let (question, expected, depth_percent) = match suite {
        Suite::Ruler(task) => {
            let (context, posed) =
                crate::ruler::generate(task, &mut rng, options.haystack, length)?;
            pose(context, posed, &mut out)?
        }
        Suite::Oolong(Set::TrecCoarse) => {
            let trec = options.trec.ok_or(EvalError::DataRequired {
                suite: suite.name(),
                needs: Set::TrecCoarse.needs(),
            })?;
            let (context, posed) = crate::oolong::trec_coarse(trec, &mut rng, length, index);
            pose(context, posed, &mut out)?
        }
        Suite::Oolong(Set::Released) => {
            let released = options.released.ok_or(EvalError::DataRequired {
                suite: suite.name(),
                needs: Set::Released.needs(),
            })?;
            let (context, posed) = released.item(length, index)?;
            pose(context, posed, &mut out)?
        }
        Suite::Sniah => {
            let depth = depth_of(index, count);
            let needle = Needle::new(&mut rng);
            let mut placed = vec![(depth, needle.sentence())];
            placed.extend(distractors(
                &mut rng,
                &[&needle],
                depth,
                options.distractors,
            ));
            filler_with_needles(&mut rng, options, &mut out, length, placed)
                .map_err(EvalError::Write)?;
            (
                format!(
                    "What is the special magic number for {} mentioned in the context?",
                    needle.key
                ),
                Expected::Exact(needle.value.clone()),
                Some(depth),
            )
        }
        Suite::MultiNeedle => {
            let needles = distinct_needles(&mut rng, 4);
            let mut placed: Vec<(u32, String)> = needles
                .iter()
                .enumerate()
                .map(|(j, needle)| ((10 + 25 * j as u32 + 7 * index) % 90 + 5, needle.sentence()))
                .collect();
            let first = placed.iter().map(|(depth, _)| *depth).min().unwrap_or(50);
            let asked: Vec<&Needle> = needles.iter().collect();
            placed.extend(distractors(&mut rng, &asked, first, options.distractors));
            filler_with_needles(&mut rng, options, &mut out, length, placed)
                .map_err(EvalError::Write)?;
            let keys: Vec<&str> = needles.iter().map(|n| n.key.as_str()).collect();
            (
                format!(
                    "What are the special magic numbers for {}, {}, {} and {} mentioned in the context? Answer with the four numbers separated by commas.",
                    keys[0], keys[1], keys[2], keys[3]
                ),
                Expected::Set(needles.iter().map(|n| n.value.clone()).collect()),
                None,
            )
        }
        Suite::Aggregate => {
            let (question, expected) = records(&mut rng, &mut out, length, index, options.form)
                .map_err(EvalError::Write)?;
            (question, expected, None)
        }
        Suite::Pairs => {
            let (question, expected) = people(&mut rng, &mut out, length, index, options.form)
                .map_err(EvalError::Write)?;
            (question, expected, None)
        }
        Suite::WordCount => {
            let haystack = options
                .haystack
                .ok_or(EvalError::HaystackRequired(Suite::WordCount.name()))?;
            let (question, expected) = word_count(&mut rng, haystack, &mut out, length, index)
                .map_err(EvalError::Write)?;
            (question, expected, None)
        }
    };
    out.flush().map_err(EvalError::Write)?;
    Ok(Item {
        suite,
        length,
        index,
        seed,
        question,
        expected,
        depth_percent,
        variant: suite.variant(options),
        framing,
    })
}

/// The needle depth of item `index` of `count`: 10 % to 90 %, evenly spread.
fn depth_of(index: u32, count: u32) -> u32 {
    if count <= 1 {
        50
    } else {
        10 + 80 * index.min(count - 1) / (count - 1)
    }
}

const LABELS: [&str; 8] = [
    "billing", "shipping", "returns", "fraud", "support", "loyalty", "warranty", "payments",
];
/// Relative weights of the labels (a shuffled copy per item), so one label is clearly
/// the most frequent.
const LABEL_WEIGHTS: [u64; 8] = [30, 20, 12, 10, 8, 8, 6, 6];

/// Labelled order records up to `length`, written in `form`; the question depends on
/// `index` (its kind) and on `form` (its wording).
fn records(
    rng: &mut Rng,
    out: &mut Counting<'_>,
    length: u64,
    index: u32,
    form: Form,
) -> io::Result<(String, Expected)> {
    let mut labels = LABELS;
    for i in (1..labels.len()).rev() {
        labels.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let total_weight: u64 = LABEL_WEIGHTS.iter().sum();
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    let mut sums: BTreeMap<&str, u64> = BTreeMap::new();
    let mut id = 0_u64;
    let mut line = String::new();
    if form == Form::Csv {
        out.line("date,time,order,label,amount\n")?;
    }
    let mut record = |rng: &mut Rng, label: &'static str| {
        id += 1;
        let amount = 1 + rng.below(999);
        let (day, hour, minute) = (1 + rng.below(28), rng.below(24), rng.below(60));
        let plain = format!(
            "2026-03-{day:02} {hour:02}:{minute:02} order={id:06} label={label} amount={amount}\n"
        );
        line.clear();
        line.push_str(&match form {
            Form::Default | Form::Reworded => plain.clone(),
            Form::Json => format!(
                "{{\"date\": \"2026-03-{day:02}\", \"time\": \"{hour:02}:{minute:02}\", \"order\": \"{id:06}\", \"label\": \"{label}\", \"amount\": {amount}}}\n"
            ),
            Form::Csv => {
                format!("2026-03-{day:02},{hour:02}:{minute:02},{id:06},{label},{amount}\n")
            }
        });
        (line.clone(), label, amount, plain.len() as u64)
    };
    // Records are counted by the default form's size, so every form holds the same
    // draws (and asks the same question); a JSON or CSV context is longer.
    let mut sized = 0_u64;
    loop {
        let mut pick = rng.below(total_weight);
        let mut chosen = labels[0];
        for (label, weight) in labels.iter().zip(LABEL_WEIGHTS) {
            if pick < weight {
                chosen = label;
                break;
            }
            pick -= weight;
        }
        let (text, label, amount, plain) = record(rng, chosen);
        if sized + plain > length {
            break;
        }
        sized += plain;
        out.line(&text)?;
        *counts.entry(label).or_default() += 1;
        *sums.entry(label).or_default() += amount;
    }
    // The most frequent label must be unique: settle a tie with one more record.
    let top = counts.values().copied().max().unwrap_or(0);
    let tied: Vec<&str> = counts
        .iter()
        .filter(|(_, n)| **n == top)
        .map(|(label, _)| *label)
        .collect();
    if tied.len() > 1 {
        let (text, label, amount, _) = record(rng, tied[0]);
        out.line(&text)?;
        *counts.entry(label).or_default() += 1;
        *sums.entry(label).or_default() += amount;
    }
    let asked = *rng.pick(&labels);
    let wording = (index / 3 % 3) as usize;
    let reworded = form == Form::Reworded;
    Ok(match index % 3 {
        0 => (
            if reworded {
                [
                    format!("Count the orders whose label is {asked}. Reply with just the count."),
                    format!("In this log, how many orders were filed under {asked}?"),
                    format!("How often does the {asked} label occur? Give the number only."),
                ][wording]
                    .clone()
            } else {
                format!("How many records in the context have label={asked}? Answer with a number.")
            },
            Expected::Number(counts.get(asked).copied().unwrap_or(0) as f64),
        ),
        1 => (
            if reworded {
                [
                    "Which category has the most orders in this log? Just the category name.",
                    "What is the most common label among these orders?",
                    "Across all orders, which label shows up most often?",
                ][wording]
                    .to_owned()
            } else {
                "Which label appears in the most records of the context? Answer with the label only.".to_owned()
            },
            {
                let top = counts
                    .iter()
                    .max_by_key(|(_, n)| **n)
                    .map(|(label, _)| (*label).to_owned())
                    .unwrap_or_default();
                Expected::Choice {
                    others: labels
                        .iter()
                        .filter(|label| **label != top)
                        .map(|label| (*label).to_owned())
                        .collect(),
                    answer: top,
                }
            },
        ),
        _ => (
            if reworded {
                [
                    format!("Add up the amounts of all {asked} orders. What is the total?"),
                    format!("What is the total amount across the orders labelled {asked}?"),
                    format!("How much do the {asked} orders come to in total?"),
                ][wording]
                    .clone()
            } else {
                format!("What is the sum of the amount fields of the records with label={asked}? Answer with a number.")
            },
            Expected::Number(sums.get(asked).copied().unwrap_or(0) as f64),
        ),
    })
}

const CITIES: [&str; 12] = [
    "Lisbon", "Oslo", "Quito", "Hanoi", "Accra", "Perth", "Tbilisi", "Lima", "Tunis", "Riga",
    "Osaka", "Denver",
];

/// People records up to `length`, written in `form`: how many pairs share a city and
/// were both born after 2000 (worded by `form` and `index`).
fn people(
    rng: &mut Rng,
    out: &mut Counting<'_>,
    length: u64,
    index: u32,
    form: Form,
) -> io::Result<(String, Expected)> {
    let mut young: BTreeMap<&str, u64> = BTreeMap::new();
    let mut id = 0_u64;
    if form == Form::Csv {
        out.line("person,city,year\n")?;
    }
    // Counted by the default form's size, as `records` counts.
    let mut sized = 0_u64;
    loop {
        id += 1;
        let city = *rng.pick(&CITIES);
        let year = 1950 + rng.below(76);
        let plain = format!("person {id:06}: city={city} year={year}\n");
        let line = match form {
            Form::Default | Form::Reworded => plain.clone(),
            Form::Json => {
                format!("{{\"person\": \"{id:06}\", \"city\": \"{city}\", \"year\": {year}}}\n")
            }
            Form::Csv => format!("{id:06},{city},{year}\n"),
        };
        if sized + plain.len() as u64 > length {
            break;
        }
        sized += plain.len() as u64;
        out.line(&line)?;
        if year > 2000 {
            *young.entry(city).or_default() += 1;
        }
    }
    let pairs: u64 = young.values().map(|n| n * n.saturating_sub(1) / 2).sum();
    let question = if form == Form::Reworded {
        [
            "Count the pairs of people who share a city and were both born after 2000.",
            "How many two-person pairs live in the same city, with both people born after the year 2000?",
            "Among the people born after 2000, how many pairs have the same home city?",
        ][(index % 3) as usize]
    } else {
        "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number."
    };
    Ok((question.to_owned(), Expected::Number(pairs as f64)))
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::haystack::Haystack;

    fn make(suite: Suite, length: u64, index: u32, seed: u64) -> (Item, String) {
        let mut text = Vec::new();
        let item = generate(suite, length, index, 3, seed, &mut text).unwrap();
        (item, String::from_utf8(text).unwrap())
    }

    #[test]
    fn lengths_read_with_binary_suffixes() {
        assert_eq!(parse_length("8k").unwrap(), 8192);
        assert_eq!(parse_length("1M").unwrap(), 1 << 20);
        assert_eq!(parse_length("64m").unwrap(), 64 << 20);
        assert_eq!(parse_length("5000").unwrap(), 5000);
        assert!(parse_length("10").is_err());
        assert!(parse_length("eight").is_err());
        assert_eq!(format_length(8192), "8k");
        assert_eq!(format_length(64 << 20), "64m");
    }

    /// The suites that need no haystack.
    fn generated() -> impl Iterator<Item = Suite> {
        Suite::ALL.into_iter().filter(|s| !s.needs_haystack())
    }

    #[test]
    fn the_same_seed_gives_the_same_item_and_another_seed_another() {
        for suite in generated() {
            let (a, text_a) = make(suite, 8192, 1, 7);
            let (b, text_b) = make(suite, 8192, 1, 7);
            assert_eq!(a, b);
            assert_eq!(text_a, text_b);
            let (_, text_c) = make(suite, 8192, 1, 8);
            assert_ne!(text_a, text_c, "{suite}");
        }
    }

    #[test]
    fn contexts_have_about_the_length_asked_and_are_ascii() {
        for suite in generated() {
            for length in [1024, 8192, 100_000] {
                let (_, text) = make(suite, length, 0, 1);
                let len = text.len() as u64;
                assert!(text.is_ascii());
                assert!(
                    len <= length + 100 && len + 200 >= length,
                    "{suite} {length}: {len}"
                );
            }
        }
    }

    #[test]
    fn each_needle_is_where_it_was_put_and_only_there() {
        for index in 0..3 {
            let (item, text) = make(Suite::Sniah, 100_000, index, 3);
            let Expected::Exact(value) = &item.expected else {
                panic!("{item:?}")
            };
            let at = text.find("The special magic number").unwrap();
            assert_eq!(text.matches("special magic number").count(), 1);
            assert!(text[at..].starts_with("The special magic number for"));
            assert!(text[at..].contains(value.as_str()));
            let depth = item.depth_percent.unwrap();
            assert_eq!(depth, [10, 50, 90][index as usize]);
            let found = at as f64 / text.len() as f64 * 100.0;
            assert!((found - f64::from(depth)).abs() < 2.0, "{found} vs {depth}");
        }
    }

    /// The answers are recomputed here from the text, the way a reader would.
    #[test]
    fn answers_are_right_for_the_text() {
        let (item, text) = make(Suite::MultiNeedle, 50_000, 2, 5);
        let Expected::Set(values) = &item.expected else {
            panic!()
        };
        assert_eq!(values.len(), 4);
        for value in values {
            assert!(text.contains(&format!(" is {value}.")), "{value}");
        }
        for index in 0..3 {
            let (item, text) = make(Suite::Aggregate, 50_000, index, 9);
            let label_of = |line: &str| {
                line.split("label=")
                    .nth(1)
                    .and_then(|r| r.split(' ').next())
                    .map(str::to_owned)
            };
            let amount_of = |line: &str| {
                line.rsplit("amount=")
                    .next()
                    .and_then(|a| a.trim().parse::<f64>().ok())
            };
            match (&item.expected, index) {
                (Expected::Number(n), 0) => {
                    let label = item
                        .question
                        .split("label=")
                        .nth(1)
                        .unwrap()
                        .split('?')
                        .next()
                        .unwrap();
                    let count = text
                        .lines()
                        .filter(|l| label_of(l).as_deref() == Some(label))
                        .count();
                    assert_eq!(*n, count as f64);
                }
                (
                    Expected::Choice {
                        answer: top,
                        others,
                    },
                    1,
                ) => {
                    assert_eq!(others.len(), 7, "the seven other labels");
                    let mut counts = BTreeMap::new();
                    for line in text.lines() {
                        *counts.entry(label_of(line).unwrap()).or_insert(0) += 1;
                    }
                    let best = counts.values().max().unwrap();
                    assert_eq!(counts.values().filter(|n| *n == best).count(), 1, "a tie");
                    assert_eq!(counts[top], *best);
                }
                (Expected::Number(n), 2) => {
                    let label = item
                        .question
                        .split("label=")
                        .nth(1)
                        .unwrap()
                        .split('?')
                        .next()
                        .unwrap();
                    let sum: f64 = text
                        .lines()
                        .filter(|l| label_of(l).as_deref() == Some(label))
                        .filter_map(amount_of)
                        .sum();
                    assert_eq!(*n, sum);
                }
                other => panic!("{other:?}"),
            }
        }
        let (item, text) = make(Suite::Pairs, 20_000, 0, 4);
        let mut young: BTreeMap<&str, u64> = BTreeMap::new();
        for line in text.lines() {
            let city = line
                .split("city=")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap();
            let year: u64 = line.rsplit("year=").next().unwrap().parse().unwrap();
            if year > 2000 {
                *young.entry(city).or_default() += 1;
            }
        }
        let pairs: u64 = young.values().map(|n| n * (n - 1) / 2).sum();
        assert_eq!(item.expected, Expected::Number(pairs as f64));
    }

    /// Pinned before haystacks and distractors came: without them, every suite's bytes
    /// are what they were (SHA-256 of the context; changing these changes benchmarks).
    #[test]
    fn without_a_haystack_the_contexts_are_unchanged() {
        use sha2::{Digest, Sha256};
        let pinned = [
            (
                Suite::Sniah,
                8192,
                1,
                7,
                "37ccbfde7b9d6327dc8b2505717be6bbd2583f2fee5dd1fc1b420b7a3dc58b1e",
            ),
            (
                Suite::Sniah,
                100_000,
                2,
                3,
                "2d672f3d3704158c3d9ad915747b7a649c4d167ba8ce51bfc58161c921aa8cdb",
            ),
            (
                Suite::MultiNeedle,
                8192,
                1,
                7,
                "84bb05acc658705acf20ba18b9daa85792a6027fcb1180f9e7d1dbbda300b841",
            ),
            (
                Suite::MultiNeedle,
                100_000,
                2,
                3,
                "9fd5d28d4a6fc78053941e311f9266a8d06c7d8101f65ec3c30c31696d9eb63e",
            ),
            (
                Suite::Aggregate,
                8192,
                1,
                7,
                "fdf34634ed1e18028bdb8977e66a62a35dc969d5efdf7b12f96e513c6ef0c1cf",
            ),
            (
                Suite::Aggregate,
                100_000,
                2,
                3,
                "bf2956e0e420c0f6912ac93df30d8195426a9e3a5e722dbe1839d75ead393f39",
            ),
            (
                Suite::Pairs,
                8192,
                1,
                7,
                "f548c658315b46824eef2f5218491142b676f639e7a477aef733a218fbcd8c5e",
            ),
            (
                Suite::Pairs,
                100_000,
                2,
                3,
                "1f51432b177ae5a4286618a12c77db082d09b787217b71f3f97d414fe37bfbb7",
            ),
        ];
        for (suite, length, index, seed, want) in pinned {
            let (item, text) = make(suite, length, index, seed);
            let got: String = Sha256::digest(text.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(got, want, "{suite} {length} {index} {seed}");
            assert!(item.variant.is_default());
        }
    }

    /// The small committed corpus the tests use.
    pub(crate) fn fixture() -> Haystack {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/haystack");
        Haystack::load(&dir, 1 << 30).unwrap()
    }

    pub(crate) fn make_with(
        suite: Suite,
        length: u64,
        index: u32,
        seed: u64,
        haystack: &Haystack,
        distractors: u32,
    ) -> (Item, String) {
        let options = Options {
            haystack: Some(haystack),
            distractors,
            ..Options::default()
        };
        let mut text = Vec::new();
        let item = generate_with(suite, length, index, 3, seed, &options, &mut text).unwrap();
        (item, String::from_utf8(text).unwrap())
    }

    /// Every `The special magic number for KEY is N.` of `text`, as (key, number).
    pub(crate) fn needles_in(text: &str) -> Vec<(String, String)> {
        let re = regex::Regex::new(r"The special magic number for (\S+) is (\d+)\.").unwrap();
        re.captures_iter(text)
            .map(|c| (c[1].to_owned(), c[2].to_owned()))
            .collect()
    }

    /// The keys a question asks for.
    fn asked_keys(item: &Item) -> Vec<String> {
        let re = regex::Regex::new(r"[a-z]+-[a-z]+-\d\d").unwrap();
        re.find_iter(&item.question)
            .map(|m| m.as_str().to_owned())
            .collect()
    }

    #[test]
    fn haystack_items_come_from_the_seed_and_the_text_and_record_the_digest() {
        let hay = fixture();
        for suite in [Suite::Sniah, Suite::MultiNeedle, Suite::WordCount] {
            let (a, text_a) = make_with(suite, 20_000, 1, 7, &hay, 2);
            let (b, text_b) = make_with(suite, 20_000, 1, 7, &hay, 2);
            assert_eq!((&a, &text_a), (&b, &text_b), "{suite}");
            let (_, text_c) = make_with(suite, 20_000, 1, 8, &hay, 2);
            assert_ne!(text_a, text_c, "{suite}: another seed");
            assert_eq!(a.variant.haystack.as_ref(), Some(hay.id()));
            assert_eq!(a.variant.distractors, 2);
            assert!(text_a.is_ascii());
            let len = text_a.len() as u64;
            assert!(
                len <= 20_000 + 200 && len + crate::haystack::MAX_SEGMENT as u64 >= 20_000,
                "{suite}: {len}"
            );
            // The prose is the haystack's: each of its lines is one of the haystack's
            // (or a needle), cut at a sentence or a line.
            let needles = needles_in(&text_a).len();
            let prose_lines = text_a
                .lines()
                .filter(|l| !l.starts_with("The special magic number"))
                .filter(|l| !l.is_empty())
                .count();
            assert!(prose_lines > 20, "{suite}");
            assert!(needles <= 6, "{suite}");
            let json = serde_json::to_string(&a).unwrap();
            assert!(json.contains(&hay.id().digest), "{json}");
            assert_eq!(serde_json::from_str::<Item>(&json).unwrap(), a);
        }
        // Another text (one file dropped) gives other contexts.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/haystack");
        let one = Haystack::load(&dir.join("02-orchard.txt"), 1 << 30).unwrap();
        assert_ne!(one.id().digest, hay.id().digest);
        let (_, text) = make_with(Suite::Sniah, 20_000, 1, 7, &one, 2);
        assert_ne!(text, make_with(Suite::Sniah, 20_000, 1, 7, &hay, 2).1);
    }

    #[test]
    fn in_prose_each_asked_needle_is_there_once_among_distractors_with_other_keys() {
        let hay = fixture();
        for (suite, distractors) in [
            (Suite::Sniah, 0),
            (Suite::Sniah, 3),
            (Suite::MultiNeedle, 6),
        ] {
            for index in 0..3 {
                let (item, text) = make_with(suite, 30_000, index, 5, &hay, distractors);
                let found = needles_in(&text);
                let keys = asked_keys(&item);
                assert_eq!(found.len(), keys.len() + distractors as usize, "{suite}");
                let values: Vec<String> = match &item.expected {
                    Expected::Exact(v) => vec![v.clone()],
                    Expected::Set(vs) => vs.clone(),
                    _ => panic!("{item:?}"),
                };
                for (key, value) in keys.iter().zip(&values) {
                    let hits: Vec<_> = found.iter().filter(|(k, _)| k == key).collect();
                    assert_eq!(hits.len(), 1, "{key} once");
                    assert_eq!(&hits[0].1, value);
                }
                let wrong: Vec<_> = found.iter().filter(|(k, _)| !keys.contains(k)).collect();
                assert_eq!(wrong.len(), distractors as usize);
                let distinct: BTreeSet<&String> = wrong.iter().map(|(k, _)| k).collect();
                assert_eq!(distinct.len(), wrong.len(), "distractor keys differ");
                for (key, value) in &wrong {
                    assert!(!values.contains(value), "a distractor has an asked number");
                    // One word or one digit away from some asked key.
                    let near = keys.iter().any(|asked| {
                        let a: Vec<&str> = asked.split('-').collect();
                        let b: Vec<&str> = key.split('-').collect();
                        let words = a.iter().zip(&b).filter(|(x, y)| x != y).count();
                        let digits = a[2]
                            .bytes()
                            .zip(b[2].bytes())
                            .filter(|(x, y)| x != y)
                            .count();
                        words == 1 && (a[2] == b[2] || digits == 1)
                    });
                    assert!(near, "{key} is not near {keys:?}");
                }
                if distractors > 0 {
                    // The first needle of the text is a distractor.
                    assert!(!keys.contains(&found[0].0), "{found:?}");
                }
            }
        }
    }

    /// The word counts, recomputed here with a tokeniser of their own.
    pub(crate) fn recount(text: &str, question: &str) -> Expected {
        let words_of = |line: &str| -> Vec<String> {
            line.split(|c: char| !c.is_ascii_alphabetic())
                .filter(|w| !w.is_empty())
                .map(str::to_ascii_lowercase)
                .collect()
        };
        let quoted: Vec<String> = question
            .split(" Words are")
            .next()
            .unwrap_or_default()
            .split('"')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        let count = |w: &str| words_of(text).iter().filter(|x| *x == w).count();
        if question.starts_with("How many times") {
            Expected::Number(count(&quoted[0]) as f64)
        } else if question.starts_with("How many lines") {
            let lines = text
                .split('\n')
                .filter(|l| words_of(l).contains(&quoted[0]))
                .count();
            Expected::Number(lines as f64)
        } else {
            assert_eq!(quoted.len(), 5, "{question}");
            let best = quoted.iter().map(|w| count(w)).max().unwrap();
            let top: Vec<&String> = quoted.iter().filter(|w| count(w) == best).collect();
            assert_eq!(top.len(), 1, "a tie: {question}");
            Expected::Choice {
                answer: top[0].clone(),
                others: quoted.iter().filter(|w| *w != top[0]).cloned().collect(),
            }
        }
    }

    #[test]
    fn word_counts_are_right_over_the_whole_text_and_need_a_haystack() {
        let hay = fixture();
        for length in [4096, 50_000] {
            for index in 0..3 {
                let (item, text) = make_with(Suite::WordCount, length, index, 9, &hay, 0);
                assert!(item.question.contains(WORD_RULE), "{}", item.question);
                assert_eq!(
                    item.expected,
                    recount(&text, &item.question),
                    "{}",
                    item.question
                );
                if let Expected::Number(n) = item.expected {
                    assert!(n >= 2.0, "a useful count: {}", item.question);
                }
                assert_eq!(needles_in(&text).len(), 0);
            }
        }
        let error = generate(Suite::WordCount, 4096, 0, 1, 1, &mut Vec::new()).unwrap_err();
        assert!(error.to_string().contains("--haystack"), "{error}");
    }

    #[test]
    fn the_tally_counts_words_and_lines() {
        let mut tally = WordTally::new();
        // A word cut between two feeds is one word.
        tally.feed("Don't stop; do");
        tally.feed("n't\nSTOP stop\n\nstop");
        let counts = tally.finish();
        assert_eq!(counts["don"], (2, 1));
        assert_eq!(counts["t"], (2, 1));
        assert_eq!(counts["stop"], (4, 3));
    }

    /// `--variant reworded` words the question another way over the very same bytes;
    /// `json` and `csv` write the same draws as other lines, under the same question.
    #[test]
    fn forms_change_the_wording_or_the_format_and_nothing_else() {
        for suite in [Suite::Aggregate, Suite::Pairs] {
            for index in 0..3 {
                let make_form = |form: Form| {
                    let mut text = Vec::new();
                    let options = Options {
                        form,
                        ..Options::default()
                    };
                    let item =
                        generate_with(suite, 20_000, index, 3, 2, &options, &mut text).unwrap();
                    (item, String::from_utf8(text).unwrap())
                };
                let (plain, plain_text) = make_form(Form::Default);
                let (reworded, reworded_text) = make_form(Form::Reworded);
                assert_eq!(plain_text, reworded_text);
                assert_eq!(plain.expected, reworded.expected);
                assert_ne!(plain.question, reworded.question);
                assert_eq!(reworded.variant.form, Form::Reworded);
                let (json, json_text) = make_form(Form::Json);
                assert!(json_text
                    .lines()
                    .all(|line| serde_json::from_str::<serde_json::Value>(line).is_ok()));
                assert_eq!(json.question, plain.question);
                let (csv, csv_text) = make_form(Form::Csv);
                let header = csv_text.lines().next().unwrap();
                assert!(header == "date,time,order,label,amount" || header == "person,city,year");
                assert_eq!(csv.question, plain.question);
                assert!(!json.variant.same_items_as(&csv.variant));
            }
        }
    }

    #[test]
    fn suites_have_names() {
        for suite in Suite::ALL {
            assert_eq!(suite.name().parse::<Suite>().unwrap(), suite);
        }
        assert!("niah".parse::<Suite>().is_err());
    }
}

//! The four suites: what each item's context, question and answer are, generated from
//! a seed.
//!
//! A context is plain ASCII text (so characters and bytes count the same) of about the
//! requested length, written to any [`Write`] as it is generated, so a 64 M-character
//! context never sits in memory. Items of one suite and length differ by index: the
//! needle's depth for `sniah` (10 % to 90 %), the question for `aggregate`.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::EvalError;
use crate::rng::Rng;
use crate::score::Expected;

/// A benchmark suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
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
}

impl Suite {
    /// Every suite, in table order.
    pub const ALL: [Suite; 4] = [Self::Sniah, Self::MultiNeedle, Self::Aggregate, Self::Pairs];

    /// The suite's name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sniah => "sniah",
            Self::MultiNeedle => "multi-needle",
            Self::Aggregate => "aggregate",
            Self::Pairs => "pairs",
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
        Self::ALL
            .into_iter()
            .find(|suite| {
                suite.name() == wanted || (wanted == "multi" && *suite == Self::MultiNeedle)
            })
            .ok_or_else(|| EvalError::UnknownSuite(text.to_owned()))
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
}

/// Writes the context of item `index` (of `count` per suite and length) of `suite` at
/// `length` characters to `out`, and returns the item.
pub fn generate(
    suite: Suite,
    length: u64,
    index: u32,
    count: u32,
    seed: u64,
    out: &mut dyn Write,
) -> io::Result<Item> {
    let stream = (suite as u64) << 40 ^ length << 8 ^ u64::from(index);
    let mut rng = Rng::new(seed, stream);
    let mut out = Counting { out, written: 0 };
    let (question, expected, depth_percent) = match suite {
        Suite::Sniah => {
            let depth = depth_of(index, count);
            let needle = Needle::new(&mut rng);
            filler_with_needles(&mut rng, &mut out, length, &[(depth, &needle)])?;
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
            let needles: Vec<Needle> = (0..4).map(|_| Needle::new(&mut rng)).collect();
            let placed: Vec<(u32, &Needle)> = needles
                .iter()
                .enumerate()
                .map(|(j, needle)| ((10 + 25 * j as u32 + 7 * index) % 90 + 5, needle))
                .collect();
            filler_with_needles(&mut rng, &mut out, length, &placed)?;
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
            let (question, expected) = records(&mut rng, &mut out, length, index)?;
            (question, expected, None)
        }
        Suite::Pairs => {
            let (question, expected) = people(&mut rng, &mut out, length)?;
            (question, expected, None)
        }
    };
    out.flush()?;
    Ok(Item {
        suite,
        length,
        index,
        seed,
        question,
        expected,
        depth_percent,
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

/// A writer that counts what went through it.
struct Counting<'a> {
    out: &'a mut dyn Write,
    written: u64,
}

impl Counting<'_> {
    fn line(&mut self, text: &str) -> io::Result<()> {
        self.out.write_all(text.as_bytes())?;
        self.written += text.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

const ADJECTIVES: [&str; 16] = [
    "amber", "brisk", "cobalt", "dusty", "eager", "frosty", "gentle", "hollow", "ivory", "jolly",
    "keen", "lunar", "mellow", "nimble", "olive", "proud",
];
const ANIMALS: [&str; 16] = [
    "falcon", "badger", "heron", "lynx", "otter", "raven", "walrus", "gecko", "bison", "marten",
    "ibis", "tapir", "viper", "yak", "quokka", "stoat",
];
const WORDS: [&str; 48] = [
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "river",
    "market",
    "quietly",
    "ledger",
    "winter",
    "station",
    "people",
    "often",
    "built",
    "small",
    "across",
    "harbour",
    "letters",
    "bright",
    "under",
    "garden",
    "slowly",
    "old",
    "machines",
    "answered",
    "between",
    "stone",
    "every",
    "morning",
    "carried",
    "maps",
    "without",
    "noise",
    "town",
    "kept",
    "careful",
    "records",
    "while",
    "travellers",
    "waited",
    "near",
    "the",
    "bridge",
    "for",
    "news",
    "from",
    "hills",
];

/// A needle: a key no filler word can form, and a seven-digit number.
struct Needle {
    key: String,
    value: String,
}

impl Needle {
    fn new(rng: &mut Rng) -> Self {
        Self {
            key: format!(
                "{}-{}-{:02}",
                rng.pick(&ADJECTIVES),
                rng.pick(&ANIMALS),
                rng.below(100)
            ),
            value: format!("{}", 1_000_000 + rng.below(9_000_000)),
        }
    }

    fn sentence(&self) -> String {
        format!(
            "The special magic number for {} is {}.\n",
            self.key, self.value
        )
    }
}

/// Filler sentences up to `length` characters, each needle placed at its depth (in
/// percent of the length).
fn filler_with_needles(
    rng: &mut Rng,
    out: &mut Counting<'_>,
    length: u64,
    needles: &[(u32, &Needle)],
) -> io::Result<()> {
    let mut pending: Vec<(u64, String)> = needles
        .iter()
        .map(|(depth, needle)| (length * u64::from(*depth) / 100, needle.sentence()))
        .collect();
    pending.sort();
    let mut pending: std::collections::VecDeque<(u64, String)> = pending.into();
    let mut sentence = String::new();
    loop {
        while pending.front().is_some_and(|(at, _)| *at <= out.written) {
            if let Some((_, needle)) = pending.pop_front() {
                out.line(&needle)?;
            }
        }
        sentence.clear();
        let words = 8 + rng.below(9);
        for w in 0..words {
            let word = rng.pick(&WORDS);
            if w == 0 {
                let mut chars = word.chars();
                if let Some(first) = chars.next() {
                    sentence.push(first.to_ascii_uppercase());
                    sentence.push_str(chars.as_str());
                }
            } else {
                sentence.push(' ');
                sentence.push_str(word);
            }
        }
        sentence.push_str(if rng.below(5) == 0 { ".\n" } else { ". " });
        // Room is kept for the needles still to come.
        let left: u64 = pending.iter().map(|(_, s)| s.len() as u64).sum();
        if out.written + sentence.len() as u64 + left > length {
            break;
        }
        out.line(&sentence)?;
    }
    for (_, needle) in pending {
        out.line(&needle)?;
    }
    Ok(())
}

const LABELS: [&str; 8] = [
    "billing", "shipping", "returns", "fraud", "support", "loyalty", "warranty", "payments",
];
/// Relative weights of the labels (a shuffled copy per item), so one label is clearly
/// the most frequent.
const LABEL_WEIGHTS: [u64; 8] = [30, 20, 12, 10, 8, 8, 6, 6];

/// Labelled order records up to `length`; the question depends on `index`.
fn records(
    rng: &mut Rng,
    out: &mut Counting<'_>,
    length: u64,
    index: u32,
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
    let mut record = |rng: &mut Rng, label: &'static str| {
        id += 1;
        let amount = 1 + rng.below(999);
        line.clear();
        line.push_str(&format!(
            "2026-03-{:02} {:02}:{:02} order={:06} label={} amount={}\n",
            1 + rng.below(28),
            rng.below(24),
            rng.below(60),
            id,
            label,
            amount
        ));
        (line.clone(), label, amount)
    };
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
        let (text, label, amount) = record(rng, chosen);
        if out.written + text.len() as u64 > length {
            break;
        }
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
        let (text, label, amount) = record(rng, tied[0]);
        out.line(&text)?;
        *counts.entry(label).or_default() += 1;
        *sums.entry(label).or_default() += amount;
    }
    let asked = *rng.pick(&labels);
    Ok(match index % 3 {
        0 => (
            format!("How many records in the context have label={asked}? Answer with a number."),
            Expected::Number(counts.get(asked).copied().unwrap_or(0) as f64),
        ),
        1 => (
            "Which label appears in the most records of the context? Answer with the label only.".to_owned(),
            Expected::Exact(
                counts
                    .iter()
                    .max_by_key(|(_, n)| **n)
                    .map(|(label, _)| (*label).to_owned())
                    .unwrap_or_default(),
            ),
        ),
        _ => (
            format!("What is the sum of the amount fields of the records with label={asked}? Answer with a number."),
            Expected::Number(sums.get(asked).copied().unwrap_or(0) as f64),
        ),
    })
}

const CITIES: [&str; 12] = [
    "Lisbon", "Oslo", "Quito", "Hanoi", "Accra", "Perth", "Tbilisi", "Lima", "Tunis", "Riga",
    "Osaka", "Denver",
];

/// People records up to `length`: how many pairs share a city and were both born
/// after 2000.
fn people(rng: &mut Rng, out: &mut Counting<'_>, length: u64) -> io::Result<(String, Expected)> {
    let mut young: BTreeMap<&str, u64> = BTreeMap::new();
    let mut id = 0_u64;
    loop {
        id += 1;
        let city = *rng.pick(&CITIES);
        let year = 1950 + rng.below(76);
        let line = format!("person {id:06}: city={city} year={year}\n");
        if out.written + line.len() as u64 > length {
            break;
        }
        out.line(&line)?;
        if year > 2000 {
            *young.entry(city).or_default() += 1;
        }
    }
    let pairs: u64 = young.values().map(|n| n * n.saturating_sub(1) / 2).sum();
    Ok((
        "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.".to_owned(),
        Expected::Number(pairs as f64),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn the_same_seed_gives_the_same_item_and_another_seed_another() {
        for suite in Suite::ALL {
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
        for suite in Suite::ALL {
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
                (Expected::Exact(top), 1) => {
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

    #[test]
    fn suites_have_names() {
        for suite in Suite::ALL {
            assert_eq!(suite.name().parse::<Suite>().unwrap(), suite);
        }
        assert!("niah".parse::<Suite>().is_err());
    }
}

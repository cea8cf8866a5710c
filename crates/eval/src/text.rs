//! The text of the contexts: a writer that counts what it wrote, the filler (generated
//! sentences or a haystack's, cycled), the needles and their distractors, and the
//! `word-count` suite's tally and questions.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Write};

use crate::haystack::Haystack;
use crate::rng::Rng;
use crate::score::Expected;
use crate::variant::Options;

/// A writer that counts what went through it.
pub(crate) struct Counting<'a> {
    pub(crate) out: &'a mut dyn Write,
    pub(crate) written: u64,
}

impl Counting<'_> {
    pub(crate) fn line(&mut self, text: &str) -> io::Result<()> {
        self.out.write_all(text.as_bytes())?;
        self.written += text.len() as u64;
        Ok(())
    }

    pub(crate) fn flush(&mut self) -> io::Result<()> {
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
pub(crate) struct Needle {
    pub(crate) key: String,
    pub(crate) value: String,
}

impl Needle {
    pub(crate) fn new(rng: &mut Rng) -> Self {
        Self {
            key: format!(
                "{}-{}-{:02}",
                rng.pick(&ADJECTIVES),
                rng.pick(&ANIMALS),
                rng.below(100)
            ),
            value: Self::value(rng),
        }
    }

    /// A seven-digit number.
    fn value(rng: &mut Rng) -> String {
        format!("{}", 1_000_000 + rng.below(9_000_000))
    }

    /// A key one word or one digit away from this one (`amber-falcon-07` gives e.g.
    /// `amber-heron-07`, `keen-falcon-07` or `amber-falcon-04`).
    fn neighbour(&self, rng: &mut Rng) -> String {
        let mut parts: Vec<String> = self.key.split('-').map(str::to_owned).collect();
        if parts.len() != 3 {
            return format!("{}-{}", self.key, rng.below(10));
        }
        match rng.below(3) {
            0 => parts[0] = (*rng.pick(&ADJECTIVES)).to_owned(),
            1 => parts[1] = (*rng.pick(&ANIMALS)).to_owned(),
            _ => {
                let mut digits: Vec<u8> = parts[2].bytes().collect();
                if let Some(digit) = digits.get_mut(rng.below(2) as usize) {
                    *digit = b'0' + ((*digit - b'0' + 1 + rng.below(9) as u8) % 10);
                }
                parts[2] = String::from_utf8_lossy(&digits).into_owned();
            }
        }
        parts.join("-")
    }

    pub(crate) fn sentence(&self) -> String {
        format!(
            "The special magic number for {} is {}.\n",
            self.key, self.value
        )
    }
}

/// Distractor needles for `asked`: `count` sentences of the needles' shape whose keys
/// differ from an asked key by one word or one digit (never equal to any asked key or
/// to one another) and whose numbers differ from the asked ones, with their depths:
/// the first at half of `first_depth` (before every asked needle, so the first
/// number-looking needle is a wrong one), the others anywhere from 1 % to 98 %.
pub(crate) fn distractors(
    rng: &mut Rng,
    asked: &[&Needle],
    first_depth: u32,
    count: u32,
) -> Vec<(u32, String)> {
    let mut keys: BTreeSet<String> = asked.iter().map(|n| n.key.clone()).collect();
    let values: BTreeSet<&str> = asked.iter().map(|n| n.value.as_str()).collect();
    let mut out = Vec::new();
    for j in 0..count {
        let Some(base) = asked.get(j as usize % asked.len().max(1)) else {
            break;
        };
        let mut found = None;
        for _ in 0..64 {
            let key = base.neighbour(rng);
            if !keys.contains(&key) {
                found = Some(key);
                break;
            }
        }
        let Some(key) = found else {
            continue;
        };
        let mut value = Needle::value(rng);
        while values.contains(value.as_str()) {
            value = Needle::value(rng);
        }
        keys.insert(key.clone());
        let depth = if j == 0 {
            first_depth / 2
        } else {
            1 + rng.below(98) as u32
        };
        out.push((depth, Needle { key, value }.sentence()));
    }
    out
}

/// Where the filler between needles comes from: generated sentences, or a haystack's
/// segments in turn from a seeded start, cycling.
enum Filler<'a> {
    Generated,
    Text { haystack: &'a Haystack, next: usize },
}

impl<'a> Filler<'a> {
    /// The filler of `options` (a haystack's start is drawn from `rng`).
    fn new(rng: &mut Rng, options: &Options<'a>) -> Self {
        match options.haystack {
            None => Self::Generated,
            Some(haystack) => Self::Text {
                haystack,
                next: rng.below(haystack.segment_count() as u64) as usize,
            },
        }
    }

    /// The next sentence (or line), in `sentence`.
    fn next(&mut self, rng: &mut Rng, sentence: &mut String) {
        sentence.clear();
        match self {
            Self::Text { haystack, next } => {
                sentence.push_str(haystack.segment(*next));
                *next = (*next + 1) % haystack.segment_count();
            }
            Self::Generated => {
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
            }
        }
    }
}

/// Filler up to `length` characters, each needle sentence placed at its depth (in
/// percent of the length), between two sentences or lines of the filler.
pub(crate) fn filler_with_needles(
    rng: &mut Rng,
    options: &Options<'_>,
    out: &mut Counting<'_>,
    length: u64,
    needles: Vec<(u32, String)>,
) -> io::Result<()> {
    let mut filler = Filler::new(rng, options);
    let mut pending: Vec<(u64, String)> = needles
        .into_iter()
        .map(|(depth, sentence)| (length * u64::from(depth) / 100, sentence))
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
        filler.next(rng, &mut sentence);
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

/// How a `word-count` question tells words apart (part of each question).
pub const WORD_RULE: &str = "Words are maximal runs of the ASCII letters A-Z and a-z, compared ignoring case (so \"Don't\" is the two words \"don\" and \"t\").";

/// Occurrences and lines of every word of a text, fed as it is written.
#[derive(Default)]
pub struct WordTally {
    ids: HashMap<String, usize>,
    words: Vec<String>,
    occurrences: Vec<u64>,
    lines: Vec<u64>,
    /// The last line (from 1) each word was counted in.
    last_line: Vec<u64>,
    line: u64,
    current: String,
}

impl WordTally {
    /// An empty tally.
    pub fn new() -> Self {
        Self {
            line: 1,
            ..Self::default()
        }
    }

    /// Counts `text`, which follows what was fed before.
    pub fn feed(&mut self, text: &str) {
        for byte in text.bytes() {
            if byte.is_ascii_alphabetic() {
                self.current.push(char::from(byte.to_ascii_lowercase()));
                continue;
            }
            self.end_word();
            if byte == b'\n' {
                self.line += 1;
            }
        }
    }

    fn end_word(&mut self) {
        if self.current.is_empty() {
            return;
        }
        let id = match self.ids.get(&self.current) {
            Some(id) => *id,
            None => {
                let id = self.words.len();
                self.ids.insert(self.current.clone(), id);
                self.words.push(self.current.clone());
                self.occurrences.push(0);
                self.lines.push(0);
                self.last_line.push(0);
                id
            }
        };
        self.occurrences[id] += 1;
        if self.last_line[id] != self.line {
            self.last_line[id] = self.line;
            self.lines[id] += 1;
        }
        self.current.clear();
    }

    /// Every word (lower case) with its occurrences and the lines holding it, in
    /// alphabetical order.
    pub fn finish(mut self) -> BTreeMap<String, (u64, u64)> {
        self.end_word();
        self.words
            .into_iter()
            .zip(self.occurrences.into_iter().zip(self.lines))
            .collect()
    }
}

/// The haystack's text from a seeded start, cycled, up to `length`; the question
/// depends on `index`: how often a word occurs, how many lines hold it, which of five
/// words is the most frequent. The word is drawn among those of four letters or more
/// that occur at least twice, the more frequent half of them when there are ten or
/// more (any word when there are fewer than five).
pub(crate) fn word_count(
    rng: &mut Rng,
    haystack: &Haystack,
    out: &mut Counting<'_>,
    length: u64,
    index: u32,
) -> io::Result<(String, Expected)> {
    let mut filler = Filler::Text {
        haystack,
        next: rng.below(haystack.segment_count() as u64) as usize,
    };
    let mut tally = WordTally::new();
    let mut segment = String::new();
    loop {
        filler.next(rng, &mut segment);
        if out.written + segment.len() as u64 > length {
            break;
        }
        out.line(&segment)?;
        tally.feed(&segment);
    }
    let counts = tally.finish();
    let mut pool: Vec<(&str, u64, u64)> = counts
        .iter()
        .filter(|(word, (n, _))| word.len() >= 4 && *n >= 2)
        .map(|(word, (n, lines))| (word.as_str(), *n, *lines))
        .collect();
    if pool.len() < 5 {
        pool = counts
            .iter()
            .map(|(word, (n, lines))| (word.as_str(), *n, *lines))
            .collect();
    } else if pool.len() >= 10 {
        // The more frequent half: counts no single window holds.
        pool.sort_by_key(|(word, n, _)| (*n, *word));
        pool.drain(..pool.len() / 2);
        pool.sort_by_key(|(word, _, _)| *word);
    }
    let count_question = |word: &str, n: u64| {
        (
            format!(
                "How many times does the word \"{word}\" occur in the context? {WORD_RULE} Answer with a number."
            ),
            Expected::Number(n as f64),
        )
    };
    let Some(&(word, n, lines)) = (!pool.is_empty()).then(|| rng.pick(&pool)) else {
        // A context without a word (a haystack of blank lines): the count is 0.
        return Ok(count_question("the", 0));
    };
    Ok(match index % 3 {
        0 => count_question(word, n),
        1 => (
            format!(
                "How many lines of the context contain the word \"{word}\" at least once? Lines are separated by newline characters. {WORD_RULE} Answer with a number."
            ),
            Expected::Number(lines as f64),
        ),
        _ => {
            // A winner with at least four words of the pool less frequent than it.
            let winners: Vec<(&str, u64)> = pool
                .iter()
                .filter(|(_, n, _)| pool.iter().filter(|(_, m, _)| m < n).count() >= 4)
                .map(|(w, n, _)| (*w, *n))
                .collect();
            if winners.is_empty() {
                return Ok(count_question(word, n));
            }
            let (winner, top) = *rng.pick(&winners);
            let mut others: Vec<&str> = pool
                .iter()
                .filter(|(_, m, _)| *m < top)
                .map(|(w, _, _)| *w)
                .collect();
            let mut five = vec![winner];
            for _ in 0..4 {
                let at = rng.below(others.len() as u64) as usize;
                five.push(others.swap_remove(at));
            }
            for i in (1..five.len()).rev() {
                five.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let quoted: Vec<String> = five.iter().map(|w| format!("\"{w}\"")).collect();
            (
                format!(
                    "Which of the words {}, {}, {}, {} and {} occurs most often in the context? {WORD_RULE} Answer with the word only.",
                    quoted[0], quoted[1], quoted[2], quoted[3], quoted[4]
                ),
                Expected::Choice {
                    answer: winner.to_owned(),
                    others: five
                        .iter()
                        .filter(|w| **w != winner)
                        .map(|w| (*w).to_owned())
                        .collect(),
                },
            )
        }
    })
}

//! RULER's needle-in-a-haystack tasks (`niah.py`): needles `One of the special magic
//! {type} for {key} is: {value}.` hidden in repeated noise sentences, in essays, or
//! among other needles; one or more keys asked; every value of an asked key is a gold
//! string.
//!
//! As `niah.py`: the needles are shuffled; in noise and needle haystacks they go
//! between lines at random places; in essays, between sentences at depths drawn from
//! RULER's forty (0 to 100 %); the essay's words are taken from its start, repeated as
//! needed, whitespace made single spaces. Unlike `niah.py`, keys are drawn distinct
//! and values distinct (a key drawn twice would make its question ambiguous), and the
//! essay is cut into sentences after `.`, `!` or `?` (a closing quote or bracket
//! between) instead of by nltk's punkt, whose data is not offline.

use std::collections::BTreeSet;

use super::template::{Parts, NIAH};
use super::words;
use crate::rng::Rng;

/// RULER's noise haystack: one line, repeated.
pub(crate) const NOISE: &str =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

/// Where the needles hide (`type_haystack`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Haystack {
    /// Repeated noise sentences, one a line.
    Noise,
    /// Essays (`--haystack`).
    Essay,
    /// Other needles, one a line.
    Needle,
}

/// What keys and values are (`type_needle_k`, `type_needle_v`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Seven-digit numbers.
    Numbers,
    /// `adjective-noun` words.
    Words,
    /// Version-4 UUIDs.
    Uuids,
}

impl Kind {
    /// RULER's name (plural), as templates and needles say it.
    fn name(self) -> &'static str {
        match self {
            Self::Numbers => "numbers",
            Self::Words => "words",
            Self::Uuids => "uuids",
        }
    }

    /// A random key or value of this kind.
    fn draw(self, rng: &mut Rng) -> String {
        match self {
            Self::Numbers => rng.between(1_000_000, 9_999_999).to_string(),
            Self::Words => words::key(rng),
            Self::Uuids => uuid4(rng),
        }
    }
}

/// A version-4 UUID of 128 random bits, as `uuid.UUID(int=…, version=4)` writes it.
fn uuid4(rng: &mut Rng) -> String {
    let high = (rng.next_u64() & !0xf000) | 0x4000;
    let low = (rng.next_u64() & !(0xc000 << 48)) | (0x8000 << 48);
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        high >> 32,
        (high >> 16) & 0xffff,
        high & 0xffff,
        low >> 48,
        low & 0xffff_ffff_ffff
    )
}

/// A needle task's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// The haystack.
    pub haystack: Haystack,
    /// What keys are.
    pub key: Kind,
    /// What values are.
    pub value: Kind,
    /// Keys (`num_needle_k`).
    pub keys: usize,
    /// Values per key (`num_needle_v`).
    pub values: usize,
    /// Keys asked (`num_needle_q`).
    pub queries: usize,
}

/// RULER's depths: 40 evenly spaced from 0 to 100 %, rounded.
fn depths() -> Vec<u64> {
    (0..40_u64).map(|i| (100 * i * 2 + 39) / 78).collect()
}

/// The needle sentence.
fn needle(kind: Kind, key: &str, value: &str) -> String {
    format!(
        "One of the special magic {} for {key} is: {value}.",
        kind.name()
    )
}

/// The context (about `length` characters), the item's parts and its gold strings;
/// `None` for an essay haystack without `essay` text.
pub(crate) fn generate(
    config: &Config,
    rng: &mut Rng,
    essay: Option<&crate::haystack::Haystack>,
    length: usize,
) -> Option<(String, Parts, Vec<String>)> {
    let key_count = config.keys.max(config.queries);
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut fresh = |rng: &mut Rng, kind: Kind| loop {
        let drawn = kind.draw(rng);
        if seen.insert(drawn.clone()) {
            return drawn;
        }
    };
    let mut keys = Vec::with_capacity(key_count);
    let mut values: Vec<Vec<String>> = Vec::with_capacity(key_count);
    let mut needles = Vec::new();
    for _ in 0..key_count {
        let key = fresh(rng, config.key);
        let mut of_key = Vec::new();
        for _ in 0..config.values {
            let value = fresh(rng, config.value);
            needles.push(needle(config.value, &key, &value));
            of_key.push(value);
        }
        keys.push(key);
        values.push(of_key);
    }
    rng.shuffle(&mut needles);
    let needle_chars: usize = needles.iter().map(|n| n.len() + 1).sum();
    let budget = length.saturating_sub(needle_chars);
    let context = match config.haystack {
        Haystack::Essay => in_essay(essay?.text(), budget, &needles, rng),
        Haystack::Noise => {
            let lines = vec![NOISE; (budget + 1) / (NOISE.len() + 1)];
            between_lines(&lines, &needles, rng)
        }
        Haystack::Needle => {
            let mut lines = Vec::new();
            let mut used = 0;
            loop {
                let key = config.key.draw(rng);
                if keys.contains(&key) {
                    continue;
                }
                let line = needle(config.value, &key, &config.value.draw(rng));
                if used + line.len() + 1 > budget + 1 {
                    break;
                }
                used += line.len() + 1;
                lines.push(line);
            }
            between_lines(&lines, &needles, rng)
        }
    };
    let asked = rng.sample(key_count, config.queries);
    let queries: Vec<&str> = asked.iter().map(|&i| keys[i].as_str()).collect();
    let refs: Vec<String> = asked.iter().flat_map(|&i| values[i].clone()).collect();
    let query = match queries.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{}, and {last}", rest.join(", ")),
        _ => queries.join(""),
    };
    let singular = config.queries * config.values == 1;
    let plural = config.value.name();
    let kind = if singular {
        plural.trim_end_matches('s')
    } else {
        plural
    };
    let parts = Parts::render(
        &NIAH,
        &[("type_needle_v", kind), ("query", &query)],
        singular,
    );
    Some((context, parts, refs))
}

/// `lines` with `needles` put before lines drawn at random, joined by newlines.
fn between_lines<S: AsRef<str>>(lines: &[S], needles: &[String], rng: &mut Rng) -> String {
    let mut at = rng.sample(lines.len().max(needles.len()), needles.len());
    at.sort_unstable();
    let mut out: Vec<&str> = Vec::with_capacity(lines.len() + needles.len());
    let mut next = needles.iter().zip(at).peekable();
    for (i, line) in lines.iter().enumerate() {
        while let Some((needle, _)) = next.next_if(|(_, at)| *at == i) {
            out.push(needle);
        }
        out.push(line.as_ref());
    }
    out.extend(next.map(|(needle, _)| needle.as_str()));
    out.join("\n")
}

/// The essay's words from its start (repeated as needed) up to `budget` characters,
/// cut into sentences, the needles put between sentences at RULER's depths, all joined
/// by single spaces.
fn in_essay(text: &str, budget: usize, needles: &[String], rng: &mut Rng) -> String {
    let mut body = String::with_capacity(budget + 64);
    for word in text.split_whitespace().cycle() {
        if !body.is_empty() && body.len() + 1 + word.len() > budget {
            break;
        }
        if !body.is_empty() {
            body.push(' ');
        }
        body.push_str(word);
        if body.len() >= budget {
            break;
        }
    }
    let ends = sentence_ends(&body);
    let depths = depths();
    let mut at: Vec<usize> = rng
        .sample(depths.len(), needles.len())
        .into_iter()
        .map(|d| (ends.len() as u64 * depths[d] / 100) as usize)
        .collect();
    at.sort_unstable();
    let start_of = |i: usize| if i == 0 { 0 } else { ends[i - 1] + 1 };
    let mut pieces: Vec<&str> = Vec::with_capacity(needles.len() * 2 + 1);
    let mut from = 0;
    for (needle, to) in needles.iter().zip(at) {
        if to > from {
            pieces.push(&body[start_of(from)..ends[to - 1]]);
        }
        pieces.push(needle);
        from = to;
    }
    if ends.len() > from {
        pieces.push(&body[start_of(from)..]);
    }
    pieces.join(" ")
}

/// Where the sentences of `body` (words joined by single spaces) end: after a word
/// ending in `.`, `!` or `?` (a closing quote or bracket after it allowed), and at the
/// end of the text.
fn sentence_ends(body: &str) -> Vec<usize> {
    let bytes = body.as_bytes();
    let mut ends: Vec<usize> = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b' ')
        .map(|(i, _)| i)
        .filter(|&i| {
            let mut j = i;
            while j > 0 && matches!(bytes[j - 1], b'"' | b'\'' | b')' | b']') {
                j -= 1;
            }
            j > 0 && matches!(bytes[j - 1], b'.' | b'!' | b'?')
        })
        .collect();
    if !body.is_empty() {
        ends.push(body.len());
    }
    ends
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depths_are_rulers_forty() {
        let d = depths();
        assert_eq!(d.len(), 40);
        assert_eq!(
            (d[0], d[1], d[2], d[19], d[38], d[39]),
            (0, 3, 5, 49, 97, 100)
        );
    }

    #[test]
    fn uuids_have_version_4_and_the_rfc_variant() {
        let mut rng = Rng::new(1, 2);
        for _ in 0..100 {
            let id = uuid4(&mut rng);
            let parts: Vec<&str> = id.split('-').collect();
            assert_eq!(
                parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
                [8, 4, 4, 4, 12]
            );
            assert!(parts[2].starts_with('4'), "{id}");
            assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"), "{id}");
        }
    }

    #[test]
    fn sentences_end_after_their_stop() {
        let body = "One two. Three? \"Four!\" five (six.) seven";
        let ends = sentence_ends(body);
        let cut: Vec<&str> = std::iter::once(0)
            .chain(ends.iter().map(|e| e + 1))
            .zip(&ends)
            .map(|(s, e)| &body[s..*e])
            .collect();
        assert_eq!(
            cut,
            ["One two.", "Three?", "\"Four!\"", "five (six.)", "seven"]
        );
    }
}

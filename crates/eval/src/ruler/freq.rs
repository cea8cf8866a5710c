//! RULER's two word-frequency tasks: `cwe` (`common_words_extraction.py`: a numbered
//! list in which ten words appear far more often than the others, after one worked
//! example) and `fwe` (`freq_words_extraction.py`: coded six-letter words whose counts
//! follow a zeta law, the most frequent being dots to ignore).
//!
//! `cwe` draws its words from the vendored noun, adjective and verb lists; where a
//! context needs more distinct words than they hold (8 165, beyond about 380k
//! characters) RULER draws from `english_words.json` (a Git LFS file, not offline), and
//! this crate from `adjective-noun` pairs instead.

use std::collections::BTreeSet;

use super::template::{Parts, CWE, FWE};
use super::words;
use crate::rng::Rng;

/// Sum of the decimal digits counts of 1..=n (how many characters numbering n list
/// entries takes).
fn digits_up_to(n: usize) -> usize {
    let mut total = 0;
    let mut low = 1;
    let mut digits = 1;
    while low <= n {
        let high = (low * 10 - 1).min(n);
        total += (high - low + 1) * digits;
        low *= 10;
        digits += 1;
    }
    total
}

/// Distinct words drawn in turn: the lists' words in a random order, then
/// `adjective-noun` pairs.
struct Draw<'a> {
    rng: &'a mut Rng,
    order: Vec<usize>,
    next: usize,
    seen: BTreeSet<String>,
}

impl<'a> Draw<'a> {
    fn new(rng: &'a mut Rng) -> Self {
        Self {
            rng,
            order: (0..words::all_words().len()).collect(),
            next: 0,
            seen: BTreeSet::new(),
        }
    }

    fn word(&mut self) -> String {
        let all = words::all_words();
        if self.next < all.len() {
            let j = self.next + self.rng.below((all.len() - self.next) as u64) as usize;
            self.order.swap(self.next, j);
            let word = all[self.order[self.next]].to_owned();
            self.next += 1;
            self.seen.insert(word.clone());
            return word;
        }
        loop {
            let pair = words::key(self.rng);
            if self.seen.insert(pair.clone()) {
                return pair;
            }
        }
    }
}

/// `common` repeated `common_repeats` times and `rest` `rest_repeats` times, shuffled,
/// as RULER numbers them: `1. w 2. w …`.
fn numbered_list(
    rng: &mut Rng,
    common: &[String],
    rest: &[String],
    common_repeats: usize,
    rest_repeats: usize,
) -> String {
    let mut list: Vec<&str> = Vec::new();
    for _ in 0..common_repeats {
        list.extend(common.iter().map(String::as_str));
    }
    for _ in 0..rest_repeats {
        list.extend(rest.iter().map(String::as_str));
    }
    rng.shuffle(&mut list);
    numbered(&list)
}

/// `1. a 2. b …`.
fn numbered<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .enumerate()
        .map(|(i, w)| format!("{}. {}", i + 1, w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `num_words` words of which the first `num_cw` are the common ones.
fn example(
    rng: &mut Rng,
    num_words: usize,
    common_repeats: usize,
    rest_repeats: usize,
    num_cw: usize,
) -> (String, Vec<String>) {
    let mut draw = Draw::new(rng);
    let chosen: Vec<String> = (0..num_words).map(|_| draw.word()).collect();
    let (common, rest) = chosen.split_at(num_cw.min(chosen.len()));
    let context = numbered_list(rng, common, rest, common_repeats, rest_repeats);
    (context, common.to_vec())
}

/// `cwe`: the context, its parts (the worked example first) and the ten common words.
pub(crate) fn common_words(
    freq_cw: usize,
    freq_ucw: usize,
    num_cw: usize,
    rng: &mut Rng,
    length: usize,
) -> (String, Parts, Vec<String>) {
    // RULER's two regimes: below 4 096 tokens a smaller example and fewer repeats.
    let small = super::tokens_of_chars(length as u64) < 4096;
    let (example_words, example_common, example_rest, common_repeats, rest_repeats) = if small {
        (20, 3, 1, 6, 1)
    } else {
        (40, 10, 3, freq_cw, freq_ucw)
    };
    let template = Parts::render(&CWE, &[], false);
    let (example_context, example_answer) =
        example(rng, example_words, example_common, example_rest, num_cw);
    let worked = format!(
        "{} {}",
        template.input(&example_context),
        numbered(&example_answer)
    );
    // As many words as fit: each adds its repeats' entries (number, ". ", the word, a
    // space between entries).
    let mut draw = Draw::new(rng);
    let mut chosen: Vec<String> = Vec::new();
    let (mut entries, mut word_chars) = (0_usize, 0_usize);
    loop {
        let word = draw.word();
        let repeats = if chosen.len() < num_cw {
            common_repeats
        } else {
            rest_repeats
        };
        let (e, w) = (entries + repeats, word_chars + repeats * word.len());
        let size = digits_up_to(e) + 3 * e - 1 + w;
        if size > length && chosen.len() >= num_cw {
            break;
        }
        chosen.push(word);
        (entries, word_chars) = (e, w);
    }
    let (common, rest) = chosen.split_at(num_cw);
    let context = numbered_list(rng, common, rest, common_repeats, rest_repeats);
    let mut parts = template;
    parts.examples = format!("{worked}\n");
    (context, parts, common.to_vec())
}

/// `k^-alpha`: for RULER's alpha of 2 on the four operations only (the bytes of a
/// context must not depend on a platform's `libm`).
fn power_law(k: usize, alpha: f64) -> f64 {
    if alpha == 2.0 {
        1.0 / (k as f64 * k as f64)
    } else {
        (k as f64).powf(-alpha)
    }
}

/// ζ(`alpha`) for `alpha` > 1: π²/6 for 2, else the sum to 10⁴ and the
/// Euler–Maclaurin tail.
fn zeta(alpha: f64) -> f64 {
    if alpha == 2.0 {
        return std::f64::consts::PI * std::f64::consts::PI / 6.0;
    }
    const TERMS: u32 = 10_000;
    let head: f64 = (1..=TERMS).map(|k| f64::from(k).powf(-alpha)).sum();
    let n = f64::from(TERMS);
    head + n.powf(1.0 - alpha) / (alpha - 1.0) - n.powf(-alpha) / 2.0
}

/// `fwe`: the context, its parts and the three most frequent coded words.
pub(crate) fn frequent_words(
    alpha: f64,
    rng: &mut Rng,
    length: usize,
) -> (String, Parts, Vec<String>) {
    const WORD_CHARS: usize = 6;
    let tokens = super::tokens_of_chars(length as u64) as usize;
    let vocab_size = (tokens.saturating_sub(50) / 50).max(8);
    let mut seen = BTreeSet::new();
    while seen.len() < vocab_size {
        let word: String = (0..WORD_CHARS)
            .map(|_| char::from(b'a' + rng.below(26) as u8))
            .collect();
        seen.insert(word);
    }
    let mut vocab: Vec<String> = seen.into_iter().collect();
    rng.shuffle(&mut vocab);
    // The most frequent is noise.
    vocab[0] = "...".to_owned();
    let z = zeta(alpha);
    let counts = |total: usize| -> Vec<usize> {
        (1..=vocab.len())
            .map(|k| (total as f64 * power_law(k, alpha) / z) as usize)
            .collect()
    };
    let size = |total: usize| -> usize {
        counts(total)
            .iter()
            .zip(&vocab)
            .map(|(n, w)| n * (w.len() + 1))
            .sum::<usize>()
            .saturating_sub(1)
    };
    // The most words that fit.
    let (mut low, mut high) = (0_usize, length.max(1));
    while low < high {
        let mid = (low + high).div_ceil(2);
        if size(mid) <= length {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    let mut text: Vec<&str> = Vec::new();
    for (n, word) in counts(low).into_iter().zip(&vocab) {
        text.extend(std::iter::repeat_n(word.as_str(), n));
    }
    rng.shuffle(&mut text);
    let parts = Parts::render(&FWE, &[], false);
    (text.join(" "), parts, vocab[1..4].to_vec())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn numbering_costs_what_it_writes() {
        for n in [1, 9, 10, 99, 100, 12_345] {
            let written: usize = (1..=n).map(|i| i.to_string().len()).sum();
            assert_eq!(digits_up_to(n), written, "{n}");
        }
        assert!((zeta(2.0) - std::f64::consts::PI.powi(2) / 6.0).abs() < 1e-12);
        assert!((zeta(3.0) - 1.202_056_903_159_594).abs() < 1e-9);
    }

    fn counts(list: &str) -> BTreeMap<String, usize> {
        let re = regex::Regex::new(r"(?:^| )\d+\. ").unwrap();
        let mut out = BTreeMap::new();
        for word in re.split(list).filter(|w| !w.is_empty()) {
            *out.entry(word.to_owned()).or_default() += 1;
        }
        out
    }

    #[test]
    fn cwe_repeats_its_ten_words_as_rulers_two_regimes_do() {
        for (length, common, rest) in [(8_000, 6, 1), (60_000, 30, 3)] {
            let mut rng = Rng::new(5, length as u64);
            let (context, parts, refs) = common_words(30, 3, 10, &mut rng, length);
            assert!(
                context.len() <= length && context.len() + 200 > length,
                "{}",
                context.len()
            );
            let counts = counts(&context);
            assert_eq!(refs.len(), 10);
            for word in &refs {
                assert_eq!(counts[word], common, "{word}");
            }
            assert!(counts
                .iter()
                .filter(|(w, _)| !refs.contains(w))
                .all(|(_, n)| *n == rest));
            assert!(parts
                .examples
                .contains("Answer: The top 10 words that appear most often in the list are: 1. "));
        }
    }

    #[test]
    fn fwe_counts_follow_the_zeta_law_and_the_dots_lead() {
        let mut rng = Rng::new(6, 1);
        let (context, _, refs) = frequent_words(2.0, &mut rng, 50_000);
        assert!(
            context.len() <= 50_000 && context.len() > 45_000,
            "{}",
            context.len()
        );
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for word in context.split(' ') {
            *counts.entry(word).or_default() += 1;
        }
        let mut ranked: Vec<(&str, usize)> = counts.into_iter().collect();
        ranked.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        assert_eq!(ranked[0].0, "...");
        let top: Vec<&str> = ranked[1..4].iter().map(|(w, _)| *w).collect();
        assert_eq!(top, refs.iter().map(String::as_str).collect::<Vec<_>>());
        // Rank 2 appears a quarter as often as rank 1, within rounding.
        assert!((ranked[1].1 * 4).abs_diff(ranked[0].1) <= 4);
    }
}

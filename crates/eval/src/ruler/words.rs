//! The word lists RULER draws from (`wonderwords`' noun, adjective and verb lists,
//! vendored under `crates/eval/data/wonderwords` with their MIT licence): the keys of
//! the needle tasks (`adjective-noun`) and the words of `cwe`.
//!
//! Read as `wonderwords` reads them (one word a line, trailing whitespace dropped),
//! then, as RULER does, made distinct and sorted; the one word that is not ASCII
//! (`jalapeño`) is left out so that contexts stay ASCII.

use std::collections::BTreeSet;
use std::sync::OnceLock;

const NOUNS: &str = include_str!("../../data/wonderwords/nounlist.txt");
const ADJECTIVES: &str = include_str!("../../data/wonderwords/adjectivelist.txt");
const VERBS: &str = include_str!("../../data/wonderwords/verblist.txt");

/// The lines of `texts`, distinct and sorted.
fn list(texts: &[&'static str]) -> Vec<&'static str> {
    texts
        .iter()
        .flat_map(|text| text.lines())
        .map(str::trim_end)
        .filter(|w| !w.is_empty() && w.is_ascii())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The nouns.
pub(crate) fn nouns() -> &'static [&'static str] {
    static LIST: OnceLock<Vec<&'static str>> = OnceLock::new();
    LIST.get_or_init(|| list(&[NOUNS]))
}

/// The adjectives.
pub(crate) fn adjectives() -> &'static [&'static str] {
    static LIST: OnceLock<Vec<&'static str>> = OnceLock::new();
    LIST.get_or_init(|| list(&[ADJECTIVES]))
}

/// Nouns, adjectives and verbs together, distinct and sorted (`cwe`'s words).
pub(crate) fn all_words() -> &'static [&'static str] {
    static LIST: OnceLock<Vec<&'static str>> = OnceLock::new();
    LIST.get_or_init(|| list(&[NOUNS, ADJECTIVES, VERBS]))
}

/// A key of the needle tasks' `words` type: `adjective-noun`.
pub(crate) fn key(rng: &mut crate::rng::Rng) -> String {
    format!("{}-{}", rng.pick(adjectives()), rng.pick(nouns()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_lists_are_read_whole() {
        // wonderwords 3.0.1: 6 782 nouns, 912 adjectives and 1 042 verbs (lines), less
        // duplicates and the one non-ASCII noun.
        assert!(
            (6_700..=6_782).contains(&nouns().len()),
            "{}",
            nouns().len()
        );
        assert!((900..=912).contains(&adjectives().len()));
        let all = all_words();
        assert!(all.len() > 8_000, "{}", all.len());
        assert!(all.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
        assert!(all.iter().all(|w| w.is_ascii() && !w.is_empty()));
        assert!(all.contains(&"abandon") || all.contains(&"ability"));
    }
}

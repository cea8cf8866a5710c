//! The lines nearest a pattern that matched nothing: a pattern worded like a question
//! ("spare rotation code for X") misses the line that says it another way ("One of
//! the spare rotation codes for X is: 123"), and a model told only "no line matches"
//! gives up or grabs another number. `ctx_grep` then shows the few lines that share
//! the most words with the pattern.
//!
//! Words are runs of letters and digits, case folded, a plural `s`/`es` folded, the
//! common English stop-words left out; a regex escape (`\d`, `\w`) is no word. A line
//! scores the number of distinct pattern words it holds. One pass over the text keeps
//! the best [`NEAREST_LINES`] in a small heap (ties: the earlier line), reading at most
//! [`SCORED_LINE_BYTES`] of each line; each line shown is cut to a few hundred
//! characters. It reads the pattern and the variable, nothing else.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::ops::ControlFlow;

use rlm_context_store::{StoreError, TextReader};
use rlm_protocol::format::clip;

/// Lines shown at most.
pub const NEAREST_LINES: usize = 5;

/// Bytes of a line that are scored (the rest of a longer line is not read).
pub const SCORED_LINE_BYTES: usize = 4_096;

/// Characters of a line shown.
const SHOWN_CHARS: usize = 200;

/// Distinct words of a pattern that count (a pattern is short; this bounds the work
/// of each line).
const MAX_PATTERN_WORDS: usize = 32;

/// Words that say nothing of what a line is about.
const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can",
    "did", "do", "does", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is",
    "it", "its", "me", "my", "no", "not", "of", "on", "one", "or", "our", "so", "than", "that",
    "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "was", "we",
    "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "you", "your",
];

/// One line near the pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NearLine {
    /// 1-based line number.
    pub line: u64,
    /// Character offset of the line's start.
    pub offset: u64,
    /// How many distinct words of the pattern it holds.
    pub shared: usize,
    /// The line, cut to a few hundred characters.
    pub text: String,
}

/// `word` as it is compared: lower case, a plural `es` (after s, x, z, ch, sh) or `s`
/// (not `ss`) dropped from a word of four letters or more.
pub fn fold(word: &str) -> String {
    let word = word.to_lowercase();
    for stem_end in ["ses", "xes", "zes", "ches", "shes"] {
        if word.len() > stem_end.len() + 1 && word.ends_with(stem_end) {
            return word[..word.len() - 2].to_owned();
        }
    }
    if word.len() >= 4 && word.ends_with('s') && !word.ends_with("ss") {
        return word[..word.len() - 1].to_owned();
    }
    word
}

/// The folded words of `text` that count: no stop-word, no regex escape.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    let mut escaped = false;
    text.split(move |c: char| {
        let split = !c.is_alphanumeric() || escaped;
        escaped = c == '\\';
        split
    })
    .filter(|word| !word.is_empty())
    .map(fold)
    .filter(|word| !STOP_WORDS.contains(&word.as_str()))
}

/// The distinct words of `pattern` that lines are scored by (at most
/// [`MAX_PATTERN_WORDS`]), in order.
fn pattern_words(pattern: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    words(pattern)
        .filter(|word| seen.insert(word.clone()))
        .take(MAX_PATTERN_WORDS)
        .collect()
}

/// How many of `wanted` the first [`SCORED_LINE_BYTES`] of `line` hold.
fn shared(line: &str, wanted: &[String]) -> usize {
    let mut end = line.len().min(SCORED_LINE_BYTES);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    let mut held = vec![false; wanted.len()];
    for word in words(&line[..end]) {
        if let Some(at) = wanted.iter().position(|w| *w == word) {
            held[at] = true;
        }
    }
    held.into_iter().filter(|h| *h).count()
}

/// A line in the heap, ordered by what it shares, then by the earlier line: (words
/// shared, the line number reversed, the offset, the text shown).
type Ranked = (usize, Reverse<u64>, u64, String);

/// The lines of `text` that share the most words with `pattern`, best first (at most
/// [`NEAREST_LINES`]; none when the pattern has no word that counts or no line shares
/// one).
pub fn nearest(text: &TextReader<'_>, pattern: &str) -> Result<Vec<NearLine>, StoreError> {
    let wanted = pattern_words(pattern);
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    // A min-heap of the best so far: the worst (fewest words, then latest line) on top.
    let mut best: BinaryHeap<Reverse<Ranked>> = BinaryHeap::new();
    text.for_each_line(&mut |line| {
        let shown = line.text();
        let score = shared(&shown, &wanted);
        if score == 0 {
            return ControlFlow::Continue(());
        }
        let better = best.len() < NEAREST_LINES
            || best
                .peek()
                .is_some_and(|Reverse((worst, _, _, _))| score > *worst);
        if better {
            let cut = clip(shown.trim_end_matches('\r'), SHOWN_CHARS);
            best.push(Reverse((score, Reverse(line.number), line.offset, cut)));
            if best.len() > NEAREST_LINES {
                best.pop();
            }
        }
        ControlFlow::Continue(())
    })?;
    let mut lines: Vec<NearLine> = best
        .into_iter()
        .map(|Reverse((shared, Reverse(line), offset, text))| NearLine {
            line,
            offset,
            shared,
            text,
        })
        .collect();
    lines.sort_by_key(|near| (Reverse(near.shared), near.line));
    Ok(lines)
}

/// The note after "no line matches": the nearest lines, each with its location; empty
/// when there are none.
pub fn note(lines: &[NearLine]) -> String {
    if lines.is_empty() {
        return String::new();
    }
    let mut text = format!(
        "\nThe {} the most words with the pattern (case and plurals folded):",
        if lines.len() == 1 {
            "line that shares".to_owned()
        } else {
            format!("{} lines that share", lines.len())
        }
    );
    for near in lines {
        text.push_str(&format!(
            "\noffset {} (line {}): {}",
            near.offset, near.line, near.text
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rlm_context_store::{SetOptions, Store};
    use serde_json::json;

    fn nearest_in(text: &str, pattern: &str) -> Vec<NearLine> {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.set("t", json!(text), SetOptions::default()).unwrap();
        nearest(&store.text_reader("t").unwrap(), pattern).unwrap()
    }

    #[test]
    fn words_fold_case_and_plurals_and_drop_stop_words_and_escapes() {
        let got: Vec<String> =
            words("The spare Rotation CODES for boxes, classes and \\d+ matches").collect();
        assert_eq!(got, ["spare", "rotation", "code", "box", "class", "match"]);
        assert_eq!(fold("status"), "statu");
        assert_eq!(fold("class"), "class");
        assert_eq!(fold("bus"), "bus");
        assert_eq!(fold("lines"), "line");
    }

    #[test]
    fn a_question_worded_pattern_finds_the_line_that_says_it_otherwise() {
        let text = "Intro text.\nThe weather was fine.\nOne of the spare rotation codes for north-gate-05 is: 123\nA rotation show.\n";
        let got = nearest_in(text, "spare rotation code for north-gate-05");
        assert_eq!(got[0].line, 3);
        assert_eq!(got[0].offset, 34);
        assert_eq!(
            got[0].text,
            "One of the spare rotation codes for north-gate-05 is: 123"
        );
        assert_eq!(got[0].shared, 6);
        // The line with one word shared comes after; the lines with none are not shown.
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].line, 4);
        let note = note(&got);
        assert!(
            note.contains(
                "offset 34 (line 3): One of the spare rotation codes for north-gate-05 is: 123"
            ),
            "{note}"
        );
    }

    #[test]
    fn nothing_is_shown_for_a_pattern_of_no_words_or_a_text_that_shares_none() {
        assert!(nearest_in("alpha\nbeta\n", "^\\d+$").is_empty());
        assert!(nearest_in("alpha\nbeta\n", "the of and").is_empty());
        assert!(nearest_in("alpha\nbeta\n", "gamma").is_empty());
        assert_eq!(note(&[]), "");
    }

    #[test]
    fn at_most_five_lines_the_best_first_ties_by_line() {
        let text = (0..50)
            .map(|i| {
                if i % 10 == 7 {
                    format!("row {i}: red green blue")
                } else {
                    format!("row {i}: red")
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let got = nearest_in(&text, "red green blue");
        let lines: Vec<u64> = got.iter().map(|n| n.line).collect();
        assert_eq!(lines, [8, 18, 28, 38, 48]);
    }

    #[test]
    fn a_long_line_is_scored_on_its_start_and_shown_cut() {
        let long = format!("{} magic", "x ".repeat(10_000));
        let text = format!("{long}\nmagic at the start {}\n", "y".repeat(5_000));
        let got = nearest_in(&text, "magic");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].line, 2);
        assert!(
            got[0].text.len() <= SHOWN_CHARS * 4 + 8,
            "{}",
            got[0].text.len()
        );
    }

    proptest! {
        // Each case opens a store on disk: few cases, each a few hundred lines.
        #![proptest_config(ProptestConfig::with_cases(24))]

        #[test]
        fn the_note_is_bounded_whatever_the_text(
            lines in proptest::collection::vec("[a-z ]{0,300}", 0..200),
            pattern in "[a-z ]{1,80}",
        ) {
            let got = nearest_in(&lines.join("\n"), &pattern);
            prop_assert!(got.len() <= NEAREST_LINES);
            prop_assert!(got.windows(2).all(|w| (Reverse(w[0].shared), w[0].line) <= (Reverse(w[1].shared), w[1].line)));
            prop_assert!(note(&got).len() <= NEAREST_LINES * (SHOWN_CHARS * 4 + 60) + 100);
        }
    }
}

//! Reading a variable for the micro-tools without holding it. The store streams the
//! text ([`rlm_context_store::TextReader`]: length, a character range, the first
//! characters, line by line); this module says where the text comes from and what
//! `ctx_grep` keeps of each line.
//!
//! A variable's *text* is its value as a string for a text variable, its
//! pretty-printed JSON otherwise, and the referenced file for a `file` variable (so
//! `ctx_grep` finds lines and `ctx_slice` offsets agree with them). A context made of
//! several files is their texts, one after the other, each followed by a newline.
//! Character offsets count Unicode scalar values, so slicing never cuts a character.

use std::ops::ControlFlow;
use std::path::PathBuf;

use regex::Regex;
use rlm_context_store::{Store, StoreError, TextReader};

use rlm_protocol::format::clip;

/// Characters of a matching line shown by `ctx_grep` (around the match).
const GREP_LINE_CHARS: usize = 300;

/// Where a variable's text comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Variable files (a context slot), in order.
    Files(Vec<PathBuf>),
    /// A variable of the store, by key.
    Key(String),
}

impl Source {
    /// The store's reader of this text.
    pub fn reader<'s>(&self, store: &'s Store) -> Result<TextReader<'s>, StoreError> {
        match self {
            Self::Key(key) => store.text_reader(key),
            Self::Files(paths) => Ok(TextReader::of_variable_files(paths.clone())),
        }
    }
}

/// One match `ctx_grep` found: a matching line, or one match of a long line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrepHit {
    /// 1-based line number.
    pub line: u64,
    /// Character offset of what `text` shows: the line's start, or for a match in a
    /// line too long to show whole, the start of the excerpt around it (so a slice from
    /// there reads on from the match).
    pub offset: u64,
    /// The line, or the excerpt of a long line around the match.
    pub text: String,
}

/// How much a grep found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GrepCount {
    /// Hits: every matching line, where a line too long to show whole counts each of
    /// its matches apart (those further apart than one excerpt).
    pub hits: u64,
    /// Lines with a match.
    pub lines: u64,
}

/// The first `max` hits of `regex` in `text`, and how many there are in all. A line
/// that fits [`GREP_LINE_CHARS`] is one hit, shown whole; a longer line gives a hit
/// for each match outside the excerpt of the one before, each shown around its match
/// at its own offset — so a text of one long line (minified JSON, a document without
/// newlines) shows every match, not its first alone. A line longer than
/// [`rlm_context_store::TEXT_LINE_MAX_BYTES`] is searched in the pieces the reader
/// hands over.
pub fn grep(
    text: &TextReader<'_>,
    regex: &Regex,
    max: usize,
) -> Result<(Vec<GrepHit>, GrepCount), StoreError> {
    let mut hits = Vec::new();
    let mut count = GrepCount::default();
    text.for_each_line(&mut |line| {
        let shown = line.text();
        let (kept, found) = hits_in_line(&shown, regex, max.saturating_sub(hits.len()));
        if found > 0 {
            count.lines += 1;
            count.hits += found;
        }
        hits.extend(kept.into_iter().map(|(from, text)| GrepHit {
            line: line.number,
            offset: line.offset + from,
            text,
        }));
        ControlFlow::Continue(())
    })?;
    Ok((hits, count))
}

/// The hits of `regex` in one line, the first `keep` of them kept (the character
/// offset in the line of what each shows, and the text shown), and how many there
/// are. Lines that do not match cost the regex alone; in a long line each excerpt is
/// found by walking at most one excerpt's characters from its match, so a line of
/// many matches is read about once, not once a match.
fn hits_in_line(line: &str, regex: &Regex, keep: usize) -> (Vec<(u64, String)>, u64) {
    let line = line.trim_end_matches('\r');
    let mut matches = regex.find_iter(line);
    let Some(first) = matches.next() else {
        return (Vec::new(), 0);
    };
    if line.len() <= GREP_LINE_CHARS || line.chars().count() <= GREP_LINE_CHARS {
        let kept = if keep > 0 {
            vec![(0, line.to_owned())]
        } else {
            Vec::new()
        };
        return (kept, 1);
    }
    let mut kept = Vec::new();
    let mut found = 0u64;
    // The byte the kept excerpts have been counted up to, and its character offset.
    let (mut counted_to, mut chars_before) = (0usize, 0u64);
    // Where the last excerpt ends, in bytes: a match before that is already shown.
    let mut shown_to = 0usize;
    for m in std::iter::once(first).chain(matches) {
        if m.start() < shown_to || (m.as_str().is_empty() && found > 0) {
            continue;
        }
        let (from, to) = excerpt_bounds(line, m.start(), m.end());
        shown_to = to;
        found += 1;
        if kept.len() < keep {
            // Excerpts start in order (each past the middle of the one before).
            chars_before += line[counted_to..from].chars().count() as u64;
            counted_to = from;
            kept.push((chars_before, excerpt_text(line, from, to)));
        }
    }
    (kept, found)
}

/// A matching line cut to [`GREP_LINE_CHARS`] around the match.
#[cfg(test)]
fn around(line: &str, start: usize, end: usize) -> String {
    let line = line.trim_end_matches('\r');
    let (from, to) = excerpt_bounds(line, start, end);
    excerpt_text(line, from, to)
}

/// The bytes of the excerpt of `line` around the match at bytes `start..end`:
/// [`GREP_LINE_CHARS`] characters, the match in the middle where the line allows.
fn excerpt_bounds(line: &str, start: usize, end: usize) -> (usize, usize) {
    let match_len = line[start..end].chars().count();
    let before = GREP_LINE_CHARS.saturating_sub(match_len) / 2;
    let from = line[..start]
        .char_indices()
        .rev()
        .take(before)
        .last()
        .map_or(start, |(byte, _)| byte);
    let to = line[from..]
        .char_indices()
        .nth(GREP_LINE_CHARS)
        .map_or(line.len(), |(byte, _)| from + byte);
    (from, to)
}

/// `line[from..to]`, with `…` on each side where it cuts the line.
fn excerpt_text(line: &str, from: usize, to: usize) -> String {
    let mut text = String::new();
    if from > 0 {
        text.push('…');
    }
    text.push_str(&line[from..to]);
    if to < line.len() {
        text.push('…');
    }
    text
}

/// A grep hit as the model reads it.
pub fn render_hit(hit: &GrepHit) -> String {
    format!(
        "offset {} (line {}): {}",
        hit.offset,
        hit.line,
        clip(&hit.text, GREP_LINE_CHARS + 2)
    )
}

/// The header and hits of a grep of `pattern` over `variable` that found `hits` (of
/// `count`): "N lines … match" when each hit is a line, "N matches in M lines …" when
/// long lines gave several.
pub fn found_lines(variable: &str, pattern: &str, hits: &[GrepHit], count: GrepCount) -> String {
    let lines = |n: u64| if n == 1 { "line" } else { "lines" };
    let mut text = if count.hits == count.lines {
        format!(
            "{} {} of {variable} {} {pattern:?}",
            count.hits,
            lines(count.hits),
            if count.hits == 1 { "matches" } else { "match" },
        )
    } else {
        format!(
            "{} matches of {pattern:?} in {} {} of {variable}",
            count.hits,
            count.lines,
            lines(count.lines),
        )
    };
    if count.hits > hits.len() as u64 {
        text.push_str(&format!("; the first {} are shown", hits.len()));
    }
    text.push(':');
    for hit in hits {
        text.push('\n');
        text.push_str(&render_hit(hit));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlm_context_store::SetOptions;
    use serde_json::json;

    fn store_with(values: &[(&str, serde_json::Value)]) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for (key, value) in values {
            store
                .set(key, value.clone(), SetOptions::default())
                .unwrap();
        }
        (dir, store)
    }

    #[test]
    fn text_is_measured_sliced_and_grepped_by_characters() {
        let text = "naïve line one\nERROR: disk 日本 full\nline three\nerror again";
        let (_dir, store) = store_with(&[("t", json!(text))]);
        let key = Source::Key("t".into()).reader(&store).unwrap();
        let m = key.measure().unwrap();
        assert_eq!(m.chars, text.chars().count() as u64);
        assert_eq!(m.lines, 4);
        assert_eq!(key.slice(2, 5).unwrap(), "ïve");
        assert_eq!(key.slice(0, 1000).unwrap(), text);
        assert_eq!(key.slice(900, 1000).unwrap(), "");
        let (hits, count) = grep(&key, &Regex::new("(?i)error").unwrap(), 20).unwrap();
        assert_eq!(count, GrepCount { hits: 2, lines: 2 });
        assert_eq!(hits[0].line, 2);
        assert_eq!(hits[0].offset, 15);
        assert_eq!(
            key.slice(hits[0].offset, hits[0].offset + 5).unwrap(),
            "ERROR"
        );
        assert_eq!(hits[1].line, 4);
        let (start, more) = key.head(5).unwrap();
        assert_eq!((start.as_str(), more), ("naïve", true));
    }

    #[test]
    fn context_files_are_read_in_order_and_json_is_pretty() {
        let (_dir, store) = store_with(&[("a", json!("first")), ("b", json!({"k": [1, 2]}))]);
        let files = Source::Files(vec![
            store.path_of("a").unwrap(),
            store.path_of("b").unwrap(),
        ]);
        let files = files.reader(&store).unwrap();
        let (all, _) = files.head(10_000).unwrap();
        assert_eq!(all, "first\n{\n  \"k\": [\n    1,\n    2\n  ]\n}\n");
        let (hits, count) = grep(&files, &Regex::new("2").unwrap(), 1).unwrap();
        assert_eq!((hits.len(), count.hits), (1, 1));
        assert!(Source::Key("absent".into()).reader(&store).is_err());
    }

    #[test]
    fn a_changed_referenced_file_is_refused_with_what_to_do() {
        let (dir, store) = store_with(&[]);
        let file = dir.path().join("log.txt");
        std::fs::write(&file, "one\ntwo\n").unwrap();
        store
            .set_file_reference("log", &file, SetOptions::default())
            .unwrap();
        let by_key = Source::Key("log".into()).reader(&store).unwrap();
        let by_file = Source::Files(vec![store.path_of("log").unwrap()])
            .reader(&store)
            .unwrap();
        assert_eq!(by_key.measure().unwrap().lines, 2);
        assert_eq!(by_file.head(3).unwrap(), ("one".to_owned(), true));
        std::fs::write(&file, "something else\n").unwrap();
        let any = Regex::new("x").unwrap();
        for reader in [&by_key, &by_file] {
            let error = grep(reader, &any, 1).unwrap_err().to_string();
            assert!(
                error.contains("changed since it was referenced")
                    && error.contains("--copy-context"),
                "{error}"
            );
        }
    }

    #[test]
    fn long_lines_are_clipped_around_the_match() {
        let line = format!("{}NEEDLE{}", "a".repeat(1000), "b".repeat(1000));
        let shown = around(&line, 1000, 1006);
        assert!(shown.contains("NEEDLE"));
        assert!(shown.chars().count() <= GREP_LINE_CHARS + 2);
        assert!(shown.starts_with('…') && shown.ends_with('…'));
    }

    #[test]
    fn each_match_of_a_long_line_is_a_hit_at_its_own_offset() {
        // One line of 8 000 characters with three needles far apart and two side by
        // side: four hits (the pair share an excerpt), each offset where its excerpt
        // starts, so a slice from there reads the needle.
        let filler = "essay text ".repeat(300);
        let line = format!("{filler}key: 111.{filler}key: 222. key: 333.{filler}key: 444.{filler}");
        let (_dir, store) = store_with(&[("t", json!(line))]);
        let reader = Source::Key("t".into()).reader(&store).unwrap();
        let (hits, count) = grep(&reader, &Regex::new(r"key: \d+").unwrap(), 20).unwrap();
        assert_eq!(count, GrepCount { hits: 3, lines: 1 });
        assert!(hits.iter().all(|hit| hit.line == 1));
        assert!(hits[0].text.contains("key: 111"));
        assert!(hits[1].text.contains("key: 222") && hits[1].text.contains("key: 333"));
        assert!(hits[2].text.contains("key: 444"));
        for hit in &hits {
            let at = reader.slice(hit.offset, hit.offset + 300).unwrap();
            assert_eq!(hit.text.trim_matches('…'), at, "offset {}", hit.offset);
        }
        let shown = found_lines("t", r"key: \d+", &hits, count);
        assert!(
            shown.starts_with(r#"3 matches of "key: \\d+" in 1 line of t:"#),
            "{shown}"
        );
        // Cut to the first two, said so.
        let (first, count) = grep(&reader, &Regex::new(r"key: \d+").unwrap(), 2).unwrap();
        assert_eq!(first.len(), 2);
        assert!(found_lines("t", "key", &first, count).contains("the first 2 are shown"));
    }

    #[test]
    fn a_pattern_that_matches_empty_text_is_one_hit_a_line() {
        let line = "x".repeat(5_000);
        let (_dir, store) = store_with(&[("t", json!(line))]);
        let reader = Source::Key("t".into()).reader(&store).unwrap();
        let (hits, count) = grep(&reader, &Regex::new("y*").unwrap(), 20).unwrap();
        assert_eq!((hits.len(), count.hits, count.lines), (1, 1, 1));
    }
}

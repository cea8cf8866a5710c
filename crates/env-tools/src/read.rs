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

/// One line `ctx_grep` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrepHit {
    /// 1-based line number.
    pub line: u64,
    /// Character offset of the line's start.
    pub offset: u64,
    /// The line (clipped around the match).
    pub text: String,
}

/// The first `max` lines of `text` that `regex` matches, and how many lines match in
/// all. A line longer than [`rlm_context_store::TEXT_LINE_MAX_BYTES`] is searched in
/// the pieces the reader hands over.
pub fn grep(
    text: &TextReader<'_>,
    regex: &Regex,
    max: usize,
) -> Result<(Vec<GrepHit>, u64), StoreError> {
    let mut hits = Vec::new();
    let mut total = 0u64;
    text.for_each_line(&mut |line| {
        let shown = line.text();
        if let Some(m) = regex.find(&shown) {
            total += 1;
            if hits.len() < max {
                hits.push(GrepHit {
                    line: line.number,
                    offset: line.offset,
                    text: around(&shown, m.start(), m.end()),
                });
            }
        }
        ControlFlow::Continue(())
    })?;
    Ok((hits, total))
}

/// A matching line cut to [`GREP_LINE_CHARS`] around the match.
fn around(line: &str, start: usize, end: usize) -> String {
    let line = line.trim_end_matches('\r');
    let total = line.chars().count();
    if total <= GREP_LINE_CHARS {
        return line.to_owned();
    }
    let match_start = line[..start.min(line.len())].chars().count();
    let match_len = line[start.min(line.len())..end.min(line.len())]
        .chars()
        .count();
    let before = GREP_LINE_CHARS.saturating_sub(match_len) / 2;
    let from = match_start.saturating_sub(before);
    let shown: String = line.chars().skip(from).take(GREP_LINE_CHARS).collect();
    let mut text = String::new();
    if from > 0 {
        text.push('…');
    }
    text.push_str(&shown);
    if from + GREP_LINE_CHARS < total {
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

/// The header and lines of a grep of `pattern` over `variable` that found `hits` (of
/// `total` lines).
pub fn found_lines(variable: &str, pattern: &str, hits: &[GrepHit], total: u64) -> String {
    let mut text = format!(
        "{total} {} of {variable} {} {pattern:?}{}:",
        if total == 1 { "line" } else { "lines" },
        if total == 1 { "matches" } else { "match" },
        if total > hits.len() as u64 {
            format!("; the first {} are shown", hits.len())
        } else {
            String::new()
        }
    );
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
        let (hits, total) = grep(&key, &Regex::new("(?i)error").unwrap(), 20).unwrap();
        assert_eq!(total, 2);
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
        let (hits, total) = grep(&files, &Regex::new("2").unwrap(), 1).unwrap();
        assert_eq!((hits.len(), total), (1, 1));
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
}

//! Reading a variable for the micro-tools without holding it: its text is streamed
//! from the variable file, and each tool keeps only what it returns.
//!
//! A variable's *text* is its value as a string for a text variable, and its
//! pretty-printed JSON otherwise (so `ctx_grep` finds lines and `ctx_slice` offsets
//! agree with them). A context made of several files is their texts, one after the
//! other, each followed by a newline. Character offsets count Unicode scalar values,
//! so slicing never cuts a character.

use std::io::{self, Write};
use std::path::PathBuf;

use regex::Regex;
use rlm_context_store::{file_ref_in_variable_file, format, Store, VariableType};

use rlm_protocol::format::clip;

/// Characters of a matching line shown by `ctx_grep` (around the match).
const GREP_LINE_CHARS: usize = 300;
/// Longest line held at once by `ctx_grep`; a longer one is searched in pieces.
const GREP_LINE_BYTES: usize = 1 << 20;

/// Where a variable's text comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Variable files (a context slot), in order.
    Files(Vec<PathBuf>),
    /// A variable of the store, by key.
    Key(String),
}

/// Whether a stream goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    More,
    Stop,
}

/// A writer that hands bytes to a sink until the sink has enough.
struct SinkWriter<'a> {
    sink: &'a mut dyn FnMut(&[u8]) -> Flow,
    stopped: bool,
}

impl Write for SinkWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.stopped {
            return Err(io::Error::other("enough was read"));
        }
        match (self.sink)(buf) {
            Flow::More => Ok(buf.len()),
            Flow::Stop => {
                self.stopped = true;
                Err(io::Error::other("enough was read"))
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Streams the text of `source` into `sink` until it ends or the sink stops.
fn stream(
    store: &Store,
    source: &Source,
    sink: &mut dyn FnMut(&[u8]) -> Flow,
) -> Result<(), String> {
    let mut writer = SinkWriter {
        sink,
        stopped: false,
    };
    match source {
        Source::Key(key) => {
            let written = store.write_value_to(key, &mut writer, true);
            match written {
                Err(_) if writer.stopped => Ok(()),
                Err(e) => Err(e.to_string()),
                Ok(()) => Ok(()),
            }
        }
        Source::Files(paths) => {
            for path in paths {
                let header = format::read_header(path).map_err(|e| e.to_string())?;
                let recorded = &header.header.reference;
                let referenced = (recorded.var_type == VariableType::File)
                    .then(|| file_ref_in_variable_file(path))
                    .transpose()
                    .map_err(|e| e.to_string())?
                    .flatten();
                let copied = match (referenced, header.value_offset) {
                    (Some(file), _) => file.copy_to(&mut writer).map(drop).map_err(|e| {
                        format!(
                            "the context file {} cannot be read: {e}; start the run again to reference it as it is now, or pass --copy-context",
                            file.path.display()
                        )
                    }),
                    (None, offset) => match offset {
                    Some(offset) => if first_byte(path, offset) == Some(b'"') {
                        format::copy_text_value(path, offset, recorded, &mut writer)
                    } else {
                        format::copy_json_value(path, offset, recorded, &mut writer, true)
                    }
                    .map_err(|e| e.to_string()),
                    None => {
                        let value =
                            format::read_value(path, None, recorded).map_err(|e| e.to_string())?;
                        let text = match value {
                            serde_json::Value::String(s) => s,
                            other => serde_json::to_string_pretty(&other).unwrap_or_default(),
                        };
                        writer.write_all(text.as_bytes()).map_err(|e| e.to_string())
                    }
                    },
                };
                match copied {
                    Err(_) if writer.stopped => return Ok(()),
                    Err(e) => return Err(e),
                    Ok(()) => {}
                }
                if paths.len() > 1 && writer.write_all(b"\n").is_err() {
                    return Ok(());
                }
            }
            Ok(())
        }
    }
}

fn first_byte(path: &std::path::Path, offset: u64) -> Option<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).ok()?;
    file.seek(SeekFrom::Start(offset)).ok()?;
    let mut byte = [0u8; 1];
    file.read_exact(&mut byte).ok()?;
    Some(byte[0])
}

/// Whether `byte` starts a character (is not a UTF-8 continuation byte).
fn starts_char(byte: u8) -> bool {
    byte & 0xC0 != 0x80
}

/// The size of a variable's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Measure {
    /// Characters.
    pub chars: u64,
    /// Lines (a last line without a newline counts).
    pub lines: u64,
    /// Bytes of UTF-8.
    pub bytes: u64,
}

/// Counts characters and lines of `source`.
pub fn measure(store: &Store, source: &Source) -> Result<Measure, String> {
    let mut m = Measure::default();
    let mut last = b'\n';
    stream(store, source, &mut |buf| {
        m.bytes += buf.len() as u64;
        m.chars += buf.iter().filter(|b| starts_char(**b)).count() as u64;
        m.lines += buf.iter().filter(|b| **b == b'\n').count() as u64;
        if let Some(b) = buf.last() {
            last = *b;
        }
        Flow::More
    })?;
    if last != b'\n' {
        m.lines += 1;
    }
    Ok(m)
}

/// Characters `start..end` of `source` (`end` beyond the text is its end).
pub fn slice(store: &Store, source: &Source, start: u64, end: u64) -> Result<String, String> {
    let mut out = Vec::new();
    // Index of the character the next lead byte starts.
    let mut next_char: u64 = 0;
    let mut keeping = false;
    stream(store, source, &mut |buf| {
        for &byte in buf {
            if starts_char(byte) {
                keeping = next_char >= start && next_char < end;
                next_char += 1;
                if next_char > end {
                    return Flow::Stop;
                }
            }
            if keeping {
                out.push(byte);
            }
        }
        Flow::More
    })?;
    Ok(String::from_utf8_lossy(&out).into_owned())
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

/// The first `max` lines of `source` that `regex` matches, and how many lines match
/// in all.
pub fn grep(
    store: &Store,
    source: &Source,
    regex: &Regex,
    max: usize,
) -> Result<(Vec<GrepHit>, u64), String> {
    let mut hits = Vec::new();
    let mut total = 0u64;
    let mut line: Vec<u8> = Vec::new();
    let mut line_no = 1u64;
    let mut line_offset = 0u64;
    let mut chars = 0u64;
    let check =
        |line: &[u8], line_no: u64, offset: u64, hits: &mut Vec<GrepHit>, total: &mut u64| {
            let text = String::from_utf8_lossy(line);
            if let Some(m) = regex.find(&text) {
                *total += 1;
                if hits.len() < max {
                    hits.push(GrepHit {
                        line: line_no,
                        offset,
                        text: around(&text, m.start(), m.end()),
                    });
                }
            }
        };
    stream(store, source, &mut |buf| {
        for &byte in buf {
            if byte == b'\n' {
                check(&line, line_no, line_offset, &mut hits, &mut total);
                line.clear();
                line_no += 1;
                chars += 1;
                line_offset = chars;
                continue;
            }
            if starts_char(byte) {
                chars += 1;
                // A huge line is searched in pieces, cut at a character boundary.
                if line.len() >= GREP_LINE_BYTES {
                    check(&line, line_no, line_offset, &mut hits, &mut total);
                    line.clear();
                }
            }
            line.push(byte);
        }
        Flow::More
    })?;
    if !line.is_empty() {
        check(&line, line_no, line_offset, &mut hits, &mut total);
    }
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

/// The first `chars` characters of `source`, and whether there was more.
pub fn head(store: &Store, source: &Source, chars: u64) -> Result<(String, bool), String> {
    let mut out = Vec::new();
    let mut seen = 0u64;
    let mut more = false;
    stream(store, source, &mut |buf| {
        for &byte in buf {
            if starts_char(byte) {
                if seen == chars {
                    more = true;
                    return Flow::Stop;
                }
                seen += 1;
            }
            out.push(byte);
        }
        Flow::More
    })?;
    Ok((String::from_utf8_lossy(&out).into_owned(), more))
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
        let key = Source::Key("t".into());
        let m = measure(&store, &key).unwrap();
        assert_eq!(m.chars, text.chars().count() as u64);
        assert_eq!(m.lines, 4);
        assert_eq!(slice(&store, &key, 2, 5).unwrap(), "ïve");
        assert_eq!(slice(&store, &key, 0, 1000).unwrap(), text);
        assert_eq!(slice(&store, &key, 900, 1000).unwrap(), "");
        let (hits, total) = grep(&store, &key, &Regex::new("(?i)error").unwrap(), 20).unwrap();
        assert_eq!(total, 2);
        assert_eq!(hits[0].line, 2);
        assert_eq!(hits[0].offset, 15);
        assert_eq!(
            slice(&store, &key, hits[0].offset, hits[0].offset + 5).unwrap(),
            "ERROR"
        );
        assert_eq!(hits[1].line, 4);
        let (start, more) = head(&store, &key, 5).unwrap();
        assert_eq!((start.as_str(), more), ("naïve", true));
    }

    #[test]
    fn context_files_are_read_in_order_and_json_is_pretty() {
        let (_dir, store) = store_with(&[("a", json!("first")), ("b", json!({"k": [1, 2]}))]);
        let files = Source::Files(vec![
            store.path_of("a").unwrap(),
            store.path_of("b").unwrap(),
        ]);
        let (all, _) = head(&store, &files, 10_000).unwrap();
        assert_eq!(all, "first\n{\n  \"k\": [\n    1,\n    2\n  ]\n}\n");
        let (hits, total) = grep(&store, &files, &Regex::new("2").unwrap(), 1).unwrap();
        assert_eq!((hits.len(), total), (1, 1));
        assert!(measure(&store, &Source::Key("absent".into())).is_err());
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

//! Reading a variable as text without holding it: length, a character range, lines
//! with their numbers, the first characters.
//!
//! The micro-tools (`ctx_length`, `ctx_slice`, `ctx_grep`, `ctx_head`) work on
//! contexts of gigabytes, so they never load a value: they stream it and keep only
//! what they return. Reading the file format is the store's job, so the streaming
//! lives here and the tools only say what to keep.
//!
//! A variable's *text* is its value for a text variable, its pretty-printed JSON for
//! any other value, and the contents of the file it refers to for a `file` variable
//! (checked unchanged). A context made of several variable files is their texts, one
//! after the other, each followed by a newline. Character offsets count Unicode scalar
//! values, so a slice never cuts a character.

use std::borrow::Cow;
use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;

use crate::error::Result;
use crate::key::validate_key;
use crate::store::Store;
use crate::variable_file::VariableFile;

/// Longest line [`TextReader::for_each_line`] hands over at once; a longer one comes
/// in pieces of about this many bytes, cut at character boundaries, each with the
/// line's number and offset.
pub const TEXT_LINE_MAX_BYTES: usize = 1 << 20;

/// The text of a variable, or of several variable files, read by streaming.
///
/// Made by [`Store::text_reader`] (a variable by key) or
/// [`TextReader::of_variable_files`] (a context slot). Every read is one pass over the
/// text from its start, stopped as soon as what was asked for is known.
#[derive(Debug, Clone)]
pub struct TextReader<'a> {
    source: Source<'a>,
}

/// Where the text comes from.
#[derive(Debug, Clone)]
enum Source<'a> {
    /// A variable of a store.
    Key { store: &'a Store, key: String },
    /// Variable files, in order.
    Files(Vec<PathBuf>),
}

/// The size of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TextMeasure {
    /// Characters (Unicode scalar values).
    pub chars: u64,
    /// Lines (a last line without a newline counts).
    pub lines: u64,
    /// Bytes of UTF-8.
    pub bytes: u64,
}

/// One line of a text (or a piece of a line longer than [`TEXT_LINE_MAX_BYTES`]),
/// without its newline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextLine<'a> {
    /// 1-based line number.
    pub number: u64,
    /// Character offset of the line's start in the text.
    pub offset: u64,
    /// The line's bytes (UTF-8 unless the referenced file is not).
    pub bytes: &'a [u8],
}

impl TextLine<'_> {
    /// The line as text (invalid UTF-8 replaced).
    pub fn text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(self.bytes)
    }
}

impl Store {
    /// A reader of the text of `key` (see [`TextReader`]); fails with
    /// [`crate::StoreError::NotFound`] when there is no such variable.
    pub fn text_reader(&self, key: &str) -> Result<TextReader<'_>> {
        validate_key(key)?;
        self.reference(key)?;
        Ok(TextReader {
            source: Source::Key {
                store: self,
                key: key.to_owned(),
            },
        })
    }
}

impl TextReader<'static> {
    /// A reader of the texts of the variable files at `paths` (a context slot), one
    /// after the other, each followed by a newline when there are several. The files
    /// are opened by each read (an error then names the one that failed).
    pub fn of_variable_files(paths: impl Into<Vec<PathBuf>>) -> Self {
        Self {
            source: Source::Files(paths.into()),
        }
    }
}

impl TextReader<'_> {
    /// Streams the text's bytes to `sink` in chunks until it ends or `sink` breaks.
    pub fn stream(&self, sink: &mut dyn FnMut(&[u8]) -> ControlFlow<()>) -> Result<()> {
        let mut writer = SinkWriter {
            sink,
            stopped: false,
        };
        let stopped_ok = |result: Result<()>, writer: &SinkWriter<'_>| match result {
            Err(_) if writer.stopped => Ok(true),
            Err(e) => Err(e),
            Ok(()) => Ok(false),
        };
        match &self.source {
            Source::Key { store, key } => {
                let written = store.write_value_to(key, &mut writer, true);
                stopped_ok(written, &writer).map(drop)
            }
            Source::Files(paths) => {
                for path in paths {
                    let copied = VariableFile::open(path)
                        .and_then(|mut file| file.write_text_to(&mut writer));
                    if stopped_ok(copied, &writer)? {
                        return Ok(());
                    }
                    if paths.len() > 1 && writer.write_all(b"\n").is_err() {
                        return Ok(());
                    }
                }
                Ok(())
            }
        }
    }

    /// Counts the text's characters, lines and bytes.
    pub fn measure(&self) -> Result<TextMeasure> {
        let mut m = TextMeasure::default();
        let mut last = b'\n';
        self.stream(&mut |buf| {
            m.bytes += buf.len() as u64;
            m.chars += buf.iter().filter(|b| starts_char(**b)).count() as u64;
            m.lines += buf.iter().filter(|b| **b == b'\n').count() as u64;
            if let Some(b) = buf.last() {
                last = *b;
            }
            ControlFlow::Continue(())
        })?;
        if last != b'\n' {
            m.lines += 1;
        }
        Ok(m)
    }

    /// Characters `start..end` of the text (an `end` beyond the text is its end).
    pub fn slice(&self, start: u64, end: u64) -> Result<String> {
        let mut out = Vec::new();
        // Index of the character the next lead byte starts.
        let mut next_char: u64 = 0;
        let mut keeping = false;
        self.stream(&mut |buf| {
            for &byte in buf {
                if starts_char(byte) {
                    keeping = next_char >= start && next_char < end;
                    next_char += 1;
                    if next_char > end {
                        return ControlFlow::Break(());
                    }
                }
                if keeping {
                    out.push(byte);
                }
            }
            ControlFlow::Continue(())
        })?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// The first `chars` characters of the text, and whether there is more.
    pub fn head(&self, chars: u64) -> Result<(String, bool)> {
        let mut out = Vec::new();
        let mut seen = 0u64;
        let mut more = false;
        self.stream(&mut |buf| {
            for &byte in buf {
                if starts_char(byte) {
                    if seen == chars {
                        more = true;
                        return ControlFlow::Break(());
                    }
                    seen += 1;
                }
                out.push(byte);
            }
            ControlFlow::Continue(())
        })?;
        Ok((String::from_utf8_lossy(&out).into_owned(), more))
    }

    /// Hands every line of the text to `each` in order, until the text ends or `each`
    /// breaks. Every newline ends a line (an empty one too); a last line without a
    /// newline is handed over unless it is empty. A line longer than
    /// [`TEXT_LINE_MAX_BYTES`] comes in pieces.
    pub fn for_each_line(
        &self,
        each: &mut dyn FnMut(TextLine<'_>) -> ControlFlow<()>,
    ) -> Result<()> {
        let mut line: Vec<u8> = Vec::new();
        let mut number = 1u64;
        let mut offset = 0u64;
        let mut chars = 0u64;
        let mut stopped = false;
        self.stream(&mut |buf| {
            for &byte in buf {
                let ends_line = byte == b'\n';
                if ends_line {
                    chars += 1;
                } else if starts_char(byte) {
                    chars += 1;
                    // A huge line goes in pieces, cut at a character boundary.
                    if line.len() < TEXT_LINE_MAX_BYTES {
                        line.push(byte);
                        continue;
                    }
                } else {
                    line.push(byte);
                    continue;
                }
                let flow = each(TextLine {
                    number,
                    offset,
                    bytes: &line,
                });
                line.clear();
                if ends_line {
                    number += 1;
                    offset = chars;
                } else {
                    line.push(byte);
                }
                if flow.is_break() {
                    stopped = true;
                    return flow;
                }
            }
            ControlFlow::Continue(())
        })?;
        if !line.is_empty() && !stopped {
            let _ = each(TextLine {
                number,
                offset,
                bytes: &line,
            });
        }
        Ok(())
    }
}

/// Whether `byte` starts a character (is not a UTF-8 continuation byte).
fn starts_char(byte: u8) -> bool {
    byte & 0xC0 != 0x80
}

/// A writer that hands bytes to a sink until the sink has enough.
struct SinkWriter<'a> {
    sink: &'a mut dyn FnMut(&[u8]) -> ControlFlow<()>,
    stopped: bool,
}

impl Write for SinkWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.stopped {
            return Err(io::Error::other("enough was read"));
        }
        match (self.sink)(buf) {
            ControlFlow::Continue(()) => Ok(buf.len()),
            ControlFlow::Break(()) => {
                self.stopped = true;
                Err(io::Error::other("enough was read"))
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::ops::ControlFlow;

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::error::StoreError;
    use crate::integrity::sha256_hex;
    use crate::reference::SetOptions;

    /// What the reader must find, computed on the text in memory.
    fn expected_lines(text: &str) -> Vec<(u64, u64, String)> {
        let mut lines = Vec::new();
        let mut offset = 0u64;
        let mut parts: Vec<&str> = text.split('\n').collect();
        if parts.last() == Some(&"") {
            parts.pop();
        }
        for (i, part) in parts.iter().enumerate() {
            lines.push((i as u64 + 1, offset, (*part).to_owned()));
            offset += part.chars().count() as u64 + 1;
        }
        lines
    }

    fn lines_of(reader: &TextReader<'_>) -> Vec<(u64, u64, String)> {
        let mut lines = Vec::new();
        reader
            .for_each_line(&mut |line| {
                lines.push((line.number, line.offset, line.text().into_owned()));
                ControlFlow::Continue(())
            })
            .unwrap();
        lines
    }

    fn check_against(reader: &TextReader<'_>, text: &str, start: u64, len: u64) {
        let chars: Vec<char> = text.chars().collect();
        let m = reader.measure().unwrap();
        assert_eq!(m.chars, chars.len() as u64);
        assert_eq!(m.bytes, text.len() as u64);
        let newlines = text.matches('\n').count() as u64;
        let unterminated = u64::from(!text.is_empty() && !text.ends_with('\n'));
        assert_eq!(m.lines, newlines + unterminated);
        let end = start + len;
        let want: String = chars
            .iter()
            .skip(start as usize)
            .take(len as usize)
            .collect();
        assert_eq!(reader.slice(start, end).unwrap(), want);
        let head: String = chars.iter().take(len as usize).collect();
        assert_eq!(
            reader.head(len).unwrap(),
            (head, (len as usize) < chars.len())
        );
        assert_eq!(lines_of(reader), expected_lines(text));
    }

    /// A variable file in rlm's layout whose text value is written with `escaped`
    /// (any valid JSON spelling of the string), recorded with the right size and hash.
    fn hand_written(dir: &std::path::Path, key: &str, escaped: &str) -> PathBuf {
        let vars = dir.join("variables");
        fs::create_dir_all(&vars).unwrap();
        let value = format!("\"{escaped}\"");
        let reference = json!({
            "id": "id", "key": key, "scope": "global", "type": "text",
            "sizeBytes": value.len(), "createdAt": 1, "sha256": sha256_hex(value.as_bytes()),
        });
        let path = vars.join(format!("{key}.json"));
        fs::write(
            &path,
            format!(
                "{{\"formatVersion\":1,\"ref\":{reference},\"persist\":true,\n\"value\":{value}}}"
            ),
        )
        .unwrap();
        path
    }

    /// `text` as a JSON string body where every character may be spelled as a `\u`
    /// escape (a surrogate pair beyond the BMP) instead of itself.
    fn spelled(text: &str, as_escape: &[bool]) -> String {
        let mut out = String::new();
        for (i, c) in text.chars().enumerate() {
            if as_escape.get(i).copied().unwrap_or(false) || c < ' ' || c == '"' || c == '\\' {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn a_text_variable_is_measured_sliced_and_lined_by_characters() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let text = "naïve line one\nERROR: disk 日本 full\n\nline \"three\" \\ 😀\nend";
        store.set("t", json!(text), SetOptions::default()).unwrap();
        let reader = store.text_reader("t").unwrap();
        check_against(&reader, text, 2, 3);
        assert_eq!(reader.slice(2, 5).unwrap(), "ïve");
        assert_eq!(reader.slice(900, 1000).unwrap(), "");
        assert!(matches!(
            store.text_reader("absent"),
            Err(StoreError::NotFound { .. })
        ));
    }

    #[test]
    fn json_is_read_pretty_and_several_files_are_joined_by_newlines() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .set("a", json!("first"), SetOptions::default())
            .unwrap();
        store
            .set("b", json!({"k": [1, 2]}), SetOptions::default())
            .unwrap();
        let files = TextReader::of_variable_files(vec![
            store.path_of("a").unwrap(),
            store.path_of("b").unwrap(),
        ]);
        let (all, more) = files.head(10_000).unwrap();
        assert_eq!(all, "first\n{\n  \"k\": [\n    1,\n    2\n  ]\n}\n");
        assert!(!more);
        let single = TextReader::of_variable_files(vec![store.path_of("b").unwrap()]);
        assert_eq!(
            single.head(100).unwrap().0,
            "{\n  \"k\": [\n    1,\n    2\n  ]\n}"
        );
        let missing = TextReader::of_variable_files(vec![dir.path().join("nope.json")]);
        assert!(missing.measure().is_err());
    }

    #[test]
    fn escapes_and_surrogate_pairs_are_read_as_their_characters() {
        let dir = tempfile::tempdir().unwrap();
        let path = hand_written(dir.path(), "esc", r#"a\nb\"c\\d\u00e9\ud83d\ude00\/\te"#);
        let reader = TextReader::of_variable_files(vec![path]);
        check_against(&reader, "a\nb\"c\\dé😀/\te", 3, 6);
    }

    #[test]
    fn a_file_variable_reads_the_file_it_refers_to() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("ctx.log");
        fs::write(&log, "one\ntwo 日本\n").unwrap();
        let store = Store::open(dir.path().join("data")).unwrap();
        store
            .set_file_reference("ctx", &log, SetOptions::default())
            .unwrap();
        check_against(&store.text_reader("ctx").unwrap(), "one\ntwo 日本\n", 4, 4);
        let by_path = TextReader::of_variable_files(vec![store.path_of("ctx").unwrap()]);
        check_against(&by_path, "one\ntwo 日本\n", 4, 4);
        fs::write(&log, "changed\n").unwrap();
        assert!(matches!(
            by_path.measure(),
            Err(StoreError::FileChanged { .. })
        ));
    }

    #[test]
    fn a_tampered_value_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = hand_written(dir.path(), "t", "hello");
        let text = fs::read_to_string(&path).unwrap().replace("hello", "hellO");
        fs::write(&path, text).unwrap();
        let reader = TextReader::of_variable_files(vec![path]);
        assert!(matches!(
            reader.measure(),
            Err(StoreError::Integrity { .. })
        ));
    }

    #[test]
    fn a_huge_line_comes_in_pieces_with_its_number_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let text = format!("x\n{}\ny", "é".repeat(TEXT_LINE_MAX_BYTES));
        store
            .set("big", json!(text), SetOptions::default())
            .unwrap();
        let mut pieces = Vec::new();
        store
            .text_reader("big")
            .unwrap()
            .for_each_line(&mut |line| {
                pieces.push((line.number, line.offset, line.bytes.len()));
                ControlFlow::Continue(())
            })
            .unwrap();
        assert_eq!(pieces.first(), Some(&(1, 0, 1)));
        assert_eq!(
            pieces.last(),
            Some(&(3, 2 + TEXT_LINE_MAX_BYTES as u64 + 1, 1))
        );
        let middle = &pieces[1..pieces.len() - 1];
        assert!(middle.len() >= 2 && middle.iter().all(|p| p.0 == 2 && p.1 == 2));
        assert_eq!(
            middle.iter().map(|p| p.2).sum::<usize>(),
            2 * TEXT_LINE_MAX_BYTES
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn streamed_reads_match_the_value_in_memory(
            text in "(?s)[a-zé日\n\"\\\\\t😀\u{1}]{0,200}",
            as_escape in proptest::collection::vec(any::<bool>(), 0..200),
            start in 0u64..220,
            len in 0u64..220,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path().join("data")).unwrap();
            store.set("t", json!(text), SetOptions::default()).unwrap();
            check_against(&store.text_reader("t").unwrap(), &text, start, len);
            let path = hand_written(dir.path(), "h", &spelled(&text, &as_escape));
            check_against(&TextReader::of_variable_files(vec![path]), &text, start, len);
        }
    }
}

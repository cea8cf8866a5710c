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
/// line's number and the offset of its own first character.
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
    /// Character offset of the line's start in the text (of the piece's start, for a
    /// line handed over in pieces).
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
    /// [`TEXT_LINE_MAX_BYTES`] comes in pieces, each with the same line number and its
    /// own offset.
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
                    // The next piece starts at this character (counted above).
                    offset = chars - 1;
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

/// What a range read ([`TextReader::write_lines`], [`TextReader::write_bytes`]) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RangeRead {
    /// Bytes written.
    pub written: u64,
    /// The text's total lines (for [`TextReader::write_lines`]) or bytes (for
    /// [`TextReader::write_bytes`]) when the read went to the end of the text to find
    /// the range's end (the range reached past it); `None` when it stopped early.
    pub total: Option<u64>,
}

impl TextReader<'_> {
    /// Writes lines `first..=last` of the text to `out` (1-based, inclusive, as
    /// `sed -n FIRST,LASTp`), each with its newline as the text has it (a `\r` before
    /// it is kept; a last line without a newline is written without one). `last`
    /// `None` is the end of the text; a `first` of 0 counts as 1; a range past the end
    /// of the text, or with `last < first`, writes nothing. Stops reading at the end
    /// of the range, so memory stays bounded and a range near the start of a huge
    /// text is quick; the text's sha256 is then checked only when the read reaches
    /// its end (see [`Store::write_value_to`]).
    pub fn write_lines(
        &self,
        first: u64,
        last: Option<u64>,
        out: &mut dyn Write,
    ) -> Result<RangeRead> {
        let ranged = lines_in(&mut |sink| self.stream(sink), first, last, out)?;
        ranged.map_err(|e| self.output_error(e))
    }

    /// Writes bytes `start..end` of the text to `out` (0-based, half-open, as a
    /// Python slice; `end` `None` is the end of the text; a range past the end, or
    /// with `end <= start`, writes nothing). A bound that falls inside a multi-byte
    /// UTF-8 character moves forward to the start of the next character: a character
    /// is written by the range that holds its first byte, so what is written is
    /// always whole characters and the ranges `a..b` and `b..c` together write
    /// exactly `a..c`. Stops reading at the end of the range, like
    /// [`Self::write_lines`].
    pub fn write_bytes(
        &self,
        start: u64,
        end: Option<u64>,
        out: &mut dyn Write,
    ) -> Result<RangeRead> {
        let ranged = bytes_in(&mut |sink| self.stream(sink), start, end, out)?;
        ranged.map_err(|e| self.output_error(e))
    }

    /// The error for a failed write of part of the text to its output.
    fn output_error(&self, e: io::Error) -> crate::StoreError {
        let path = match &self.source {
            Source::Key { store, key } => store.path_of(key).unwrap_or_default(),
            Source::Files(paths) => paths.first().cloned().unwrap_or_default(),
        };
        crate::StoreError::io("write part of the text of", path, e)
    }
}

/// A text source for the range readers: hands the text to a sink in chunks.
type Stream<'s> = dyn FnMut(&mut dyn FnMut(&[u8]) -> ControlFlow<()>) -> Result<()> + 's;

/// [`TextReader::write_lines`] on the text `stream` hands over; a failed write to
/// `out` is the inner error.
fn lines_in(
    stream: &mut Stream<'_>,
    first: u64,
    last: Option<u64>,
    out: &mut dyn Write,
) -> Result<io::Result<RangeRead>> {
    let first = first.max(1);
    let last = last.unwrap_or(u64::MAX);
    let mut read = RangeRead::default();
    if last < first {
        return Ok(Ok(read));
    }
    // The line the next byte belongs to.
    let mut line = 1u64;
    let mut ended_with_newline = true;
    let mut failed: Option<io::Error> = None;
    let mut stopped = false;
    stream(&mut |buf| {
        let mut at = 0;
        while at < buf.len() {
            let rest = &buf[at..];
            let (len, newline) = match rest.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (rest.len(), false),
            };
            if line >= first {
                if let Err(e) = out.write_all(&rest[..len]) {
                    failed = Some(e);
                    return ControlFlow::Break(());
                }
                read.written += len as u64;
            }
            at += len;
            ended_with_newline = newline;
            if newline {
                if line == last {
                    stopped = true;
                    return ControlFlow::Break(());
                }
                line += 1;
            }
        }
        ControlFlow::Continue(())
    })?;
    if let Some(e) = failed {
        return Ok(Err(e));
    }
    if !stopped {
        // `line` is one past the last line when the text ends with a newline.
        read.total = Some(if ended_with_newline { line - 1 } else { line });
    }
    Ok(Ok(read))
}

/// [`TextReader::write_bytes`] on the text `stream` hands over; a failed write to
/// `out` is the inner error.
fn bytes_in(
    stream: &mut Stream<'_>,
    start: u64,
    end: Option<u64>,
    out: &mut dyn Write,
) -> Result<io::Result<RangeRead>> {
    let end = end.unwrap_or(u64::MAX);
    let mut read = RangeRead::default();
    if end <= start {
        return Ok(Ok(read));
    }
    // Offset of the next byte in the text.
    let mut offset = 0u64;
    let mut keeping = false;
    let mut failed: Option<io::Error> = None;
    let mut stopped = false;
    stream(&mut |buf| {
        let len = buf.len() as u64;
        let from = if keeping {
            Some(0)
        } else if offset + len > start {
            let skip = start.saturating_sub(offset) as usize;
            first_char_start(buf, skip)
        } else {
            None
        };
        let mut until = buf.len();
        if end < offset + len {
            if let Some(at) = first_char_start(buf, end.saturating_sub(offset) as usize) {
                until = at;
                stopped = true;
            }
        }
        if let Some(from) = from {
            keeping = true;
            if let Err(e) = out.write_all(&buf[from..until]) {
                failed = Some(e);
                return ControlFlow::Break(());
            }
            read.written += (until - from) as u64;
        }
        offset += len;
        if stopped {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })?;
    if let Some(e) = failed {
        return Ok(Err(e));
    }
    if !stopped {
        read.total = Some(offset);
    }
    Ok(Ok(read))
}

/// The index of the first byte of `buf` at or after `from` that starts a character.
fn first_char_start(buf: &[u8], from: usize) -> Option<usize> {
    let rest = buf.get(from..)?;
    rest.iter().position(|b| starts_char(*b)).map(|i| from + i)
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
        check_ranges(reader, text, start, len);
    }

    /// Lines `first..=last` of `text` (1-based) with their newlines, and its line count.
    fn expected_line_range(text: &str, first: u64, last: Option<u64>) -> (String, u64) {
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let first = first.max(1);
        let last = last.unwrap_or(u64::MAX);
        let kept: String = lines
            .iter()
            .enumerate()
            .filter(|(i, _)| (first..=last).contains(&(*i as u64 + 1)))
            .map(|(_, line)| *line)
            .collect();
        (kept, lines.len() as u64)
    }

    /// Bytes `start..end` of `text`, each bound moved forward to a character boundary.
    fn expected_byte_range(text: &str, start: u64, end: Option<u64>) -> String {
        let boundary = |at: u64| {
            let at = usize::try_from(at).unwrap_or(usize::MAX).min(text.len());
            (at..=text.len())
                .find(|i| text.is_char_boundary(*i))
                .unwrap()
        };
        let (from, until) = (boundary(start), boundary(end.unwrap_or(u64::MAX)));
        if until <= from {
            return String::new();
        }
        text[from..until].to_owned()
    }

    fn lines_range(reader: &TextReader<'_>, first: u64, last: Option<u64>) -> (String, RangeRead) {
        let mut out = Vec::new();
        let read = reader.write_lines(first, last, &mut out).unwrap();
        assert_eq!(read.written, out.len() as u64);
        (String::from_utf8(out).unwrap(), read)
    }

    fn bytes_range(reader: &TextReader<'_>, start: u64, end: Option<u64>) -> (String, RangeRead) {
        let mut out = Vec::new();
        let read = reader.write_bytes(start, end, &mut out).unwrap();
        assert_eq!(read.written, out.len() as u64);
        (String::from_utf8(out).expect("whole characters only"), read)
    }

    /// Line and byte ranges around `start` and `len` agree with the text in memory,
    /// and consecutive byte ranges tile it.
    fn check_ranges(reader: &TextReader<'_>, text: &str, start: u64, len: u64) {
        let line_count = text.split_inclusive('\n').count() as u64;
        let first = start % (line_count + 3);
        for last in [
            None,
            Some(first),
            Some(first + len % 5),
            Some(first.saturating_sub(1)),
        ] {
            let (got, read) = lines_range(reader, first, last);
            let (want, total) = expected_line_range(text, first, last);
            assert_eq!(got, want, "lines {first}:{last:?} of {text:?}");
            let reached_end =
                last.is_none_or(|last| last > total) && last.is_none_or(|l| l >= first.max(1));
            if reached_end {
                assert_eq!(
                    read.total,
                    Some(total),
                    "lines {first}:{last:?} of {text:?}"
                );
            }
        }
        let end = start + len;
        for range in [
            (start, Some(end)),
            (start, None),
            (0, Some(start)),
            (end, Some(start)),
        ] {
            let (got, read) = bytes_range(reader, range.0, range.1);
            assert_eq!(
                got,
                expected_byte_range(text, range.0, range.1),
                "bytes {range:?} of {text:?}"
            );
            let past_the_end = range.1.is_none_or(|e| e > text.len() as u64 && e > range.0);
            if past_the_end {
                assert_eq!(read.total, Some(text.len() as u64));
            }
        }
        let (a, _) = bytes_range(reader, 0, Some(start));
        let (b, _) = bytes_range(reader, start, Some(end));
        let (c, _) = bytes_range(reader, end, None);
        assert_eq!(format!("{a}{b}{c}"), text, "byte ranges tile the text");
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
        assert!(middle.len() >= 2 && middle.iter().all(|p| p.0 == 2));
        // Each piece's offset is its first character's: two bytes a character here.
        let mut at = 2u64;
        for piece in middle {
            assert_eq!(piece.1, at);
            at += piece.2 as u64 / 2;
        }
        assert_eq!(
            middle.iter().map(|p| p.2).sum::<usize>(),
            2 * TEXT_LINE_MAX_BYTES
        );
    }

    /// The range readers on `text` handed over in chunks of `chunk` bytes (the store
    /// hands over 1 MiB chunks, cut anywhere, even inside a character).
    fn chunked_ranges(
        text: &str,
        chunk: usize,
        range: (u64, Option<u64>),
        lines: bool,
    ) -> (String, RangeRead) {
        let mut stream = |sink: &mut dyn FnMut(&[u8]) -> ControlFlow<()>| {
            for piece in text.as_bytes().chunks(chunk.max(1)) {
                if sink(piece).is_break() {
                    break;
                }
            }
            Ok(())
        };
        let mut out = Vec::new();
        let read = if lines {
            lines_in(&mut stream, range.0, range.1, &mut out)
        } else {
            bytes_in(&mut stream, range.0, range.1, &mut out)
        };
        let read = read.unwrap().unwrap();
        assert_eq!(read.written, out.len() as u64);
        (String::from_utf8(out).expect("whole characters only"), read)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn ranges_cut_anywhere_in_the_stream_match_the_text_in_memory(
            text in "(?s)[a-zé日\n\r😀]{0,60}",
            chunk in 1usize..9,
            start in 0u64..70,
            len in 0u64..70,
            open_ended in any::<bool>(),
        ) {
            let end = (!open_ended).then_some(start + len);
            let (got, read) = chunked_ranges(&text, chunk, (start, end), false);
            prop_assert_eq!(got, expected_byte_range(&text, start, end));
            if end.is_none_or(|end| end > text.len() as u64) && end.is_none_or(|end| end > start) {
                prop_assert_eq!(read.total, Some(text.len() as u64));
            }
            let first = start % 12;
            let last = end.map(|_| first + len % 6);
            let (got, read) = chunked_ranges(&text, chunk, (first, last), true);
            let (want, total) = expected_line_range(&text, first, last);
            prop_assert_eq!(got, want);
            if last.is_none_or(|last| last > total) {
                prop_assert_eq!(read.total, Some(total));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn streamed_reads_match_the_value_in_memory(
            text in "(?s)[a-zé日\n\r\"\\\\\t😀\u{1}]{0,200}",
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

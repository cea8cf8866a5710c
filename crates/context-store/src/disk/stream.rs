//! Streaming a value out of a variable file without holding it: text unescaped to raw
//! UTF-8, anything else transcoded to (pretty) JSON, checked against the header's
//! size and sha256 as the bytes go by.
//!
//! This is how `vars get` prints a value of any size and how the text readers
//! ([`crate::TextReader`]) see a variable.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;

use serde_json::Value;

use super::header::{read_header_of, ParsedHeader};
use super::read::{read_value_in, value_in};
use super::unescape::{UnescapeError, Unescaper};
use super::STREAM_CHUNK_BYTES;
use crate::error::{Result, StoreError};
use crate::integrity::{self, HashingReader};
use crate::nofollow;
use crate::reference::VariableRef;

/// [`copy_text_value_in`] on the file at `path`.
#[cfg(test)]
pub(crate) fn copy_text_value(
    path: &Path,
    value_offset: u64,
    recorded: &VariableRef,
    out: &mut dyn Write,
) -> Result<()> {
    let file = nofollow::open_read(path, "open variable file")?;
    copy_text_value_in(file, path, value_offset, recorded, out)
}

/// Streams a text value (a JSON string at `value_offset`) to `out` as raw UTF-8,
/// unescaping on the fly; memory stays bounded.
///
/// The value is checked against `recorded` as it streams: a file too short for it
/// fails before anything is written; bytes that do not hash to the recorded sha256
/// fail at the end, after they were written (callers that must not emit an
/// unverified value buffer small ones).
///
/// `file` is already open: the one whose header gave `recorded`.
pub(super) fn copy_text_value_in(
    file: File,
    path: &Path,
    value_offset: u64,
    recorded: &VariableRef,
    out: &mut dyn Write,
) -> Result<()> {
    let (file, limit) = value_in(file, path, value_offset, recorded)?;
    let mut reader = BufReader::with_capacity(
        STREAM_CHUNK_BYTES,
        HashingReader::new(file.take(limit), limit),
    );
    let streamed = stream_text(&mut reader, out, path);
    let mut hashing = reader.into_inner();
    let drained = hashing.drain();
    let (hashed, sha) = hashing.finish();
    match streamed {
        // A failed write says nothing about the file.
        Err(e @ StoreError::Io { .. }) => return Err(e),
        Err(e) => {
            integrity::check_hash(path, recorded, hashed, &sha)?;
            return Err(e);
        }
        Ok(()) => {}
    }
    drained.map_err(|e| StoreError::io("read variable file", path, e))?;
    integrity::check_hash(path, recorded, hashed, &sha)
}

/// Unescapes the JSON string `reader` starts with into `out`.
fn stream_text(reader: &mut impl BufRead, out: &mut dyn Write, path: &Path) -> Result<()> {
    let corrupt = |reason: &str| StoreError::Corrupt {
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    let mut unescaper = Unescaper::default();
    let mut first = true;
    loop {
        let chunk = reader
            .fill_buf()
            .map_err(|e| StoreError::io("read variable file", path, e))?;
        if chunk.is_empty() {
            return Err(corrupt("the text value ends without a closing quote"));
        }
        let mut start = 0;
        if first {
            if chunk[0] != b'"' {
                return Err(corrupt("the value is not a JSON string"));
            }
            start = 1;
            first = false;
        }
        let len = chunk.len();
        let done = unescaper.feed(&chunk[start..], out).map_err(|e| match e {
            UnescapeError::Io(e) => StoreError::io("write the value of", path, e),
            UnescapeError::Bad(reason) => corrupt(reason),
        })?;
        if done {
            return Ok(());
        }
        reader.consume(len);
    }
}

/// [`copy_json_value_in`] on the file at `path`.
#[cfg(test)]
pub(crate) fn copy_json_value(
    path: &Path,
    value_offset: u64,
    recorded: &VariableRef,
    out: &mut dyn Write,
    pretty: bool,
) -> Result<()> {
    let file = nofollow::open_read(path, "open variable file")?;
    copy_json_value_in(file, path, value_offset, recorded, out, pretty)
}

/// Streams the value of the variable file at `path` to `out` — text raw, anything else
/// as JSON (pretty if asked) — reading its header and its value from one open file,
/// so a writer renaming a new version over `path` meanwhile can never pair one
/// version's header with another's value (that read failed as an integrity error).
/// Returns the reference the header records.
pub fn copy_value_of_file(path: &Path, out: &mut dyn Write, pretty: bool) -> Result<VariableRef> {
    let file = nofollow::open_read(path, "open variable file")?;
    let for_header = file
        .try_clone()
        .map_err(|e| StoreError::io("open variable file", path, e))?;
    let parsed = read_header_of(for_header, path)?;
    copy_value_in(file, path, &parsed, out, pretty)?;
    Ok(parsed.header.reference)
}

/// [`copy_value_of_file`] from a file already open, whose header is `parsed`.
pub(crate) fn copy_value_in(
    file: File,
    path: &Path,
    parsed: &ParsedHeader,
    out: &mut dyn Write,
    pretty: bool,
) -> Result<()> {
    let recorded = &parsed.header.reference;
    let Some(offset) = parsed.value_offset else {
        // Another program's layout: parsed whole (such files are written once).
        let value = read_value_in(file, path, None, recorded)?;
        write_value(&value, out, pretty)
            .map_err(|e| StoreError::io("write the value of", path, e))?;
        return Ok(());
    };
    let mut first = [0u8; 1];
    let is_text = std::os::unix::fs::FileExt::read_at(&file, &mut first, offset)
        .map_err(|e| StoreError::io("read variable file", path, e))?
        == 1
        && first[0] == b'"';
    if is_text {
        copy_text_value_in(file, path, offset, recorded, out)
    } else {
        copy_json_value_in(file, path, offset, recorded, out, pretty)
    }
}

/// Writes a value held in memory the way values are printed: text raw, anything else
/// as JSON (pretty if asked).
pub fn write_value(value: &Value, out: &mut dyn Write, pretty: bool) -> std::io::Result<()> {
    match value {
        Value::String(s) => out.write_all(s.as_bytes()),
        other if pretty => {
            serde_json::to_writer_pretty(&mut *out, other).map_err(std::io::Error::other)
        }
        other => serde_json::to_writer(&mut *out, other).map_err(std::io::Error::other),
    }
}

/// Streams a JSON value at `value_offset` to `out`, pretty-printed or compact, without
/// building it in memory (only individual strings are buffered).
///
/// Checked against `recorded` as it streams, like [`copy_text_value_in`].
///
/// `file` is already open: the one whose header gave `recorded`.
pub(super) fn copy_json_value_in(
    file: File,
    path: &Path,
    value_offset: u64,
    recorded: &VariableRef,
    out: &mut dyn Write,
    pretty: bool,
) -> Result<()> {
    let (file, limit) = value_in(file, path, value_offset, recorded)?;
    let mut hashing = HashingReader::new(file.take(limit), limit);
    let streamed = transcode_json(
        BufReader::with_capacity(STREAM_CHUNK_BYTES, &mut hashing),
        out,
        pretty,
        path,
    );
    let drained = hashing.drain();
    let (hashed, sha) = hashing.finish();
    match streamed {
        Err(e @ StoreError::Io { .. }) => return Err(e),
        Err(e) => {
            integrity::check_hash(path, recorded, hashed, &sha)?;
            return Err(e);
        }
        Ok(()) => {}
    }
    drained.map_err(|e| StoreError::io("read variable file", path, e))?;
    integrity::check_hash(path, recorded, hashed, &sha)
}

/// Transcodes one JSON value from `reader` to `out`.
fn transcode_json(reader: impl Read, out: &mut dyn Write, pretty: bool, path: &Path) -> Result<()> {
    let mut de = serde_json::Deserializer::from_reader(reader);
    // serde-transcode folds the writer's error into a message, so keep it aside.
    let mut out = ErrorKeepingWriter {
        inner: out,
        error: None,
    };
    let result = if pretty {
        let mut ser = serde_json::Serializer::pretty(&mut out);
        serde_transcode::transcode(&mut de, &mut ser)
    } else {
        let mut ser = serde_json::Serializer::new(&mut out);
        serde_transcode::transcode(&mut de, &mut ser)
    };
    result.map_err(|e| match out.error.take() {
        // A closed pipe or a full disk is an I/O failure, not a bad file.
        Some(write_error) => StoreError::io("write the value of", path, write_error),
        None if e.is_io() => StoreError::io("read variable file", path, io::Error::from(e)),
        None => StoreError::Corrupt {
            path: path.to_owned(),
            reason: e.to_string(),
        },
    })
}

/// Passes writes through and remembers the first error.
struct ErrorKeepingWriter<'a> {
    inner: &'a mut dyn Write,
    error: Option<io::Error>,
}

impl Write for ErrorKeepingWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf).inspect_err(|e| {
            self.error
                .get_or_insert_with(|| io::Error::new(e.kind(), e.to_string()));
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush().inspect_err(|e| {
            self.error
                .get_or_insert_with(|| io::Error::new(e.kind(), e.to_string()));
        })
    }
}

//! The on-disk format of one variable file, and atomic writes of it.
//!
//! ```text
//! {"formatVersion":1,"ref":{"id":…,"key":…,"scope":…,"type":…,"sizeBytes":…,"createdAt":…,"sha256":…},"persist":true,
//! "value":<the value as compact JSON>}
//! ```
//! It is one JSON object, compatible with the original TypeScript context store (`ref`, `value`, `persist`;
//! docs/store.md), so any
//! JSON parser reads it. The first line is the *header*: everything but the value,
//! ending in a comma. Opening a store reads only headers (a bounded read per file), and
//! the value starts at a known offset so a huge text can be streamed out without
//! parsing it whole. Files written by other programs (any key order, no `sha256`, no
//! `formatVersion`) are read by a streaming parse that skips the value.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Result, StoreError};
use crate::integrity::{self, HashingReader};
use crate::nofollow;
use crate::reference::VariableRef;

/// Version written in every file's `formatVersion`.
pub const FORMAT_VERSION: u32 = 1;

/// Longest header line read when opening a file.
const MAX_HEADER_BYTES: usize = 64 * 1024;

/// First read when looking for a header: one page holds any usual header line (a few
/// hundred bytes), and a store of 10 000 large values must not read 16 KiB of each
/// value on open (it made open 15% slower and read 160 MB for 10 000 files).
const HEADER_READ_BYTES: usize = 4 * 1024;

/// What separates the header line from the value.
const VALUE_PREFIX: &[u8] = b"\"value\":";

/// Spaces reserved in a streamed file's header for the final size digits.
const STREAM_HEADER_PAD: usize = 24;

/// Chunk size for streaming copies.
const STREAM_CHUNK_BYTES: usize = 1 << 20;

/// How writes reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// fsync the file and its directory before the rename is considered done.
    #[default]
    Fsync,
    /// Skip fsync (bulk loads, benchmarks); still atomic against concurrent readers.
    Bulk,
}

/// Everything in a variable file except the value.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileHeader {
    /// Format version; absent in files of other programs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format_version: Option<u32>,
    /// The variable's reference.
    #[serde(rename = "ref")]
    pub reference: VariableRef,
    /// Seed 002's persist flag.
    #[serde(default = "default_persist")]
    pub persist: bool,
}

fn default_persist() -> bool {
    true
}

/// A header together with where the value starts, when that is known.
#[derive(Debug, Clone)]
pub struct ParsedHeader {
    /// The header.
    pub header: FileHeader,
    /// Byte offset of the first byte of the value (files in our own layout only).
    pub value_offset: Option<u64>,
}

/// Serialises a value as compact JSON (the form that `sizeBytes` and `sha256` describe).
pub fn encode_value(value: &Value) -> Vec<u8> {
    // Serialising a `Value` into a Vec cannot fail: keys are strings, numbers are finite.
    serde_json::to_vec(value).unwrap_or_default()
}

/// Hex SHA-256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of a digest.
pub(crate) fn hex(digest: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(digest.len() * 2);
    for b in digest {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

fn header_line(header: &FileHeader, pad: usize) -> Vec<u8> {
    let mut line = serde_json::to_vec(header).unwrap_or_default();
    // `{…}` becomes `{…,` + padding + newline: the object continues with the value.
    line.pop();
    line.push(b',');
    line.extend(std::iter::repeat_n(b' ', pad));
    line.push(b'\n');
    line
}

/// Atomically writes a variable file: temp file in the same directory, optional fsync,
/// rename over `path`, optional fsync of the directory. Returns the value's offset.
pub fn write_file(
    path: &Path,
    header: &FileHeader,
    value: &[u8],
    durability: Durability,
) -> Result<u64> {
    let line = header_line(header, 0);
    let value_offset = (line.len() + VALUE_PREFIX.len()) as u64;
    write_atomically(path, durability, |file| {
        let mut out = io::BufWriter::with_capacity(64 * 1024, file);
        out.write_all(&line)?;
        out.write_all(VALUE_PREFIX)?;
        out.write_all(value)?;
        out.write_all(b"}")?;
        out.flush()
    })?;
    Ok(value_offset)
}

/// Streams UTF-8 text from `reader` into a variable file as a JSON string, computing
/// size and sha256 on the way; memory stays bounded whatever the length.
/// `header.reference`'s size and hash are filled in and returned.
pub fn write_text_streaming(
    path: &Path,
    header: FileHeader,
    reader: &mut dyn Read,
    source_name: &str,
    durability: Durability,
) -> Result<VariableRef> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let (staged, reference) = stage_text_streaming(dir, header, reader, source_name, durability)?;
    staged.publish(path)?;
    Ok(reference)
}

/// [`write_text_streaming`] up to, not including, the rename: the text lands in a
/// (locked) temp file in `dir`, fsynced if asked, and the caller publishes it with
/// [`Staged::publish`] — so a writer waiting for slow input (a pipe, a terminal) holds
/// no lock on the variable while it waits.
pub fn stage_text_streaming(
    dir: &Path,
    mut header: FileHeader,
    reader: &mut dyn Read,
    source_name: &str,
    durability: Durability,
) -> Result<(Staged, VariableRef)> {
    header.reference.size_bytes = 0;
    header.reference.sha256 = Some("0".repeat(64));
    let provisional = header_line(&header, STREAM_HEADER_PAD);
    let mut outcome: Option<Result<VariableRef>> = None;
    let written = stage(dir, durability, |file| {
        file.write_all(&provisional)?;
        file.write_all(VALUE_PREFIX)?;
        let mut out = io::BufWriter::with_capacity(STREAM_CHUNK_BYTES, &mut *file);
        let (size, sha) = match escape_stream(reader, &mut out, source_name) {
            Ok(done) => done,
            Err(e) => {
                outcome = Some(Err(e));
                return Err(io::Error::other("invalid text"));
            }
        };
        out.write_all(b"}")?;
        out.flush()?;
        drop(out);
        header.reference.size_bytes = size;
        header.reference.sha256 = Some(sha);
        let unpadded = header_line(&header, 0);
        let pad = provisional.len() - unpadded.len();
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&header_line(&header, pad))?;
        outcome = Some(Ok(header.reference.clone()));
        Ok(())
    });
    match (written, outcome) {
        (_, Some(Err(e))) => Err(e),
        (Err(e), _) => Err(e),
        (Ok(staged), Some(Ok(r))) => Ok((staged, r)),
        (Ok(staged), None) => Err(StoreError::Corrupt {
            path: staged.temp.path().to_owned(),
            reason: "stream ended early".into(),
        }),
    }
}

/// Copies `reader` into `out` as the body of a JSON string (with quotes), validating
/// UTF-8 across chunk boundaries. Returns (bytes written, sha256 of them).
///
/// Reading and escaping run on this thread, hashing and writing on a second one, a
/// chunk behind: a large context is copied in about the time of the slower half
/// instead of the sum.
fn escape_stream(
    reader: &mut dyn Read,
    out: &mut (dyn Write + Send),
    source_name: &str,
) -> Result<(u64, String)> {
    let io_err =
        |e: io::Error| StoreError::io("write variable file for", source_name.to_owned(), e);
    std::thread::scope(|scope| {
        let (chunks, inbox) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
        let (spent, recycled) = std::sync::mpsc::channel::<Vec<u8>>();
        let writer = scope.spawn(move || -> io::Result<(u64, String)> {
            let mut hasher = Sha256::new();
            let mut size: u64 = 0;
            for chunk in inbox {
                hasher.update(&chunk);
                size += chunk.len() as u64;
                out.write_all(&chunk)?;
                let _ = spent.send(chunk);
            }
            Ok((size, hex(&hasher.finalize())))
        });
        let escaped = escape_chunks(
            reader,
            source_name,
            |chunk| chunks.send(chunk).is_ok(),
            &recycled,
        );
        drop(chunks);
        let written = match writer.join() {
            Ok(written) => written.map_err(io_err),
            Err(_) => Err(io_err(io::Error::other("the writer thread panicked"))),
        };
        // A read or UTF-8 error is the cause when there is one (the writer then only
        // saw its input end early); otherwise the writer's own error (a full disk).
        match (escaped, written) {
            (Err(error), _) | (Ok(_), Err(error)) => Err(error),
            (Ok(true), Ok(done)) => Ok(done),
            (Ok(false), Ok(_)) => Err(io_err(io::Error::other("the writer stopped early"))),
        }
    })
}

/// Reads `reader` in chunks, validates them as UTF-8 (across chunk boundaries) and
/// hands each one's JSON-escaped form, the quotes included, to `send` (which says
/// whether it was taken). Buffers come back through `recycled`. `Ok(false)`: the
/// receiver stopped taking them (its own error says why).
fn escape_chunks(
    reader: &mut dyn Read,
    source_name: &str,
    mut send: impl FnMut(Vec<u8>) -> bool,
    recycled: &std::sync::mpsc::Receiver<Vec<u8>>,
) -> Result<bool> {
    if !send(b"\"".to_vec()) {
        return Ok(false);
    }
    let mut buf = vec![0u8; STREAM_CHUNK_BYTES];
    let mut carry = 0usize; // bytes of an incomplete UTF-8 sequence kept from the last chunk
    let mut consumed: u64 = 0; // input bytes before buf[0]
    loop {
        let n = match reader.read(&mut buf[carry..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(StoreError::io("read", source_name.to_owned(), e)),
        };
        let filled = carry + n;
        let at_end = n == 0;
        let valid = match std::str::from_utf8(&buf[..filled]) {
            Ok(s) => s.len(),
            Err(e) if e.error_len().is_none() && !at_end => e.valid_up_to(),
            Err(e) => {
                return Err(StoreError::InvalidUtf8 {
                    source_name: source_name.to_owned(),
                    offset: consumed + e.valid_up_to() as u64,
                })
            }
        };
        // SAFETY-free: `valid` bytes were just checked.
        let text = std::str::from_utf8(&buf[..valid]).unwrap_or_default();
        if !text.is_empty() {
            let mut escaped = recycled
                .try_recv()
                .unwrap_or_else(|_| Vec::with_capacity(STREAM_CHUNK_BYTES + 1024));
            escaped.clear();
            crate::escape::escape_into(text, &mut escaped);
            if !send(escaped) {
                return Ok(false);
            }
        }
        buf.copy_within(valid..filled, 0);
        carry = filled - valid;
        consumed += valid as u64;
        if at_end {
            break;
        }
    }
    Ok(send(b"\"".to_vec()))
}

/// Prefix of the temp files writers fill before renaming them into place.
pub const TEMP_PREFIX: &str = ".tmp-";

/// Suffix of those temp files.
pub const TEMP_SUFFIX: &str = ".partial";

/// A complete variable file in a temp file beside its destination, not yet visible to
/// readers. Its writer holds an exclusive `flock` on it until it is published or
/// dropped (dropping removes it), which is how a store opening later tells a live
/// writer's temp file from a killed one's.
#[derive(Debug)]
pub struct Staged {
    temp: tempfile::NamedTempFile,
    dir: PathBuf,
    durability: Durability,
}

impl Staged {
    /// Renames the temp file onto `path` (in the same directory) and, when durable,
    /// fsyncs the directory so the rename survives a crash.
    pub fn publish(self, path: &Path) -> Result<()> {
        self.temp
            .persist(path)
            .map_err(|e| StoreError::io("rename temporary file onto", path, e.error))?;
        if self.durability == Durability::Fsync {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }
}

/// Creates a locked temp file in `dir`, fills it and (when durable) fsyncs it.
fn stage(
    dir: &Path,
    durability: Durability,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<Staged> {
    let mut temp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .suffix(TEMP_SUFFIX)
        .tempfile_in(dir)
        .map_err(|e| StoreError::io("create a temporary file in", dir, e))?;
    if let Err(e) = temp.as_file().try_lock() {
        // Only costs the early clean-up of this file should we be killed.
        tracing::debug!("cannot lock temp file {}: {e}", temp.path().display());
    }
    let temp_path = temp.path().to_owned();
    fill(temp.as_file_mut()).map_err(|e| StoreError::io("write variable file", &temp_path, e))?;
    if durability == Durability::Fsync {
        temp.as_file()
            .sync_all()
            .map_err(|e| StoreError::io("fsync variable file", &temp_path, e))?;
    }
    Ok(Staged {
        temp,
        dir: dir.to_owned(),
        durability,
    })
}

fn write_atomically(
    path: &Path,
    durability: Durability,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    stage(dir, durability, fill)?.publish(path)
}

/// fsyncs a directory so a rename in it survives a crash.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("fsync directory", dir, e))
}

/// Reads the header of a variable file without reading its value (for files in our
/// layout: one bounded line). Files in another layout are parsed in a streaming pass
/// that skips the value.
pub fn read_header(path: &Path) -> Result<ParsedHeader> {
    read_header_with_metadata(path).map(|(parsed, _)| parsed)
}

/// [`read_header`], with the metadata of the very file read (taken from the open
/// descriptor, so a rename over `path` meanwhile cannot pair one file's header with
/// another's size).
pub fn read_header_with_metadata(path: &Path) -> Result<(ParsedHeader, std::fs::Metadata)> {
    let file = nofollow::open_read(path, "open variable file")?;
    let meta = file
        .metadata()
        .map_err(|e| StoreError::io("inspect variable file", path, e))?;
    read_header_of(file, path).map(|parsed| (parsed, meta))
}

fn read_header_of(file: File, path: &Path) -> Result<ParsedHeader> {
    let mut reader = BufReader::with_capacity(HEADER_READ_BYTES, file);
    let mut line = Vec::with_capacity(512);
    (&mut reader)
        .take(MAX_HEADER_BYTES as u64)
        .read_until(b'\n', &mut line)
        .map_err(|e| StoreError::io("read variable file", path, e))?;
    if let Some(parsed) = parse_own_header(&line, &mut reader) {
        return Ok(parsed);
    }
    reader
        .seek(SeekFrom::Start(0))
        .map_err(|e| StoreError::io("read variable file", path, e))?;
    // A foreign file is parsed whole: read it in big chunks.
    let reader = BufReader::with_capacity(STREAM_CHUNK_BYTES, reader.into_inner());
    parse_foreign_header(path, reader)
}

fn parse_own_header(line: &[u8], reader: &mut BufReader<File>) -> Option<ParsedHeader> {
    if line.last() != Some(&b'\n') {
        return None;
    }
    let trimmed = line.trim_ascii_end();
    let body = trimmed.strip_suffix(b",")?;
    let mut object = Vec::with_capacity(body.len() + 1);
    object.extend_from_slice(body);
    object.push(b'}');
    let header: FileHeader = serde_json::from_slice(&object).ok()?;
    header.format_version?;
    let mut prefix = [0u8; VALUE_PREFIX.len()];
    reader.read_exact(&mut prefix).ok()?;
    if prefix != VALUE_PREFIX {
        return None;
    }
    Some(ParsedHeader {
        header,
        value_offset: Some((line.len() + VALUE_PREFIX.len()) as u64),
    })
}

fn parse_foreign_header(path: &Path, reader: impl Read) -> Result<ParsedHeader> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Foreign {
        #[serde(default)]
        format_version: Option<u32>,
        #[serde(rename = "ref")]
        reference: VariableRef,
        #[serde(default = "default_persist")]
        persist: bool,
        #[expect(
            dead_code,
            reason = "only its presence is checked; the value is skipped"
        )]
        value: IgnoredAny,
    }
    let foreign: Foreign = serde_json::from_reader(reader).map_err(|e| StoreError::Corrupt {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    Ok(ParsedHeader {
        header: FileHeader {
            format_version: foreign.format_version,
            reference: foreign.reference,
            persist: foreign.persist,
        },
        value_offset: None,
    })
}

/// Reads a variable's value, checked against what `recorded` (its header's
/// reference) says: its size and sha256 for files in our layout (hashed while read),
/// the sha256 of its compact form for files of other programs that record one.
/// A value that is the recorded one but formatted differently (re-indented by hand)
/// passes; any other difference is [`StoreError::Integrity`].
pub fn read_value(path: &Path, value_offset: Option<u64>, recorded: &VariableRef) -> Result<Value> {
    let corrupt = |e: serde_json::Error| StoreError::Corrupt {
        path: path.to_owned(),
        reason: e.to_string(),
    };
    let mut file = nofollow::open_read(path, "open variable file")?;
    match value_offset {
        Some(offset) => {
            let len = file
                .metadata()
                .map_err(|e| StoreError::io("inspect variable file", path, e))?
                .len();
            integrity::check_length(path, offset, recorded, len)?;
            file.seek(SeekFrom::Start(offset))
                .map_err(|e| StoreError::io("read variable file", path, e))?;
            let mut reader = HashingReader::new(file, recorded.size_bytes);
            let mut bytes = Vec::with_capacity((len - offset) as usize);
            reader
                .read_to_end(&mut bytes)
                .map_err(|e| StoreError::io("read variable file", path, e))?;
            let (hashed, sha) = reader.finish();
            let raw_check = integrity::check_hash(path, recorded, hashed, &sha);
            // The value, then the object's closing brace (and maybe white space).
            let Some(body) = bytes.trim_ascii_end().strip_suffix(b"}") else {
                raw_check?;
                return Err(StoreError::Corrupt {
                    path: path.to_owned(),
                    reason: "the file does not end with the closing brace of its object".into(),
                });
            };
            let value = match (serde_json::from_slice::<Value>(body), raw_check) {
                (Ok(value), Ok(())) => value,
                (Ok(value), Err(raw_error)) => {
                    // The same value written differently is still the value.
                    let compact = sha256_hex(&encode_value(&value));
                    if recorded.sha256.as_deref() != Some(compact.as_str()) {
                        return Err(raw_error);
                    }
                    value
                }
                (Err(_), Err(raw_error)) => return Err(raw_error),
                (Err(e), Ok(())) => return Err(corrupt(e)),
            };
            Ok(value)
        }
        None => {
            #[derive(Deserialize)]
            struct WithValue {
                value: Value,
            }
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)
                .map_err(|e| StoreError::io("read variable file", path, e))?;
            let value = serde_json::from_slice::<WithValue>(&bytes)
                .map(|w| w.value)
                .map_err(corrupt)?;
            if let Some(want) = recorded.sha256.as_deref() {
                let found = sha256_hex(&encode_value(&value));
                if !want.eq_ignore_ascii_case(&found) {
                    return Err(integrity::mismatch(path, want, &found));
                }
            }
            Ok(value)
        }
    }
}

/// The sha256 of the value in `path` as it is now, checked against `recorded`: for a
/// file in our layout, one streaming pass over the value's bytes (no parse) when they
/// match; otherwise the value is read and its compact form hashed (see
/// [`read_value`]). Fails with [`StoreError::Integrity`] when the value is not the one
/// the header describes.
pub fn verified_sha256(
    path: &Path,
    value_offset: Option<u64>,
    recorded: &VariableRef,
) -> Result<String> {
    if let (Some(offset), Some(want)) = (value_offset, recorded.sha256.as_deref()) {
        let mut file = nofollow::open_read(path, "open variable file")?;
        let len = file
            .metadata()
            .map_err(|e| StoreError::io("inspect variable file", path, e))?
            .len();
        integrity::check_length(path, offset, recorded, len)?;
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| StoreError::io("read variable file", path, e))?;
        let mut reader = HashingReader::new(file.take(recorded.size_bytes), recorded.size_bytes);
        reader
            .drain()
            .map_err(|e| StoreError::io("read variable file", path, e))?;
        let (hashed, sha) = reader.finish();
        if integrity::check_hash(path, recorded, hashed, &sha).is_ok() {
            return Ok(want.to_owned());
        }
    }
    let value = read_value(path, value_offset, recorded)?;
    Ok(sha256_hex(&encode_value(&value)))
}

/// Streams a text value (a JSON string at `value_offset`) to `out` as raw UTF-8,
/// unescaping on the fly; memory stays bounded.
///
/// The value is checked against `recorded` as it streams: a file too short for it
/// fails before anything is written; bytes that do not hash to the recorded sha256
/// fail at the end, after they were written (callers that must not emit an
/// unverified value buffer small ones).
pub fn copy_text_value(
    path: &Path,
    value_offset: u64,
    recorded: &VariableRef,
    out: &mut dyn Write,
) -> Result<()> {
    let file = nofollow::open_read(path, "open variable file")?;
    copy_text_value_in(file, path, value_offset, recorded, out)
}

/// [`copy_text_value`] from a file already open (the one whose header gave
/// `recorded`).
fn copy_text_value_in(
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

/// Positions the open variable file `file` (at `path`) at its value, checking it can
/// hold the recorded value; returns the file and how many bytes of value to read (the
/// rest of the file when nothing is recorded).
fn value_in(
    mut file: File,
    path: &Path,
    value_offset: u64,
    recorded: &VariableRef,
) -> Result<(File, u64)> {
    let len = file
        .metadata()
        .map_err(|e| StoreError::io("inspect variable file", path, e))?
        .len();
    let limit = if recorded.sha256.is_some() {
        integrity::check_length(path, value_offset, recorded, len)?;
        recorded.size_bytes
    } else {
        len.saturating_sub(value_offset)
    };
    file.seek(SeekFrom::Start(value_offset))
        .map_err(|e| StoreError::io("read variable file", path, e))?;
    Ok((file, limit))
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

enum UnescapeError {
    Io(io::Error),
    Bad(&'static str),
}

/// Incremental JSON string unescaper (state survives chunk boundaries).
#[derive(Default)]
struct Unescaper {
    /// Bytes of an escape sequence seen so far (starting with `\`).
    pending: Vec<u8>,
    /// A high surrogate waiting for its low half.
    high_surrogate: Option<u16>,
    out_buf: Vec<u8>,
}

impl Unescaper {
    /// Feeds raw bytes; returns true when the closing quote was reached.
    fn feed(&mut self, mut bytes: &[u8], out: &mut dyn Write) -> Result<bool, UnescapeError> {
        self.out_buf.clear();
        let mut closed = false;
        while !bytes.is_empty() {
            if !self.pending.is_empty() {
                self.pending.push(bytes[0]);
                bytes = &bytes[1..];
                self.try_finish_escape()?;
                continue;
            }
            match bytes.iter().position(|&b| b == b'"' || b == b'\\') {
                None => {
                    self.flush_surrogate_check(bytes)?;
                    self.out_buf.extend_from_slice(bytes);
                    bytes = &[];
                }
                Some(i) => {
                    self.flush_surrogate_check(&bytes[..i])?;
                    self.out_buf.extend_from_slice(&bytes[..i]);
                    if bytes[i] == b'"' {
                        if self.high_surrogate.is_some() {
                            return Err(UnescapeError::Bad("unpaired surrogate in text value"));
                        }
                        closed = true;
                        break;
                    }
                    self.pending.push(b'\\');
                    bytes = &bytes[i + 1..];
                }
            }
        }
        out.write_all(&self.out_buf).map_err(UnescapeError::Io)?;
        Ok(closed)
    }

    fn flush_surrogate_check(&self, bytes: &[u8]) -> Result<(), UnescapeError> {
        if self.high_surrogate.is_some() && !bytes.is_empty() {
            return Err(UnescapeError::Bad("unpaired surrogate in text value"));
        }
        Ok(())
    }

    fn try_finish_escape(&mut self) -> Result<(), UnescapeError> {
        let simple = match self.pending.get(1).copied() {
            None => return Ok(()),
            Some(b'"') => Some(b'"'),
            Some(b'\\') => Some(b'\\'),
            Some(b'/') => Some(b'/'),
            Some(b'b') => Some(0x08),
            Some(b'f') => Some(0x0c),
            Some(b'n') => Some(b'\n'),
            Some(b'r') => Some(b'\r'),
            Some(b't') => Some(b'\t'),
            Some(b'u') => None,
            Some(_) => return Err(UnescapeError::Bad("invalid escape in text value")),
        };
        if let Some(byte) = simple {
            if self.high_surrogate.is_some() {
                return Err(UnescapeError::Bad("unpaired surrogate in text value"));
            }
            self.out_buf.push(byte);
            self.pending.clear();
            return Ok(());
        }
        if self.pending.len() < 6 {
            return Ok(());
        }
        let digits = std::str::from_utf8(&self.pending[2..6])
            .map_err(|_| UnescapeError::Bad("invalid \\u escape"))?;
        let unit = u16::from_str_radix(digits, 16)
            .map_err(|_| UnescapeError::Bad("invalid \\u escape"))?;
        self.pending.clear();
        let ch = match (self.high_surrogate.take(), unit) {
            (None, 0xD800..=0xDBFF) => {
                self.high_surrogate = Some(unit);
                return Ok(());
            }
            (Some(high), 0xDC00..=0xDFFF) => {
                let code =
                    0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                char::from_u32(code)
            }
            (Some(_), _) | (None, 0xDC00..=0xDFFF) => None,
            (None, _) => char::from_u32(u32::from(unit)),
        };
        let ch = ch.ok_or(UnescapeError::Bad("unpaired surrogate in text value"))?;
        let mut utf8 = [0u8; 4];
        self.out_buf
            .extend_from_slice(ch.encode_utf8(&mut utf8).as_bytes());
        Ok(())
    }
}

/// Streams a JSON value at `value_offset` to `out`, pretty-printed or compact, without
/// building it in memory (only individual strings are buffered).
///
/// Checked against `recorded` as it streams, like [`copy_text_value`].
pub fn copy_json_value(
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
    let recorded = parsed.header.reference;
    let Some(offset) = parsed.value_offset else {
        // Another program's layout: parsed whole (such files are written once).
        let value = read_value(path, None, &recorded)?;
        write_value(&value, out, pretty)
            .map_err(|e| StoreError::io("write the value of", path, e))?;
        return Ok(recorded);
    };
    let mut first = [0u8; 1];
    let is_text = std::os::unix::fs::FileExt::read_at(&file, &mut first, offset)
        .map_err(|e| StoreError::io("read variable file", path, e))?
        == 1
        && first[0] == b'"';
    if is_text {
        copy_text_value_in(file, path, offset, &recorded, out)?;
    } else {
        copy_json_value_in(file, path, offset, &recorded, out, pretty)?;
    }
    Ok(recorded)
}

/// Writes a value held in memory the way values are printed: text raw, anything else
/// as JSON (pretty if asked).
pub(crate) fn write_value(value: &Value, out: &mut dyn Write, pretty: bool) -> std::io::Result<()> {
    match value {
        Value::String(s) => out.write_all(s.as_bytes()),
        other if pretty => {
            serde_json::to_writer_pretty(&mut *out, other).map_err(std::io::Error::other)
        }
        other => serde_json::to_writer(&mut *out, other).map_err(std::io::Error::other),
    }
}

/// [`copy_json_value`] from a file already open (the one whose header gave
/// `recorded`).
fn copy_json_value_in(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::VariableType;
    use serde_json::json;

    fn header(key: &str, value: &[u8]) -> FileHeader {
        FileHeader {
            format_version: Some(FORMAT_VERSION),
            reference: VariableRef {
                id: "id".into(),
                key: key.into(),
                scope: "global".into(),
                var_type: VariableType::Text,
                size_bytes: value.len() as u64,
                created_at: 1,
                sha256: Some(sha256_hex(value)),
            },
            persist: true,
        }
    }

    #[test]
    fn written_file_is_plain_json_with_ref_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.json");
        let value = encode_value(&json!("hello\nworld"));
        write_file(&path, &header("k", &value), &value, Durability::Bulk).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(r#"{"formatVersion":1,"ref":{"id":"id","key":"k""#),
            "{text}"
        );
        let parsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["value"], json!("hello\nworld"));
        let h = read_header(&path).unwrap();
        assert_eq!(h.header.reference.key, "k");
        assert_eq!(
            read_value(&path, h.value_offset, &h.header.reference).unwrap(),
            json!("hello\nworld")
        );
    }

    #[test]
    fn streamed_text_matches_in_memory_encoding() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let text = "héllo \"q\" \\ \u{1}\t\n€😀".repeat(50_000);
        let mut reader = text.as_bytes();
        let r = write_text_streaming(
            &path,
            header("s", b""),
            &mut reader,
            "input",
            Durability::Bulk,
        )
        .unwrap();
        let expected = encode_value(&Value::String(text.clone()));
        assert_eq!(r.size_bytes, expected.len() as u64);
        assert_eq!(r.sha256.as_deref(), Some(sha256_hex(&expected).as_str()));
        let h = read_header(&path).unwrap();
        assert_eq!(h.header.reference, r);
        let mut out = Vec::new();
        copy_text_value(&path, h.value_offset.unwrap(), &r, &mut out).unwrap();
        assert_eq!(out, text.as_bytes());
        assert_eq!(
            read_value(&path, h.value_offset, &r).unwrap(),
            Value::String(text)
        );
    }

    #[test]
    fn invalid_utf8_names_the_offset_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.json");
        let mut bytes = vec![b'a'; 3_000_000];
        bytes[2_500_000] = 0xff;
        let err = write_text_streaming(
            &path,
            header("bad", b""),
            &mut bytes.as_slice(),
            "big.log",
            Durability::Bulk,
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::InvalidUtf8 {
                    offset: 2_500_000,
                    ..
                }
            ),
            "{err}"
        );
        assert!(!path.exists());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "temp file left behind"
        );
    }

    #[test]
    fn foreign_layout_without_sha256_is_readable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        std::fs::write(
            &path,
            r#"{"value": {"a": [1,2]}, "persist": true,
               "ref": {"id":"u","key":"f","scope":"global","type":"json","sizeBytes":13,"createdAt":5}}"#,
        )
        .unwrap();
        let h = read_header(&path).unwrap();
        assert_eq!(h.value_offset, None);
        assert_eq!(h.header.reference.sha256, None);
        assert_eq!(
            read_value(&path, None, &h.header.reference).unwrap(),
            json!({"a": [1, 2]})
        );
    }

    #[test]
    fn write_errors_while_streaming_json_are_io_errors() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::from(io::ErrorKind::BrokenPipe))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.json");
        let value = encode_value(&json!({"a": [1, 2, 3]}));
        let header = header("j", &value);
        let offset = write_file(&path, &header, &value, Durability::Bulk).unwrap();
        let err = copy_json_value(&path, offset, &header.reference, &mut Closed, true).unwrap_err();
        assert!(
            matches!(&err, StoreError::Io { source, .. } if source.kind() == io::ErrorKind::BrokenPipe),
            "{err:?}"
        );
    }

    #[test]
    fn json_value_streams_pretty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.json");
        let value = encode_value(&json!({"a": [1, {"b": "c"}]}));
        write_file(&path, &header("j", &value), &value, Durability::Bulk).unwrap();
        let h = read_header(&path).unwrap();
        let mut out = Vec::new();
        copy_json_value(
            &path,
            h.value_offset.unwrap(),
            &h.header.reference,
            &mut out,
            true,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            serde_json::to_string_pretty(&json!({"a": [1, {"b": "c"}]})).unwrap()
        );
    }
}

//! The header of a variable file: everything but the value, on the file's first line.
//!
//! Opening a store reads only headers, so reading one must stay a bounded read for the
//! files rlm writes (one line, ending in a comma, then `"value":`), and must still work
//! for files other programs wrote in any key order (a streaming parse that skips the
//! value). The header also tells where the value starts, which is what lets readers
//! stream a huge value without parsing the whole file.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use super::STREAM_CHUNK_BYTES;
use crate::error::{Result, StoreError};
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
pub(super) const VALUE_PREFIX: &[u8] = b"\"value\":";

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

/// The header line of `header`, padded with `pad` spaces before its newline.
pub(super) fn header_line(header: &FileHeader, pad: usize) -> Vec<u8> {
    let mut line = serde_json::to_vec(header).unwrap_or_default();
    // `{…}` becomes `{…,` + padding + newline: the object continues with the value.
    line.pop();
    line.push(b',');
    line.extend(std::iter::repeat_n(b' ', pad));
    line.push(b'\n');
    line
}

/// [`read_header_of`] on the file at `path`.
#[cfg(test)]
pub(crate) fn read_header(path: &Path) -> Result<ParsedHeader> {
    read_header_with_metadata(path).map(|(parsed, _)| parsed)
}

/// Reads the header of the variable file at `path` (see [`read_header_of`]), with the
/// metadata of the very file read (taken from the open descriptor, so a rename over
/// `path` meanwhile cannot pair one file's header with another's size).
pub fn read_header_with_metadata(path: &Path) -> Result<(ParsedHeader, std::fs::Metadata)> {
    let file = nofollow::open_read(path, "open variable file")?;
    let meta = file
        .metadata()
        .map_err(|e| StoreError::io("inspect variable file", path, e))?;
    read_header_of(file, path).map(|parsed| (parsed, meta))
}

/// Reads the header of a variable file without reading its value (for files in our
/// layout: one bounded line). Files in another layout are parsed in a streaming pass
/// that skips the value.
pub(crate) fn read_header_of(file: File, path: &Path) -> Result<ParsedHeader> {
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

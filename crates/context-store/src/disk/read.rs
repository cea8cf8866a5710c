//! Reading a value whole from a variable file, checked against its header.
//!
//! What `get` loads into memory and what compare-and-set compares: the value's bytes
//! are hashed while they are read ([`crate::integrity`]), and a value formatted
//! differently from how rlm writes it (re-indented by hand) still counts as the value
//! its header records when its compact form hashes to the recorded sha256.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::error::{Result, StoreError};
use crate::integrity::{self, encode_value, sha256_hex, HashingReader};
use crate::nofollow;
use crate::reference::VariableRef;

/// Reads a variable's value, checked against what `recorded` (its header's
/// reference) says: its size and sha256 for files in our layout (hashed while read),
/// the sha256 of its compact form for files of other programs that record one.
/// A value that is the recorded one but formatted differently (re-indented by hand)
/// passes; any other difference is [`StoreError::Integrity`].
pub fn read_value(path: &Path, value_offset: Option<u64>, recorded: &VariableRef) -> Result<Value> {
    let file = nofollow::open_read(path, "open variable file")?;
    read_value_in(file, path, value_offset, recorded)
}

/// [`read_value`] from a file already open (the one whose header gave `recorded`).
pub(crate) fn read_value_in(
    file: File,
    path: &Path,
    value_offset: Option<u64>,
    recorded: &VariableRef,
) -> Result<Value> {
    match value_offset {
        Some(offset) => {
            let (bytes, raw_check) = read_raw(file, path, offset, recorded)?;
            let body = value_body(&bytes, path, &raw_check)?;
            match (serde_json::from_slice::<Value>(body), raw_check) {
                (Ok(value), Ok(())) => Ok(value),
                (Ok(value), Err(raw_error)) => {
                    // The same value written differently is still the value.
                    same_value(value, recorded, raw_error)
                }
                (Err(_), Err(raw_error)) => Err(raw_error),
                (Err(e), Ok(())) => Err(corrupt(path, &e)),
            }
        }
        None => read_foreign_value(file, path, recorded),
    }
}

/// The value of the open variable file as compact JSON text, checked like
/// [`read_value`]: the bytes on disk when they are the recorded ones (no parse),
/// otherwise the value parsed and encoded again.
pub(crate) fn read_value_json_in(
    file: File,
    path: &Path,
    value_offset: Option<u64>,
    recorded: &VariableRef,
) -> Result<Vec<u8>> {
    let Some(offset) = value_offset else {
        return Ok(encode_value(&read_foreign_value(file, path, recorded)?));
    };
    let (mut bytes, raw_check) = read_raw(file, path, offset, recorded)?;
    let body_len = value_body(&bytes, path, &raw_check)?.len();
    match raw_check {
        Ok(()) if recorded.sha256.is_some() => {
            bytes.truncate(body_len);
            Ok(bytes)
        }
        // Unchecked (no recorded sha256) or formatted differently: parse it.
        raw_check => {
            let value = serde_json::from_slice::<Value>(&bytes[..body_len]);
            match (value, raw_check) {
                (Ok(value), Ok(())) => Ok(encode_value(&value)),
                (Ok(value), Err(raw_error)) => {
                    Ok(encode_value(&same_value(value, recorded, raw_error)?))
                }
                (Err(_), Err(raw_error)) => Err(raw_error),
                (Err(e), Ok(())) => Err(corrupt(path, &e)),
            }
        }
    }
}

/// The bytes of the open file from the value's offset to its end, and whether the
/// recorded size and sha256 describe them (hashed while read).
fn read_raw(
    mut file: File,
    path: &Path,
    offset: u64,
    recorded: &VariableRef,
) -> Result<(Vec<u8>, Result<()>)> {
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
    Ok((bytes, raw_check))
}

/// The value in `bytes` (read from its offset to the end of the file): everything
/// before the object's closing brace (and maybe white space).
fn value_body<'a>(bytes: &'a [u8], path: &Path, raw_check: &Result<()>) -> Result<&'a [u8]> {
    match bytes.trim_ascii_end().strip_suffix(b"}") {
        Some(body) => Ok(body),
        None => Err(match raw_check {
            Err(StoreError::Integrity { path, what, reason }) => StoreError::Integrity {
                path: path.clone(),
                what,
                reason: reason.clone(),
            },
            _ => StoreError::Corrupt {
                path: path.to_owned(),
                reason: "the file does not end with the closing brace of its object".into(),
            },
        }),
    }
}

/// `value` when its compact form hashes to the recorded sha256 (the recorded value,
/// written differently), else `raw_error`.
fn same_value(value: Value, recorded: &VariableRef, raw_error: StoreError) -> Result<Value> {
    let compact = sha256_hex(&encode_value(&value));
    if recorded.sha256.as_deref() != Some(compact.as_str()) {
        return Err(raw_error);
    }
    Ok(value)
}

/// The value of a file in another program's layout: parsed whole (such files are
/// written once), checked against the sha256 of its compact form when one is recorded.
fn read_foreign_value(mut file: File, path: &Path, recorded: &VariableRef) -> Result<Value> {
    #[derive(Deserialize)]
    struct WithValue {
        value: Value,
    }
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_end(&mut bytes))
        .map_err(|e| StoreError::io("read variable file", path, e))?;
    let value = serde_json::from_slice::<WithValue>(&bytes)
        .map(|w| w.value)
        .map_err(|e| corrupt(path, &e))?;
    if let Some(want) = recorded.sha256.as_deref() {
        let found = sha256_hex(&encode_value(&value));
        if !want.eq_ignore_ascii_case(&found) {
            return Err(integrity::mismatch(path, want, &found));
        }
    }
    Ok(value)
}

/// The error for a value that is not valid JSON.
fn corrupt(path: &Path, e: &serde_json::Error) -> StoreError {
    StoreError::Corrupt {
        path: path.to_owned(),
        reason: e.to_string(),
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

/// Positions the open variable file `file` (at `path`) at its value, checking it can
/// hold the recorded value; returns the file and how many bytes of value to read (the
/// rest of the file when nothing is recorded).
pub(super) fn value_in(
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

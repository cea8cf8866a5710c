//! Checking a value on disk against the size and sha256 its header records.
//!
//! A header can lie: a value edited by hand keeps its old `sha256`, a truncated copy
//! keeps its old `sizeBytes`. Readers therefore hash the value's bytes *while* they
//! read or stream them ([`HashingReader`]), never in a second pass, and compare at the
//! end ([`check_hash`]); a file too short for the value its header promises is caught
//! before a byte is read ([`check_length`]), so `vars get` never prints half of it.
//!
//! Only files in rlm's own layout (value at a known offset, `sha256` in the header)
//! can be checked byte for byte; for them, `sizeBytes` and `sha256` describe exactly
//! the bytes between the value's offset and the closing `}`: the compact JSON of the
//! value ([`encode_value`]), hashed by [`sha256_hex`].

use std::io::{self, Read};
use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Result, StoreError};
use crate::reference::VariableRef;

/// Serialises a value as compact JSON (the form that `sizeBytes` and `sha256` describe).
pub(crate) fn encode_value(value: &Value) -> Vec<u8> {
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

/// Passes reads through and hashes the first `limit` bytes that go by.
pub(crate) struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    hashed: u64,
    limit: u64,
}

impl<R: Read> HashingReader<R> {
    /// Hashes up to `limit` bytes read through `inner`.
    pub(crate) fn new(inner: R, limit: u64) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
            hashed: 0,
            limit,
        }
    }

    /// Reads (and hashes) whatever is left of the first `limit` bytes, so the hash
    /// covers them all even when the parser stopped early.
    pub(crate) fn drain(&mut self) -> io::Result<()> {
        let mut buf = [0u8; 8192];
        while self.hashed < self.limit {
            let want = (self.limit - self.hashed).min(buf.len() as u64) as usize;
            match self.read(&mut buf[..want]) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Bytes hashed and their hex sha256.
    pub(crate) fn finish(self) -> (u64, String) {
        (self.hashed, hex(&self.hasher.finalize()))
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let take = (n as u64).min(self.limit - self.hashed) as usize;
        self.hasher.update(&buf[..take]);
        self.hashed += take as u64;
        Ok(n)
    }
}

/// Fails unless a file of `file_len` bytes can hold the value `recorded` describes at
/// `value_offset`, followed by the closing `}` (our own layout).
pub(crate) fn check_length(
    path: &Path,
    value_offset: u64,
    recorded: &VariableRef,
    file_len: u64,
) -> Result<()> {
    let needed = value_offset
        .saturating_add(recorded.size_bytes)
        .saturating_add(1);
    if file_len < needed {
        return Err(StoreError::Integrity {
            path: path.to_owned(),
            what: "size",
            reason: format!(
                "the header records a {}-byte value but the file ends {} bytes short of it (truncated?)",
                recorded.size_bytes,
                needed - file_len
            ),
        });
    }
    Ok(())
}

/// Fails unless `hashed` bytes with hash `sha` are the value `recorded` describes.
/// Without a recorded sha256 (files of other programs) there is nothing to check.
pub(crate) fn check_hash(
    path: &Path,
    recorded: &VariableRef,
    hashed: u64,
    sha: &str,
) -> Result<()> {
    let Some(want) = recorded.sha256.as_deref() else {
        return Ok(());
    };
    if hashed != recorded.size_bytes {
        return Err(StoreError::Integrity {
            path: path.to_owned(),
            what: "size",
            reason: format!(
                "the header records {} bytes, the file holds {hashed}",
                recorded.size_bytes
            ),
        });
    }
    if !want.eq_ignore_ascii_case(sha) {
        return Err(mismatch(path, want, sha));
    }
    Ok(())
}

/// The error for a value whose bytes hash to `found` instead of `want`.
pub(crate) fn mismatch(path: &Path, want: &str, found: &str) -> StoreError {
    StoreError::Integrity {
        path: path.to_owned(),
        what: "sha256",
        reason: format!("the header records {want}, the value hashes to {found} (edited by hand?)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_only_the_first_limit_bytes() {
        let data = b"hello world";
        let mut reader = HashingReader::new(&data[..], 5);
        let mut out = Vec::new();
        reader.read_to_end(&mut out).unwrap();
        assert_eq!(out, data);
        let (n, sha) = reader.finish();
        assert_eq!(n, 5);
        assert_eq!(sha, sha256_hex(b"hello"));
    }

    #[test]
    fn drain_reads_up_to_the_limit() {
        let data = vec![7u8; 100_000];
        let mut reader = HashingReader::new(&data[..], 70_000);
        let mut first = [0u8; 10];
        reader.read_exact(&mut first).unwrap();
        reader.drain().unwrap();
        let (n, sha) = reader.finish();
        assert_eq!(n, 70_000);
        assert_eq!(sha, sha256_hex(&data[..70_000]));
    }
}

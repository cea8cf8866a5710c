//! Reading variables: values (from the cache, a variable file or the spill directory),
//! references, listings and summaries, and streaming a value of any size to a writer.
//!
//! Values written only to memory are hashed lazily; the readers that promise a
//! sha256 (`reference`, `list`, compare-and-set) compute it here on first use.

use std::fs;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::{Inner, Location, Store};
use crate::error::{Result, StoreError};
use crate::format;
use crate::key::{display_key, validate_key};
use crate::reference::{ListFilter, VariableRef};

impl Store {
    /// The value of `key`. Loaded from disk on first use; values larger than the memory
    /// ceiling are returned without being kept.
    pub fn get(&self, key: &str) -> Result<Arc<Value>> {
        validate_key(key)?;
        let mut inner = self.lock_inner();
        if let Some(value) = inner.cache.get(key) {
            return Ok(value);
        }
        let entry = self.entry(&mut inner, key)?;
        let (path, offset) = match &entry.location {
            Location::Disk {
                path, value_offset, ..
            } => (path.clone(), *value_offset),
            Location::Spilled { path, value_offset } => (path.clone(), *value_offset),
            Location::Memory => {
                return Err(StoreError::Corrupt {
                    path: self.canonical_path(key),
                    reason: "in-memory value missing from the cache".into(),
                })
            }
        };
        let value = format::read_value(&path, offset)?;
        inner.stats.values_loaded += 1;
        let value = Arc::new(value);
        let mut size = entry.reference.size_bytes;
        if entry.reference.sha256.is_none() {
            let bytes = format::encode_value(&value);
            size = bytes.len() as u64;
            if let Some(e) = inner.entries.get_mut(key) {
                e.reference.sha256 = Some(format::sha256_hex(&bytes));
                e.reference.size_bytes = size;
            }
        }
        self.cache_value(&mut inner, key, Arc::clone(&value), size)?;
        Ok(value)
    }

    /// Writes the value of `key` to `out`: text raw, anything else as JSON (pretty if
    /// asked). Values on disk are streamed, so this works for values of any size.
    pub fn write_value_to(&self, key: &str, out: &mut dyn Write, pretty: bool) -> Result<()> {
        validate_key(key)?;
        let mut inner = self.lock_inner();
        let entry = self.entry(&mut inner, key)?;
        if !inner.cache.contains(key) {
            if let Location::Disk {
                path,
                value_offset: Some(offset),
                ..
            } = &entry.location
            {
                let (path, offset) = (path.clone(), *offset);
                drop(inner);
                let first = peek_byte(&path, offset)?;
                return if first == Some(b'"') {
                    format::copy_text_value(&path, offset, out)
                } else {
                    format::copy_json_value(&path, offset, out, pretty)
                };
            }
        }
        drop(inner);
        let value = self.get(key)?;
        let written = match value.as_ref() {
            Value::String(s) => out.write_all(s.as_bytes()),
            other if pretty => {
                serde_json::to_writer_pretty(&mut *out, other).map_err(std::io::Error::other)
            }
            other => serde_json::to_writer(&mut *out, other).map_err(std::io::Error::other),
        };
        written.map_err(|e| StoreError::io("write the value of", self.canonical_path(key), e))
    }

    /// The reference (metadata only) of `key`.
    pub fn reference(&self, key: &str) -> Result<VariableRef> {
        validate_key(key)?;
        let mut inner = self.lock_inner();
        let entry = self.entry(&mut inner, key)?;
        if entry.reference.sha256.is_none() {
            if let Some(reference) = hash_cached(&mut inner, key) {
                return Ok(reference);
            }
        }
        Ok(entry.reference)
    }

    /// The current value of the variable `reference` points to.
    pub fn resolve(&self, reference: &VariableRef) -> Result<Arc<Value>> {
        self.get(&reference.key)
    }

    /// True when `key` exists (in memory or on disk).
    pub fn has(&self, key: &str) -> bool {
        if validate_key(key).is_err() {
            return false;
        }
        let mut inner = self.lock_inner();
        self.entry(&mut inner, key).is_ok()
    }

    /// The references of every variable passing `filter`, sorted by key.
    pub fn list(&self, filter: &ListFilter) -> Vec<VariableRef> {
        let mut inner = self.lock_inner();
        let unhashed: Vec<String> = inner
            .entries
            .iter()
            .filter(|(_, e)| e.reference.sha256.is_none() && matches!(e.location, Location::Memory))
            .map(|(key, _)| key.clone())
            .collect();
        for key in unhashed {
            hash_cached(&mut inner, &key);
        }
        let mut refs: Vec<VariableRef> = inner
            .entries
            .values()
            .map(|e| &e.reference)
            .filter(|r| filter.matches(r))
            .cloned()
            .collect();
        refs.sort_by(|a, b| a.key.cmp(&b.key));
        refs
    }

    /// A summary of `key` in about `max_tokens` tokens, cached by the value's sha256.
    pub fn summarize(&self, key: &str, max_tokens: usize) -> Result<String> {
        let value = self.get(key)?;
        let sha = self.reference(key)?.sha256.unwrap_or_default();
        let cache_key = (sha, max_tokens);
        if let Some(hit) = self.lock_inner().summaries.get(&cache_key) {
            return Ok(hit.clone());
        }
        let summary = self
            .options
            .summarizer
            .summarize(key, &value, max_tokens)
            .map_err(|message| StoreError::Summarize {
                key: display_key(key),
                message,
            })?;
        self.lock_inner()
            .summaries
            .insert(cache_key, summary.clone());
        Ok(summary)
    }
}

/// Computes and records the sha256 of a cached value that was stored unhashed.
pub(super) fn hash_cached(inner: &mut Inner, key: &str) -> Option<VariableRef> {
    let value = inner.cache.peek(key)?;
    let sha = format::sha256_hex(&format::encode_value(&value));
    let entry = inner.entries.get_mut(key)?;
    entry.reference.sha256 = Some(sha);
    Some(entry.reference.clone())
}

/// The byte at `offset` of `path` (`None` at the end of the file): tells a text value
/// (a JSON string) from any other.
fn peek_byte(path: &Path, offset: u64) -> Result<Option<u8>> {
    use std::io::{Seek, SeekFrom};
    let mut file =
        fs::File::open(path).map_err(|e| StoreError::io("open variable file", path, e))?;
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| StoreError::io("read variable file", path, e))?;
    let mut byte = [0u8; 1];
    match file.read(&mut byte) {
        Ok(1) => Ok(Some(byte[0])),
        Ok(_) => Ok(None),
        Err(e) => Err(StoreError::io("read variable file", path, e)),
    }
}

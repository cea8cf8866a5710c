//! Reading variables: values (from the cache, a variable file or the spill directory),
//! references, listings and summaries, and streaming a value of any size to a writer.
//!
//! Values written only to memory are hashed lazily; the readers that promise a
//! sha256 (`reference`, `list`, compare-and-set) compute it here on first use.
//!
//! Values read from disk are checked against the size and sha256 their header
//! records while they are read or streamed (see the `integrity` module), and every
//! read first checks that the index still describes the file (`revalidate`).

use std::fs;
use std::io::Write;
use std::sync::Arc;

use serde_json::Value;

use super::{Entry, FileIdentity, Inner, Location, Store};
use crate::disk;
use crate::error::{Result, StoreError};
use crate::integrity;
use crate::key::{display_key, validate_key};
use crate::reference::{ListFilter, VariableRef};

impl Store {
    /// The value of `key`. Loaded from disk on first use; values larger than the memory
    /// ceiling are returned without being kept.
    pub fn get(&self, key: &str) -> Result<Arc<Value>> {
        validate_key(key)?;
        let mut inner = self.lock_inner();
        self.revalidate(&mut inner, key)?;
        if let Some(value) = inner.cache.get(key) {
            return Ok(value);
        }
        self.load(&mut inner, key)
    }

    /// The value of `key` together with the reference that describes that very value.
    /// Calling [`get`](Self::get) then [`reference`](Self::reference) may pair a value
    /// with the reference of a newer one written by another process in between; a
    /// read-modify-[`compare_and_set`](Self::compare_and_set) loop must use this.
    pub fn get_with_reference(&self, key: &str) -> Result<(Arc<Value>, VariableRef)> {
        validate_key(key)?;
        let mut inner = self.lock_inner();
        self.revalidate(&mut inner, key)?;
        let value = match inner.cache.get(key) {
            Some(value) => value,
            None => self.load(&mut inner, key)?,
        };
        let reference = match inner.entries.get(key) {
            Some(entry) if entry.reference.sha256.is_some() => entry.reference.clone(),
            _ => hash_cached(&mut inner, key).ok_or_else(|| StoreError::NotFound {
                key: display_key(key),
            })?,
        };
        Ok((value, reference))
    }

    /// Reads `key`'s value from disk (checked against its header) and caches it.
    fn load(&self, inner: &mut Inner, key: &str) -> Result<Arc<Value>> {
        let mut attempt = 0;
        let (entry, value) = loop {
            attempt += 1;
            let entry = self.entry(inner, key)?;
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
            match disk::read_value(&path, offset, &entry.reference) {
                Ok(value) => break (entry, value),
                // Another process replaced the file between its header and its value:
                // read the new one.
                Err(StoreError::Integrity { .. } | StoreError::Corrupt { .. })
                    if attempt < MAX_READ_ATTEMPTS && replaced(&entry) => {}
                Err(e) => return Err(e),
            }
        };
        inner.stats.values_loaded += 1;
        let value = Arc::new(value);
        let mut size = entry.reference.size_bytes;
        if entry.reference.sha256.is_none() {
            let bytes = integrity::encode_value(&value);
            size = bytes.len() as u64;
            if let Some(e) = inner.entries.get_mut(key) {
                e.reference.sha256 = Some(integrity::sha256_hex(&bytes));
                e.reference.size_bytes = size;
            }
        }
        self.cache_value(inner, key, Arc::clone(&value), size)?;
        Ok(value)
    }

    /// Writes the value of `key` to `out`: text raw, anything else as JSON (pretty if
    /// asked), and for a `file` variable the contents of the file it refers to (checked
    /// against the reference: [`StoreError::FileChanged`] when it changed). Values on disk are streamed, so this works for values of any size, and
    /// checked against their recorded size and sha256 on the way: a file too short
    /// for its value fails before anything is written, other mismatches fail once the
    /// bytes went out (buffer the output when that matters).
    pub fn write_value_to(&self, key: &str, out: &mut dyn Write, pretty: bool) -> Result<()> {
        validate_key(key)?;
        let mut inner = self.lock_inner();
        let entry = self.entry(&mut inner, key)?;
        if entry.reference.var_type == crate::VariableType::File {
            drop(inner);
            return self.copy_referenced_file(key, out);
        }
        if !inner.cache.contains(key) {
            if let Location::Disk {
                path,
                value_offset: Some(_),
                ..
            } = &entry.location
            {
                let path = path.clone();
                drop(inner);
                // Header and value from one open file: another process may rename a
                // new version over it at any moment.
                return disk::copy_value_of_file(&path, out, pretty).map(drop);
            }
        }
        drop(inner);
        let value = self.get(key)?;
        disk::write_value(&value, out, pretty)
            .map_err(|e| StoreError::io("write the value of", self.canonical_path(key), e))
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

    /// The sha256 of what `key` holds right now, checked against the file's contents
    /// rather than taken from its header: what memoised calls are keyed on, so an
    /// answer cached for one value is never returned for another. The check (one
    /// streaming pass over the value) is remembered until the file changes; a value
    /// that does not match its header fails with [`StoreError::Integrity`].
    pub fn content_sha256(&self, key: &str) -> Result<String> {
        validate_key(key)?;
        let mut inner = self.lock_inner();
        let entry = self.entry(&mut inner, key)?;
        let (path, offset, identity) = match &entry.location {
            Location::Disk { verified: true, .. } | Location::Spilled { .. } => {
                if let Some(sha) = entry.reference.sha256.clone() {
                    return Ok(sha);
                }
                drop(inner);
                return self.hash_of_value(key);
            }
            Location::Memory => {
                if let Some(sha) = entry.reference.sha256.clone() {
                    return Ok(sha);
                }
                if let Some(sha) = hash_cached(&mut inner, key).and_then(|r| r.sha256) {
                    return Ok(sha);
                }
                drop(inner);
                return self.hash_of_value(key);
            }
            Location::Disk {
                path,
                value_offset,
                identity,
                ..
            } => (path.clone(), *value_offset, *identity),
        };
        drop(inner);
        let sha = disk::verified_sha256(&path, offset, &entry.reference)?;
        let mut inner = self.lock_inner();
        if let Some(Entry {
            reference,
            location:
                Location::Disk {
                    identity: now,
                    verified,
                    ..
                },
        }) = inner.entries.get_mut(key)
        {
            let same_file = matches!((identity, *now), (Some(a), Some(b)) if a.same_file(&b));
            if same_file && *reference == entry.reference {
                *verified = true;
                reference.sha256.get_or_insert_with(|| sha.clone());
            }
        }
        Ok(sha)
    }

    /// The sha256 of the compact serialisation of `key`'s value, read through `get`.
    fn hash_of_value(&self, key: &str) -> Result<String> {
        let value = self.get(key)?;
        Ok(integrity::sha256_hex(&integrity::encode_value(&value)))
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
            .map_err(|error| StoreError::Summarize {
                key: display_key(key),
                error,
            })?;
        self.lock_inner()
            .summaries
            .insert(cache_key, summary.clone());
        Ok(summary)
    }
}

/// Reads of a value whose file other processes keep replacing give up after this many
/// tries (each sees a newer file, so this only ends a pathological race).
const MAX_READ_ATTEMPTS: u32 = 4;

/// True when `entry`'s file is no longer the one it describes.
fn replaced(entry: &Entry) -> bool {
    match &entry.location {
        Location::Disk {
            path,
            identity: Some(seen),
            ..
        } => fs::symlink_metadata(path)
            .map(|meta| !seen.same_file(&FileIdentity::of(&meta)))
            .unwrap_or(true),
        _ => false,
    }
}

/// Computes and records the sha256 of a cached value that was stored unhashed.
pub(super) fn hash_cached(inner: &mut Inner, key: &str) -> Option<VariableRef> {
    let value = inner.cache.peek(key)?;
    let sha = integrity::sha256_hex(&integrity::encode_value(&value));
    let entry = inner.entries.get_mut(key)?;
    entry.reference.sha256 = Some(sha);
    Some(entry.reference.clone())
}

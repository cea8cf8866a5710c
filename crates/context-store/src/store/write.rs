//! Writing variables: plain and compare-and-set writes, text streamed in from a reader,
//! deletion, and making an in-memory value a file a sub-agent can read.
//!
//! Every write to disk holds the key's lock file, so writers in other processes
//! serialise with it, and ends by indexing the new file with its identity, so the next
//! refresh does not read the header again. Text streamed from a reader is written to
//! a temp file first and the lock is taken only to publish it, so a writer waiting
//! for its input (a pipe, a terminal) never blocks the other writers of the key.
//! Deleting a variable also removes its lock file, while holding it (see `lock`).

use std::fs;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::{read, remove_if_exists, Entry, FileIdentity, Inner, Location, Store};
use crate::disk::{self, FileHeader, FORMAT_VERSION};
use crate::error::{Result, StoreError};
use crate::integrity;
use crate::key::{display_key, validate_key};
use crate::private_fs::Durability;
use crate::reference::{Expected, SetOptions, VariableRef, VariableType, GLOBAL_SCOPE};

impl Store {
    /// Stores `value` under `key`, replacing any previous value. Persisted (and fsynced
    /// unless the store is in bulk mode) unless `opts.persist` is false.
    pub fn set(&self, key: &str, value: Value, opts: SetOptions) -> Result<VariableRef> {
        validate_key(key)?;
        let bytes = integrity::encode_value(&value);
        // In-memory values are hashed lazily (first reference/list/CAS/spill): hashing
        // costs as much as serialising, and most scratch values are never asked for it.
        let reference = new_reference(key, &opts, &value, &bytes, opts.persist);
        let mut inner = self.lock_inner();
        if opts.persist {
            let _lock = self.lock_key(key)?;
            let durability = opts.durability.unwrap_or(self.options.durability);
            self.write_to_disk_with(&mut inner, reference.clone(), &bytes, durability)?;
        } else {
            self.forget_disk_copy(&mut inner, key);
            inner.entries.insert(
                key.to_owned(),
                Entry {
                    reference: reference.clone(),
                    location: Location::Memory,
                },
            );
        }
        drop(bytes);
        self.cache_value(&mut inner, key, Arc::new(value), reference.size_bytes)?;
        Ok(reference)
    }

    /// Stores `value` under `key` only if the variable's current sha256 is what
    /// `expected` says (or it does not exist, for [`Expected::Absent`]). Serialised
    /// with every other writer of `key`, in any process. Always persists.
    pub fn compare_and_set(
        &self,
        key: &str,
        expected: &Expected,
        value: Value,
        opts: SetOptions,
    ) -> Result<VariableRef> {
        let durability = opts.durability.unwrap_or(self.options.durability);
        self.compare_and_set_with(key, expected, value, opts, durability)
    }

    /// [`compare_and_set`](Self::compare_and_set) written with `durability` instead of
    /// the store's. [`Durability::Bulk`] is for values derived from something the
    /// caller still holds (a sub-agent's captured output): the write stays atomic for
    /// readers and survives `kill -9`, but skips the two fsyncs (milliseconds each on a
    /// slow disk), so a power failure may leave the file empty or missing.
    pub fn compare_and_set_with(
        &self,
        key: &str,
        expected: &Expected,
        value: Value,
        opts: SetOptions,
        durability: Durability,
    ) -> Result<VariableRef> {
        validate_key(key)?;
        let bytes = integrity::encode_value(&value);
        let reference = new_reference(key, &opts, &value, &bytes, true);
        let mut inner = self.lock_inner();
        let _lock = self.lock_key(key)?;
        let actual = self.current_sha256(&mut inner, key)?;
        let matches = match (expected, &actual) {
            (Expected::Absent, None) => true,
            (Expected::Sha256(want), Some(have)) => want.eq_ignore_ascii_case(have),
            _ => false,
        };
        if !matches {
            return Err(StoreError::Conflict {
                key: display_key(key),
                expected: expected.to_string(),
                actual: actual.unwrap_or_else(|| "none".to_owned()),
            });
        }
        self.write_to_disk_with(&mut inner, reference.clone(), &bytes, durability)?;
        drop(bytes);
        self.cache_value(&mut inner, key, Arc::new(value), reference.size_bytes)?;
        Ok(reference)
    }

    /// Streams UTF-8 text from `reader` into the variable `key` (type `text` unless
    /// `opts` says otherwise) without holding it in memory; `source_name` names the
    /// input in errors. Always persists. Invalid UTF-8 fails with its byte offset and
    /// leaves the previous value untouched.
    pub fn set_text_from_reader(
        &self,
        key: &str,
        reader: &mut dyn Read,
        source_name: &str,
        opts: SetOptions,
    ) -> Result<VariableRef> {
        validate_key(key)?;
        let durability = opts.durability.unwrap_or(self.options.durability);
        let header = FileHeader {
            format_version: Some(FORMAT_VERSION),
            reference: VariableRef {
                id: uuid::Uuid::new_v4().to_string(),
                key: key.to_owned(),
                scope: opts.scope.unwrap_or_else(|| GLOBAL_SCOPE.to_owned()),
                var_type: opts.var_type.unwrap_or(VariableType::Text),
                size_bytes: 0,
                created_at: now_ms(),
                sha256: None,
            },
            persist: true,
        };
        // Neither the store's mutex nor the key's lock is held while the input is read.
        let (staged, reference) = disk::stage_text_streaming(
            &self.variables_dir,
            header,
            reader,
            source_name,
            durability,
        )?;
        let mut inner = self.lock_inner();
        let _lock = self.lock_key(key)?;
        let path = self.target_path(&inner, key);
        staged.publish(&path)?;
        self.forget_value(&mut inner, key);
        let (parsed, meta) = disk::read_header_with_metadata(&path)?;
        inner.stats.headers_read += 1;
        let identity = Some(FileIdentity::of(&meta));
        inner.entries.insert(
            key.to_owned(),
            Entry {
                reference: reference.clone(),
                location: Location::Disk {
                    path,
                    value_offset: parsed.value_offset,
                    identity,
                    verified: true,
                },
            },
        );
        Ok(reference)
    }

    /// Removes `key` from memory and disk, and its lock file. A file at the key's
    /// path that cannot be used (corrupt, not matching its sha256, a symlink) is
    /// removed all the same: that is how a user gets rid of it.
    pub fn delete(&self, key: &str) -> Result<()> {
        validate_key(key)?;
        let mut inner = self.lock_inner();
        let lock = self.lock_key(key)?;
        let removed = match self.entry(&mut inner, key) {
            Ok(entry) => {
                match &entry.location {
                    Location::Disk { path, .. } | Location::Spilled { path, .. } => {
                        remove_if_exists(path)?
                    }
                    Location::Memory => {}
                }
                Ok(())
            }
            Err(e @ StoreError::NotFound { .. }) => Err(e),
            Err(e) => {
                let path = self.canonical_path(key);
                if fs::symlink_metadata(&path).is_err() {
                    return Err(e);
                }
                tracing::info!("removing unusable variable file {}: {e}", path.display());
                remove_if_exists(&path)
            }
        };
        inner.entries.remove(key);
        inner.cache.remove(key);
        lock.remove()?;
        removed
    }

    /// Removes every variable this store knows of (after a refresh), from memory and
    /// disk, and the lock files no process holds. Unreadable files are left alone.
    /// Returns how many variables were removed.
    pub fn clear(&self) -> Result<usize> {
        self.refresh()?;
        let mut inner = self.lock_inner();
        let keys: Vec<String> = inner.entries.keys().cloned().collect();
        for key in &keys {
            let lock = self.lock_key(key)?;
            if let Some(entry) = inner.entries.remove(key) {
                if let Location::Disk { path, .. } | Location::Spilled { path, .. } =
                    &entry.location
                {
                    remove_if_exists(path)?;
                }
            }
            lock.remove()?;
        }
        inner.cache.clear();
        inner.summaries.clear();
        crate::lock::remove_idle_lock_files(&self.locks_dir)?;
        Ok(keys.len())
    }

    /// Makes sure `key` is on disk in `variables/` and returns the file's absolute path,
    /// for a sub-agent to read.
    pub fn persist_for_sub_agent(&self, key: &str) -> Result<PathBuf> {
        validate_key(key)?;
        let mut inner = self.lock_inner();
        let entry = self.entry(&mut inner, key)?;
        if let Location::Disk { path, .. } = &entry.location {
            return Ok(path.clone());
        }
        drop(inner);
        let value = self.get(key)?;
        let mut inner = self.lock_inner();
        let _lock = self.lock_key(key)?;
        let bytes = integrity::encode_value(&value);
        let mut reference = entry.reference;
        reference.sha256 = Some(integrity::sha256_hex(&bytes));
        if let Location::Spilled { path, .. } = &entry.location {
            remove_if_exists(path)?;
        }
        self.write_to_disk(&mut inner, reference, &bytes)?;
        Ok(self.canonical_path(key))
    }

    /// The sha256 the variable has right now, reading the disk (another process may
    /// have written it) and checking the value against it, so a value edited by hand
    /// under an old header never matches that header's sha256 (it fails with
    /// [`StoreError::Integrity`] instead). The check is skipped when this store wrote
    /// or checked this very file. Caller holds the key lock.
    fn current_sha256(&self, inner: &mut Inner, key: &str) -> Result<Option<String>> {
        let path = self.target_path(inner, key);
        match fs::symlink_metadata(&path) {
            Ok(meta) => {
                if meta.file_type().is_symlink() {
                    return Err(StoreError::Symlink { path });
                }
                let (parsed, meta) = self.read_checked_header(inner, &path, key)?;
                let now = FileIdentity::of(&meta);
                let known = matches!(inner.entries.get(key), Some(Entry {
                    reference,
                    location: Location::Disk { identity: Some(seen), verified: true, .. },
                }) if seen.same_file(&now) && *reference == parsed.header.reference);
                if let (true, Some(sha)) = (known, &parsed.header.reference.sha256) {
                    return Ok(Some(sha.clone()));
                }
                let sha =
                    disk::verified_sha256(&path, parsed.value_offset, &parsed.header.reference)?;
                Ok(Some(sha))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let in_memory = match inner.entries.get(key) {
                    Some(Entry {
                        location: Location::Memory | Location::Spilled { .. },
                        reference,
                    }) => Some(reference.sha256.clone()),
                    _ => None,
                };
                Ok(match in_memory {
                    Some(Some(sha)) => Some(sha),
                    // Stored unhashed in memory (spilled values are hashed when spilled).
                    Some(None) => read::hash_cached(inner, key).and_then(|r| r.sha256),
                    None => None,
                })
            }
            Err(e) => Err(StoreError::io("inspect variable file", path, e)),
        }
    }

    /// Writes a variable file for `reference` and indexes it. Caller holds the key lock.
    fn write_to_disk(&self, inner: &mut Inner, reference: VariableRef, bytes: &[u8]) -> Result<()> {
        self.write_to_disk_with(inner, reference, bytes, self.options.durability)
    }

    /// [`Self::write_to_disk`] with the given durability.
    fn write_to_disk_with(
        &self,
        inner: &mut Inner,
        reference: VariableRef,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<()> {
        let key = reference.key.clone();
        let path = self.target_path(inner, &key);
        let header = FileHeader {
            format_version: Some(FORMAT_VERSION),
            reference,
            persist: true,
        };
        let value_offset = disk::write_file(&path, &header, bytes, durability)?;
        if let Some(Entry {
            location: Location::Spilled { path: spilled, .. },
            ..
        }) = inner.entries.get(&key)
        {
            remove_if_exists(spilled)?;
        }
        let identity = fs::symlink_metadata(&path)
            .ok()
            .map(|m| FileIdentity::of(&m));
        let value_offset = Some(value_offset);
        inner.entries.insert(
            key,
            Entry {
                reference: header.reference,
                location: Location::Disk {
                    path,
                    value_offset,
                    identity,
                    verified: true,
                },
            },
        );
        Ok(())
    }

    /// Before a memory-only write replaces a persisted variable, removes its file so
    /// other processes do not keep reading the old value.
    fn forget_disk_copy(&self, inner: &mut Inner, key: &str) {
        if let Some(Entry {
            location: Location::Disk { path, .. } | Location::Spilled { path, .. },
            ..
        }) = inner.entries.get(key)
        {
            let _ = fs::remove_file(path);
        }
        self.forget_value(inner, key);
    }

    fn forget_value(&self, inner: &mut Inner, key: &str) {
        inner.cache.remove(key);
    }
}

/// The reference of a new value of `key`; hashed now only if `hash` (see
/// [`Store::set`] on lazy hashing).
fn new_reference(
    key: &str,
    opts: &SetOptions,
    value: &Value,
    bytes: &[u8],
    hash: bool,
) -> VariableRef {
    VariableRef {
        id: uuid::Uuid::new_v4().to_string(),
        key: key.to_owned(),
        scope: opts
            .scope
            .clone()
            .unwrap_or_else(|| GLOBAL_SCOPE.to_owned()),
        var_type: opts.var_type.unwrap_or_else(|| VariableType::infer(value)),
        size_bytes: bytes.len() as u64,
        created_at: now_ms(),
        sha256: hash.then(|| integrity::sha256_hex(bytes)),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

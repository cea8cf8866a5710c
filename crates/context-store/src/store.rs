//! The store: variables indexed by key, values on disk and (bounded) in memory.
//!
//! One `Store` is shared by the threads of a process (`&self` methods, one mutex).
//! Other processes — sub-agents, the CLI — work on the same directory; they see each
//! other's writes through [`Store::refresh`], [`Store::wait_for`] and by the store
//! probing the disk whenever a key is not in its index. Writers of one key serialise on
//! that key's lock file, which is what makes [`Store::compare_and_set`] lose nothing.

use std::collections::HashMap;
use std::fs::{self, DirBuilder};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::cache::ValueCache;
use crate::error::{Result, StoreError};
use crate::format::{self, Durability, FileHeader, FORMAT_VERSION};
use crate::key::{self, display_key, validate_key};
use crate::lock::KeyLock;
use crate::reference::{Expected, ListFilter, SetOptions, VariableRef, VariableType, GLOBAL_SCOPE};
use crate::summary::{Summarizer, TruncatingSummarizer};

/// Default memory ceiling: 256 MiB.
pub const DEFAULT_MEMORY_CEILING_BYTES: u64 = 256 * 1024 * 1024;

/// Default time to wait for another process's lock on a variable.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(30);

/// Sub-directory of the data dir holding variable files.
pub const VARIABLES_DIR: &str = "variables";

/// Sub-directory holding one lock file per key ever written.
pub const LOCKS_DIR: &str = "locks";

/// Sub-directory holding spilled in-memory values of live stores.
pub const SPILL_DIR: &str = "spill";

/// Temp files of writers older than this are leftovers of a killed process (a write
/// of even a gigabyte takes seconds) and are removed when a store opens.
pub const STALE_TEMP_AGE: Duration = Duration::from_secs(3600);

/// How a store is opened.
#[derive(Clone)]
pub struct StoreOptions {
    /// Values beyond this many bytes in memory are spilled, least recently used first.
    pub memory_ceiling_bytes: u64,
    /// Whether writes are fsynced.
    pub durability: Durability,
    /// How long to wait for another writer of the same key.
    pub lock_timeout: Duration,
    /// Produces `summarize` output.
    pub summarizer: Arc<dyn Summarizer>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            memory_ceiling_bytes: DEFAULT_MEMORY_CEILING_BYTES,
            durability: Durability::Fsync,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            summarizer: Arc::new(TruncatingSummarizer),
        }
    }
}

impl std::fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreOptions")
            .field("memory_ceiling_bytes", &self.memory_ceiling_bytes)
            .field("durability", &self.durability)
            .field("lock_timeout", &self.lock_timeout)
            .finish_non_exhaustive()
    }
}

/// A file in `variables/` that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanProblem {
    /// The file.
    pub path: PathBuf,
    /// What is wrong, in words.
    pub message: String,
}

/// What a [`Store::refresh`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RefreshReport {
    /// Keys that appeared.
    pub added: Vec<String>,
    /// Keys whose file changed.
    pub changed: Vec<String>,
    /// Keys whose file disappeared.
    pub removed: Vec<String>,
}

/// Counters, for tests, benchmarks and `vars` diagnostics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StoreStats {
    /// Variables in the index.
    pub variables: usize,
    /// Values currently held in memory.
    pub values_in_memory: usize,
    /// Bytes of values held in memory.
    pub memory_bytes: u64,
    /// Headers read from disk (open, refresh, probes).
    pub headers_read: u64,
    /// Values read from disk.
    pub values_loaded: u64,
    /// Values written to the spill directory.
    pub values_spilled: u64,
}

/// How recently before we looked a file may have been modified for its identity to be
/// "racy" (see [`FileIdentity::racy`]): more than the coarsest common timestamp
/// granularity (1 s on ext3, HFS+ and some network file systems).
const RACY_WINDOW_NS: i128 = 2_000_000_000;

/// Identity of a file as last seen, to notice other processes' writes.
#[derive(Debug, Clone, Copy)]
struct FileIdentity {
    len: u64,
    mtime_ns: i128,
    ino: u64,
    /// The file was modified less than [`RACY_WINDOW_NS`] before we looked, so another
    /// write in the same timestamp tick could leave size, mtime and inode unchanged
    /// (inode numbers are recycled by atomic renames; in-place writers keep them). Such
    /// an identity proves nothing: the header is read again (git's "racy clean").
    racy: bool,
}

impl FileIdentity {
    fn of(meta: &fs::Metadata) -> Self {
        let mtime_ns = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
        let now_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as i128)
            .unwrap_or(0);
        Self {
            len: meta.len(),
            mtime_ns,
            ino: meta.ino(),
            racy: now_ns - mtime_ns < RACY_WINDOW_NS,
        }
    }

    /// True when a file now looking like `current` certainly has not changed since
    /// `self` was recorded.
    fn unchanged(&self, current: &FileIdentity) -> bool {
        !self.racy
            && self.len == current.len
            && self.mtime_ns == current.mtime_ns
            && self.ino == current.ino
    }
}

/// Where a variable's value lives besides (maybe) the cache.
#[derive(Debug, Clone)]
enum Location {
    /// Only in the cache (never written).
    Memory,
    /// In `variables/`, visible to every process.
    Disk {
        path: PathBuf,
        value_offset: Option<u64>,
        identity: Option<FileIdentity>,
    },
    /// In this store's spill directory (a non-persisted value pushed out of memory).
    Spilled {
        path: PathBuf,
        value_offset: Option<u64>,
    },
}

#[derive(Debug, Clone)]
struct Entry {
    reference: VariableRef,
    location: Location,
}

struct Inner {
    entries: HashMap<String, Entry>,
    cache: ValueCache,
    summaries: HashMap<(String, usize), String>,
    problems: Vec<ScanProblem>,
    stats: StoreStats,
    spill_dir_created: bool,
}

/// The context store of one data directory.
pub struct Store {
    data_dir: PathBuf,
    variables_dir: PathBuf,
    locks_dir: PathBuf,
    spill_dir: PathBuf,
    options: StoreOptions,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("data_dir", &self.data_dir)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating if needed) the store in `data_dir` with default options.
    pub fn open(data_dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(data_dir, StoreOptions::default())
    }

    /// Opens (creating if needed) the store in `data_dir`. Reads every variable's
    /// header, never a value; unusable files are recorded in [`Store::problems`].
    pub fn open_with(data_dir: impl AsRef<Path>, options: StoreOptions) -> Result<Self> {
        let data_dir = data_dir.as_ref();
        create_private_dir(data_dir)?;
        let data_dir =
            fs::canonicalize(data_dir).map_err(|e| StoreError::io("resolve", data_dir, e))?;
        let variables_dir = data_dir.join(VARIABLES_DIR);
        let locks_dir = data_dir.join(LOCKS_DIR);
        create_private_dir(&variables_dir)?;
        create_private_dir(&locks_dir)?;
        let spill_dir = data_dir
            .join(SPILL_DIR)
            .join(uuid::Uuid::new_v4().to_string());
        let store = Self {
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                cache: ValueCache::new(options.memory_ceiling_bytes),
                summaries: HashMap::new(),
                problems: Vec::new(),
                stats: StoreStats::default(),
                spill_dir_created: false,
            }),
            data_dir,
            variables_dir,
            locks_dir,
            spill_dir,
            options,
        };
        remove_stale_temp_files(&store.variables_dir);
        store.refresh()?;
        Ok(store)
    }

    /// The data directory (absolute).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The directory of variable files (absolute).
    pub fn variables_dir(&self) -> &Path {
        &self.variables_dir
    }

    /// The absolute path where `key`'s file is, or would be once persisted.
    pub fn path_of(&self, key: &str) -> Result<PathBuf> {
        validate_key(key)?;
        let inner = self.lock_inner();
        Ok(match inner.entries.get(key).map(|e| &e.location) {
            Some(Location::Disk { path, .. }) => path.clone(),
            _ => self.canonical_path(key),
        })
    }

    /// Stores `value` under `key`, replacing any previous value. Persisted (and fsynced
    /// unless the store is in bulk mode) unless `opts.persist` is false.
    pub fn set(&self, key: &str, value: Value, opts: SetOptions) -> Result<VariableRef> {
        validate_key(key)?;
        let bytes = format::encode_value(&value);
        // In-memory values are hashed lazily (first reference/list/CAS/spill): hashing
        // costs as much as serialising, and most scratch values are never asked for it.
        let reference = new_reference(key, &opts, &value, &bytes, opts.persist);
        let mut inner = self.lock_inner();
        if opts.persist {
            let _lock = self.lock_key(key)?;
            self.write_to_disk(&mut inner, reference.clone(), &bytes)?;
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
        self.compare_and_set_with(key, expected, value, opts, self.options.durability)
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
        let bytes = format::encode_value(&value);
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
        let mut inner = self.lock_inner();
        let _lock = self.lock_key(key)?;
        let path = self.target_path(&inner, key);
        let reference = format::write_text_streaming(
            &path,
            header,
            reader,
            source_name,
            self.options.durability,
        )?;
        self.forget_value(&mut inner, key);
        let parsed = self.read_header_counted(&mut inner, &path)?;
        let identity = fs::metadata(&path).ok().map(|m| FileIdentity::of(&m));
        inner.entries.insert(
            key.to_owned(),
            Entry {
                reference: reference.clone(),
                location: Location::Disk {
                    path,
                    value_offset: parsed.value_offset,
                    identity,
                },
            },
        );
        Ok(reference)
    }

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

    /// Removes `key` from memory and disk.
    pub fn delete(&self, key: &str) -> Result<()> {
        validate_key(key)?;
        let mut inner = self.lock_inner();
        let _lock = self.lock_key(key)?;
        let entry = self.entry(&mut inner, key)?;
        match &entry.location {
            Location::Disk { path, .. } | Location::Spilled { path, .. } => remove_if_exists(path)?,
            Location::Memory => {}
        }
        inner.entries.remove(key);
        inner.cache.remove(key);
        Ok(())
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

    /// Removes every variable this store knows of (after a refresh), from memory and
    /// disk. Unreadable files are left alone. Returns how many were removed.
    pub fn clear(&self) -> Result<usize> {
        self.refresh()?;
        let mut inner = self.lock_inner();
        let keys: Vec<String> = inner.entries.keys().cloned().collect();
        for key in &keys {
            let _lock = self.lock_key(key)?;
            if let Some(entry) = inner.entries.remove(key) {
                if let Location::Disk { path, .. } | Location::Spilled { path, .. } =
                    &entry.location
                {
                    remove_if_exists(path)?;
                }
            }
        }
        inner.cache.clear();
        inner.summaries.clear();
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
        let bytes = format::encode_value(&value);
        let mut reference = entry.reference;
        reference.sha256 = Some(format::sha256_hex(&bytes));
        if let Location::Spilled { path, .. } = &entry.location {
            remove_if_exists(path)?;
        }
        self.write_to_disk(&mut inner, reference, &bytes)?;
        Ok(self.canonical_path(key))
    }

    /// Re-reads the directory: picks up variables other processes wrote, changed or
    /// removed. Only the headers of files that changed (or were modified too recently
    /// before the last look to tell) are read.
    pub fn refresh(&self) -> Result<RefreshReport> {
        let mut inner = self.lock_inner();
        let mut report = RefreshReport::default();
        let mut seen: HashMap<String, PathBuf> = HashMap::new();
        let mut problems = Vec::new();
        let known = known_files(&inner);
        let dir = fs::read_dir(&self.variables_dir)
            .map_err(|e| StoreError::io("list", &self.variables_dir, e))?;
        for dirent in dir {
            let dirent = dirent.map_err(|e| StoreError::io("list", &self.variables_dir, e))?;
            let name = dirent.file_name();
            let Some(name) = name.to_str() else {
                problems.push(ScanProblem {
                    path: dirent.path(),
                    message: "file name is not UTF-8".into(),
                });
                continue;
            };
            if name.starts_with('.') {
                continue; // temp files of writers in flight, editor droppings
            }
            let path = dirent.path();
            if !name.ends_with(".json") {
                problems.push(ScanProblem {
                    path,
                    message: "not a .json variable file; ignored".into(),
                });
                continue;
            }
            let Ok(meta) = dirent.metadata() else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let identity = FileIdentity::of(&meta);
            if let Some((key, seen_identity)) = known.get(&path) {
                if seen_identity.unchanged(&identity) {
                    seen.insert(key.clone(), path);
                    continue;
                }
            }
            let parsed = match self.read_header_counted(&mut inner, &path) {
                Ok(parsed) => parsed,
                Err(e) => {
                    problems.push(ScanProblem {
                        path,
                        message: e.to_string(),
                    });
                    continue;
                }
            };
            let key = parsed.header.reference.key.clone();
            if let Err(e) = validate_key(&key) {
                problems.push(ScanProblem {
                    path,
                    message: e.to_string(),
                });
                continue;
            }
            // True when this key's canonical file replaces a non-canonical one met
            // earlier in this scan (which already reported the key).
            let mut replaces_duplicate = false;
            if let Some(other) = seen.get(&key) {
                replaces_duplicate = true;
                let canonical = self.canonical_path(&key);
                if *other == canonical || path != canonical {
                    problems.push(ScanProblem {
                        path,
                        message: format!(
                            "duplicate of variable {:?} in {}; ignored",
                            display_key(&key),
                            other.display()
                        ),
                    });
                    continue;
                }
            }
            seen.insert(key.clone(), path.clone());
            let changed = match inner.entries.get(&key) {
                None => {
                    report.added.push(key.clone());
                    true
                }
                Some(old) => {
                    let changed = old.reference != parsed.header.reference
                        || !matches!(&old.location, Location::Disk { path: p, .. } if *p == path);
                    // Only a duplicate can have been reported already: checking the
                    // report for every key made opening 10 000 variables quadratic.
                    let reported = replaces_duplicate
                        && (report.added.contains(&key) || report.changed.contains(&key));
                    if changed && !reported {
                        report.changed.push(key.clone());
                    }
                    changed
                }
            };
            if changed {
                inner.cache.remove(&key);
            }
            let location = Location::Disk {
                path,
                value_offset: parsed.value_offset,
                identity: Some(identity),
            };
            inner.entries.insert(
                key,
                Entry {
                    reference: parsed.header.reference,
                    location,
                },
            );
        }
        let gone: Vec<String> = inner
            .entries
            .iter()
            .filter(|(key, e)| {
                matches!(e.location, Location::Disk { .. }) && !seen.contains_key(*key)
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in gone {
            inner.entries.remove(&key);
            inner.cache.remove(&key);
            report.removed.push(key);
        }
        for problem in &problems {
            tracing::warn!(path = %problem.path.display(), "skipping variable file: {}", problem.message);
        }
        inner.problems = problems;
        Ok(report)
    }

    /// Waits until `key` exists (written by this or any other process) and returns its
    /// reference; fails with [`StoreError::WaitTimeout`] after `timeout`.
    pub fn wait_for(&self, key: &str, timeout: Duration) -> Result<VariableRef> {
        crate::watch::wait_for(self, key, timeout)
    }

    /// Looks at the disk for `key` now, bypassing the index when the file changed.
    pub(crate) fn probe(&self, key: &str) -> Result<Option<VariableRef>> {
        let mut inner = self.lock_inner();
        let path = self.canonical_path(key);
        if let Ok(meta) = fs::metadata(&path) {
            let identity = FileIdentity::of(&meta);
            let fresh = matches!(inner.entries.get(key).map(|e| &e.location),
                Some(Location::Disk { identity: Some(seen), .. }) if seen.unchanged(&identity));
            if !fresh {
                inner.entries.remove(key);
                inner.cache.remove(key);
            }
        }
        match self.entry(&mut inner, key) {
            Ok(entry) => Ok(Some(entry.reference)),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Files found unusable by the last open or refresh.
    pub fn problems(&self) -> Vec<ScanProblem> {
        self.lock_inner().problems.clone()
    }

    /// Counters describing the store's work so far.
    pub fn stats(&self) -> StoreStats {
        let inner = self.lock_inner();
        StoreStats {
            variables: inner.entries.len(),
            values_in_memory: inner.cache.len(),
            memory_bytes: inner.cache.bytes(),
            ..inner.stats
        }
    }

    // ----- internals -----

    fn lock_inner(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent data (every mutation is a
        // single insert/remove), so a poisoned mutex is safe to keep using.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn lock_key(&self, key: &str) -> Result<KeyLock> {
        let path = self.locks_dir.join(format!("{}.lock", key::file_stem(key)));
        KeyLock::acquire(&path, key, self.options.lock_timeout)
    }

    fn canonical_path(&self, key: &str) -> PathBuf {
        self.variables_dir.join(key::file_name(key))
    }

    fn target_path(&self, inner: &Inner, key: &str) -> PathBuf {
        match inner.entries.get(key).map(|e| &e.location) {
            Some(Location::Disk { path, .. }) => path.clone(),
            _ => self.canonical_path(key),
        }
    }

    /// The entry for `key`, probing the disk when the index does not know it.
    fn entry(&self, inner: &mut Inner, key: &str) -> Result<Entry> {
        if let Some(entry) = inner.entries.get(key) {
            return Ok(entry.clone());
        }
        let path = self.canonical_path(key);
        let meta = match fs::metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound {
                    key: display_key(key),
                })
            }
            Err(e) => return Err(StoreError::io("inspect variable file", path, e)),
        };
        let parsed = self.read_header_counted(inner, &path)?;
        if parsed.header.reference.key != key {
            return Err(StoreError::Corrupt {
                path,
                reason: format!(
                    "it holds key {:?}, not {:?}",
                    display_key(&parsed.header.reference.key),
                    display_key(key)
                ),
            });
        }
        let entry = Entry {
            reference: parsed.header.reference,
            location: Location::Disk {
                path,
                value_offset: parsed.value_offset,
                identity: Some(FileIdentity::of(&meta)),
            },
        };
        inner.entries.insert(key.to_owned(), entry.clone());
        Ok(entry)
    }

    fn read_header_counted(&self, inner: &mut Inner, path: &Path) -> Result<format::ParsedHeader> {
        inner.stats.headers_read += 1;
        format::read_header(path)
    }

    /// The sha256 the variable has right now, reading the disk (another process may
    /// have written it). Caller holds the key lock.
    fn current_sha256(&self, inner: &mut Inner, key: &str) -> Result<Option<String>> {
        let path = self.target_path(inner, key);
        match fs::metadata(&path) {
            Ok(_) => {
                let parsed = self.read_header_counted(inner, &path)?;
                if let Some(sha) = parsed.header.reference.sha256 {
                    return Ok(Some(sha));
                }
                let value = format::read_value(&path, parsed.value_offset)?;
                inner.stats.values_loaded += 1;
                Ok(Some(format::sha256_hex(&format::encode_value(&value))))
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
                    Some(None) => hash_cached(inner, key).and_then(|r| r.sha256),
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
        let value_offset = format::write_file(&path, &header, bytes, durability)?;
        if let Some(Entry {
            location: Location::Spilled { path: spilled, .. },
            ..
        }) = inner.entries.get(&key)
        {
            remove_if_exists(spilled)?;
        }
        let identity = fs::metadata(&path).ok().map(|m| FileIdentity::of(&m));
        let value_offset = Some(value_offset);
        inner.entries.insert(
            key,
            Entry {
                reference: header.reference,
                location: Location::Disk {
                    path,
                    value_offset,
                    identity,
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

    /// Caches a value if it fits, spilling whatever the ceiling pushes out. A value that
    /// cannot fit is spilled straight away if it exists nowhere else.
    fn cache_value(
        &self,
        inner: &mut Inner,
        key: &str,
        value: Arc<Value>,
        size: u64,
    ) -> Result<()> {
        if !inner.cache.admits(size) {
            if matches!(
                inner.entries.get(key).map(|e| &e.location),
                Some(Location::Memory)
            ) {
                self.spill(inner, key, &value)?;
            }
            return Ok(());
        }
        for evicted in inner.cache.insert(key, value, size) {
            if matches!(
                inner.entries.get(&evicted.key).map(|e| &e.location),
                Some(Location::Memory)
            ) {
                self.spill(inner, &evicted.key, &evicted.value)?;
            }
        }
        Ok(())
    }

    fn spill(&self, inner: &mut Inner, key: &str, value: &Value) -> Result<()> {
        if !inner.spill_dir_created {
            create_private_dir(&self.data_dir.join(SPILL_DIR))?;
            create_private_dir(&self.spill_dir)?;
            inner.spill_dir_created = true;
        }
        let Some(entry) = inner.entries.get(key).cloned() else {
            return Ok(());
        };
        let path = self.spill_dir.join(key::file_name(key));
        let bytes = format::encode_value(value);
        let mut reference = entry.reference;
        if reference.sha256.is_none() {
            reference.sha256 = Some(format::sha256_hex(&bytes));
        }
        let header = FileHeader {
            format_version: Some(FORMAT_VERSION),
            reference: reference.clone(),
            persist: false,
        };
        let value_offset = Some(format::write_file(
            &path,
            &header,
            &bytes,
            Durability::Bulk,
        )?);
        inner.stats.values_spilled += 1;
        inner.entries.insert(
            key.to_owned(),
            Entry {
                reference,
                location: Location::Spilled { path, value_offset },
            },
        );
        Ok(())
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let created = self
            .inner
            .get_mut()
            .map(|i| i.spill_dir_created)
            .unwrap_or(true);
        if created {
            let _ = fs::remove_dir_all(&self.spill_dir);
        }
    }
}

/// Files of the index with the identity last seen, for refresh's unchanged-file check.
fn known_files(inner: &Inner) -> HashMap<PathBuf, (String, FileIdentity)> {
    inner
        .entries
        .iter()
        .filter_map(|(key, e)| match &e.location {
            Location::Disk {
                path,
                identity: Some(identity),
                ..
            } => Some((path.clone(), (key.clone(), *identity))),
            _ => None,
        })
        .collect()
}

/// Computes and records the sha256 of a cached value that was stored unhashed.
fn hash_cached(inner: &mut Inner, key: &str) -> Option<VariableRef> {
    let value = inner.cache.peek(key)?;
    let sha = format::sha256_hex(&format::encode_value(&value));
    let entry = inner.entries.get_mut(key)?;
    entry.reference.sha256 = Some(sha);
    Some(entry.reference.clone())
}

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
        sha256: hash.then(|| format::sha256_hex(bytes)),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Removes `.tmp-*.partial` files older than [`STALE_TEMP_AGE`] from `dir`: what a
/// writer killed mid-write (`kill -9`, power loss) left behind. Best effort.
fn remove_stale_temp_files(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with(".tmp-") && name.ends_with(".partial")) {
            continue;
        }
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age >= STALE_TEMP_AGE);
        if stale {
            match fs::remove_file(entry.path()) {
                Ok(()) => {
                    tracing::info!(path = %entry.path().display(), "removed a stale temp file")
                }
                Err(e) => {
                    tracing::debug!(path = %entry.path().display(), "cannot remove a stale temp file: {e}")
                }
            }
        }
    }
}

fn create_private_dir(path: &Path) -> Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| StoreError::io("create directory", path, e))
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io("remove variable file", path, e)),
    }
}

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

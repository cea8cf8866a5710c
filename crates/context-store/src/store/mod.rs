//! The store: variables indexed by key, values on disk and (bounded) in memory.
//!
//! One `Store` is shared by the threads of a process (`&self` methods, one mutex).
//! Other processes — sub-agents, the CLI — work on the same directory; they see each
//! other's writes through [`Store::refresh`], [`Store::wait_for`] and by the store
//! probing the disk whenever a key is not in its index. Writers of one key serialise on
//! that key's lock file, which is what makes [`Store::compare_and_set`] lose nothing.
//!
//! This module holds the store's state (the index of entries and where each value
//! lives) and what every operation shares; the operations live beside it:
//!
//! - `write` — `set`, `compare_and_set`, streaming text in, `delete`, `clear`, and
//!   persisting a value for a sub-agent;
//! - `read` — `get`, `reference`, `list`, `summarize`, streaming a value out;
//! - `scan` — noticing other processes' work: `refresh` of the whole directory, the
//!   probe of one key, and the file identities that make both cheap;
//! - `spill` — the memory ceiling: caching values and pushing the least recently used
//!   ones that exist nowhere else to this store's spill directory;
//! - `views` — text views: a variable's text as a plain file under `views/`, for
//!   tools that read files line by line, and their clean-up.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::cache::ValueCache;
use crate::disk;
use crate::error::{Result, StoreError};
use crate::key::{self, display_key, validate_key};
use crate::lock::KeyLock;
use crate::private_fs::Durability;
use crate::reference::VariableRef;
use crate::summary::{Summarizer, TruncatingSummarizer};

mod files;
mod read;
mod scan;
mod spill;
mod views;
mod watch;
mod write;

pub use scan::{RefreshReport, ScanProblem};
pub use views::STALE_VIEW_GRACE;

use scan::FileIdentity;

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

/// Sub-directory holding text views: `<sha256>.txt`, a variable's text as a plain
/// file (see [`Store::text_view`]).
pub const VIEWS_DIR: &str = "views";

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
        /// The value was checked against the header's sha256 (or written by this
        /// store) while the file had this identity.
        verified: bool,
    },
    /// In this store's spill directory (a non-persisted value pushed out of memory).
    Spilled {
        path: PathBuf,
        value_offset: Option<u64>,
    },
}

/// What the index knows of one variable.
#[derive(Debug, Clone)]
struct Entry {
    reference: VariableRef,
    location: Location,
}

/// Everything behind the store's mutex.
struct Inner {
    entries: HashMap<String, Entry>,
    cache: ValueCache,
    summaries: HashMap<(String, usize), String>,
    /// The size of the text view of each value (by sha256) this store measured or wrote.
    view_sizes: HashMap<String, u64>,
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
        refuse_symlinked_dir(&variables_dir)?;
        refuse_symlinked_dir(&locks_dir)?;
        let spill_dir = data_dir
            .join(SPILL_DIR)
            .join(uuid::Uuid::new_v4().to_string());
        let store = Self {
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                cache: ValueCache::new(options.memory_ceiling_bytes),
                summaries: HashMap::new(),
                view_sizes: HashMap::new(),
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
        scan::remove_stale_temp_files(&store.variables_dir);
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

    /// Waits until `key` exists (written by this or any other process) and returns its
    /// reference; fails with [`StoreError::WaitTimeout`] after `timeout`.
    pub fn wait_for(&self, key: &str, timeout: Duration) -> Result<VariableRef> {
        watch::wait_for(self, key, timeout)
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

    // ----- shared by the operations -----

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

    /// The entry for `key`, checked against its file ([`Self::revalidate`]), probing
    /// the disk when the index does not know it.
    fn entry(&self, inner: &mut Inner, key: &str) -> Result<Entry> {
        self.revalidate(inner, key)?;
        if let Some(entry) = inner.entries.get(key) {
            return Ok(entry.clone());
        }
        let path = self.canonical_path(key);
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound {
                    key: display_key(key),
                })
            }
            Err(e) => return Err(StoreError::io("inspect variable file", path, e)),
        };
        if meta.file_type().is_symlink() {
            return Err(StoreError::Symlink { path });
        }
        let (parsed, meta) = self.read_checked_header(inner, &path, key)?;
        let entry = Entry {
            reference: parsed.header.reference,
            location: Location::Disk {
                path,
                value_offset: parsed.value_offset,
                identity: Some(FileIdentity::of(&meta)),
                verified: false,
            },
        };
        inner.entries.insert(key.to_owned(), entry.clone());
        Ok(entry)
    }

    /// Makes sure the index entry of a variable on disk still describes its file: when
    /// the file's identity (size, mtime, inode) changed — another process rewrote,
    /// removed or edited it — or is too recent to prove anything, its header is read
    /// again and a cached value of an older file is dropped. Without this, a variable
    /// rewritten elsewhere kept its old sha256 (and so its old memoised answers) and
    /// was read from a stale value offset. Costs one `lstat` when nothing changed.
    fn revalidate(&self, inner: &mut Inner, key: &str) -> Result<()> {
        let Some(Entry {
            reference: old_reference,
            location:
                Location::Disk {
                    path,
                    identity: seen,
                    verified,
                    ..
                },
        }) = inner.entries.get(key)
        else {
            return Ok(());
        };
        let (path, seen, verified) = (path.clone(), *seen, *verified);
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                forget(inner, key);
                return Ok(());
            }
            Err(e) => return Err(StoreError::io("inspect variable file", path, e)),
        };
        if seen.is_some_and(|seen| seen.unchanged(&FileIdentity::of(&meta))) {
            return Ok(());
        }
        let old_reference = old_reference.clone();
        let (parsed, meta) = match self.read_checked_header(inner, &path, key) {
            Ok(read) => read,
            Err(e) => {
                forget(inner, key);
                return Err(e);
            }
        };
        let now = FileIdentity::of(&meta);
        let same = seen.is_some_and(|seen| seen.same_file(&now))
            && same_header(&old_reference, &parsed.header.reference);
        if !same {
            inner.cache.remove(key);
        }
        inner.entries.insert(
            key.to_owned(),
            Entry {
                // Keep what reading the value taught us (a foreign file's sha256).
                reference: if same {
                    old_reference
                } else {
                    parsed.header.reference
                },
                location: Location::Disk {
                    path,
                    value_offset: parsed.value_offset,
                    identity: Some(now),
                    verified: same && verified,
                },
            },
        );
        Ok(())
    }

    /// Reads the header of `key`'s file at `path`, with the metadata of the file read,
    /// and checks it can be used: not a symlink, holding `key`, long enough for its
    /// value.
    fn read_checked_header(
        &self,
        inner: &mut Inner,
        path: &Path,
        key: &str,
    ) -> Result<(disk::ParsedHeader, fs::Metadata)> {
        inner.stats.headers_read += 1;
        let (parsed, meta) = disk::read_header_with_metadata(path)?;
        if parsed.header.reference.key != key {
            return Err(StoreError::Corrupt {
                path: path.to_owned(),
                reason: format!(
                    "it holds key {:?}, not {:?}",
                    display_key(&parsed.header.reference.key),
                    display_key(key)
                ),
            });
        }
        scan::admit(path, &parsed, &meta)?;
        Ok((parsed, meta))
    }
}

/// True when a header read again says what `old` (the index's reference) says. A
/// header without a sha256 (another program's file) matches the reference the index
/// completed with the size and hash it computed when it read the value.
fn same_header(old: &VariableRef, new: &VariableRef) -> bool {
    if new.sha256.is_some() {
        return old == new;
    }
    old.id == new.id
        && old.key == new.key
        && old.scope == new.scope
        && old.var_type == new.var_type
        && old.created_at == new.created_at
}

/// Drops `key` from the index and the cache.
fn forget(inner: &mut Inner, key: &str) {
    inner.entries.remove(key);
    inner.cache.remove(key);
}

/// Fails when `dir` (a directory of the store) is a symbolic link.
fn refuse_symlinked_dir(dir: &Path) -> Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => Err(StoreError::Symlink {
            path: dir.to_owned(),
        }),
        Ok(_) => Ok(()),
        Err(e) => Err(StoreError::io("inspect", dir, e)),
    }
}

/// Creates a directory of the store (`0700`).
fn create_private_dir(path: &Path) -> Result<()> {
    Ok(crate::private_fs::create_dir_all_private(path)?)
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io("remove variable file", path, e)),
    }
}

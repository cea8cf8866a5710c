//! Noticing what other processes did to the data directory: [`Store::refresh`] re-reads
//! `variables/`, [`Store::probe`] looks at one key, and the temp files of writers that
//! were killed mid-write are cleared when a store opens (a live writer holds a lock on
//! its temp file; a killed one's lock died with it).
//!
//! What cannot be used is reported, never followed or trusted: symbolic links, files
//! too short for the value their header records ([`admit`]), and second files claiming
//! a key another file already holds.
//!
//! Both stay cheap with thousands of variables by remembering each file's identity
//! (size, mtime, inode) and reading a header again only when the identity changed or
//! is too recent to prove anything.

use std::collections::HashMap;
use std::fs::{self, TryLockError};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Entry, Inner, Location, Store};
use crate::disk::{self, ParsedHeader};
use crate::error::{Result, StoreError};
use crate::integrity;
use crate::key::{display_key, validate_key};
use crate::nofollow;
use crate::private_fs::{TEMP_PREFIX, TEMP_SUFFIX};
use crate::reference::VariableRef;

/// An unlocked temp file is a killed writer's once it is this old. Writers lock their
/// temp file right after creating it, so the grace only covers that instant and
/// writers of rlm versions that did not lock temp files (they keep writing, so their
/// file's mtime stays recent).
const UNLOCKED_TEMP_GRACE: Duration = Duration::from_secs(60);

/// How recently before we looked a file may have been modified for its identity to be
/// "racy" (see [`FileIdentity::racy`]): more than the coarsest common timestamp
/// granularity (1 s on ext3, HFS+ and some network file systems).
const RACY_WINDOW_NS: i128 = 2_000_000_000;

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

/// Identity of a file as last seen, to notice other processes' writes.
#[derive(Debug, Clone, Copy)]
pub(super) struct FileIdentity {
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
    pub(super) fn of(meta: &fs::Metadata) -> Self {
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
    pub(super) fn unchanged(&self, current: &FileIdentity) -> bool {
        !self.racy && self.same_file(current)
    }

    /// True when size, mtime and inode are those of `current` (which, for a racy
    /// identity, does not prove the contents are).
    pub(super) fn same_file(&self, current: &FileIdentity) -> bool {
        self.len == current.len && self.mtime_ns == current.mtime_ns && self.ino == current.ino
    }
}

/// Checks that a file in our layout (`meta` is its metadata) is long enough for the
/// value its header records; one whose length differs in any other way (an editor's
/// trailing newline, a value edited by hand) has its value checked against the
/// sha256 right away. Cheap for the files rlm writes: their length is exact.
pub(super) fn admit(path: &Path, parsed: &ParsedHeader, meta: &fs::Metadata) -> Result<()> {
    let reference = &parsed.header.reference;
    let (Some(offset), Some(_)) = (parsed.value_offset, reference.sha256.as_ref()) else {
        return Ok(());
    };
    integrity::check_length(path, offset, reference, meta.len())?;
    if meta.len() != offset + reference.size_bytes + 1 {
        disk::verified_sha256(path, Some(offset), reference)?;
    }
    Ok(())
}

impl Store {
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
            if meta.file_type().is_symlink() {
                problems.push(ScanProblem {
                    message: StoreError::Symlink { path: path.clone() }.to_string(),
                    path,
                });
                continue;
            }
            if !meta.is_file() {
                continue;
            }
            if let Some((key, seen_identity)) = known.get(&path) {
                if seen_identity.unchanged(&FileIdentity::of(&meta)) {
                    seen.insert(key.clone(), path);
                    continue;
                }
            }
            inner.stats.headers_read += 1;
            // The identity recorded is that of the file whose header was read.
            let read = disk::read_header_with_metadata(&path).and_then(|(parsed, meta)| {
                admit(&path, &parsed, &meta).map(|()| (parsed, FileIdentity::of(&meta)))
            });
            let (parsed, identity) = match read {
                Ok(read) => read,
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
                // The canonical file wins; of two others, the first met.
                let (ignored, kept) = if *other == canonical || path != canonical {
                    (path.clone(), other.clone())
                } else {
                    (other.clone(), path.clone())
                };
                problems.push(ScanProblem {
                    message: format!(
                        "duplicate of variable {:?} in {}; ignored",
                        display_key(&key),
                        kept.display()
                    ),
                    path: ignored,
                });
                if kept != path {
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
                verified: false,
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

    /// Looks at the disk for `key` now, bypassing the index when the file changed.
    pub(crate) fn probe(&self, key: &str) -> Result<Option<VariableRef>> {
        let mut inner = self.lock_inner();
        let path = self.canonical_path(key);
        if let Ok(meta) = fs::symlink_metadata(&path) {
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

/// Removes the `.tmp-*.partial` files of writers that are gone from `dir`: a writer
/// holds an exclusive lock on its temp file from creation to rename, so a temp file
/// nobody holds (and older than [`UNLOCKED_TEMP_GRACE`]) is what a writer killed
/// mid-write (`kill -9`, power loss) left behind. Best effort.
pub(super) fn remove_stale_temp_files(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with(TEMP_PREFIX) && name.ends_with(TEMP_SUFFIX)) {
            continue;
        }
        let path = entry.path();
        if writer_is_gone(&path) {
            match fs::remove_file(&path) {
                Ok(()) => {
                    tracing::info!(path = %path.display(), "removed a killed writer's temp file")
                }
                Err(e) => {
                    tracing::debug!(path = %path.display(), "cannot remove a stale temp file: {e}")
                }
            }
        }
    }
}

/// True when no process holds the temp file at `path` and it is past the grace age.
fn writer_is_gone(path: &Path) -> bool {
    let Ok(file) = nofollow::open_read(path, "open temp file") else {
        return false;
    };
    let old_enough = file
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|modified| modified.elapsed().ok())
        .is_some_and(|age| age >= UNLOCKED_TEMP_GRACE);
    if !old_enough {
        return false;
    }
    match file.try_lock() {
        // Held only by us now; the descriptor (and the lock) go when `file` drops.
        Ok(()) => true,
        Err(TryLockError::WouldBlock) => false,
        Err(TryLockError::Error(e)) => {
            tracing::debug!(path = %path.display(), "cannot lock a temp file: {e}");
            false
        }
    }
}

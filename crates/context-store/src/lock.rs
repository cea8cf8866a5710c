//! Cross-process locks on variables.
//!
//! Each key has a stable lock file in `<data-dir>/locks/` (never the variable file
//! itself: an atomic rename replaces that inode, so a lock on it would protect nothing).
//! Locks are `flock(2)` through std's `File::try_lock`, held by an RAII guard and
//! released when it drops — also when the holding process dies.
//!
//! A lock file may be removed, but only by its holder ([`KeyLock::remove`], used when
//! a variable is deleted): a waiter that then gets the lock finds its file no longer
//! linked at the path (device and inode differ, or the path is gone) and starts over
//! on a fresh file, so two writers never hold "the" lock at once. Lock files are opened
//! with `O_NOFOLLOW`: a symlink in `locks/` is refused, never followed.

use std::fs::{self, File, TryLockError};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Result, StoreError};
use crate::nofollow;

/// Longest pause between two attempts to take a busy lock.
const MAX_BACKOFF: Duration = Duration::from_millis(20);

/// An exclusive lock on one variable, released on drop.
#[derive(Debug)]
pub struct KeyLock {
    file: File,
    path: PathBuf,
}

impl KeyLock {
    /// Takes the exclusive lock at `path`, waiting up to `timeout`.
    pub fn acquire(path: &Path, key: &str, timeout: Duration) -> Result<Self> {
        let start = Instant::now();
        let mut backoff = Duration::from_micros(50);
        loop {
            let file = nofollow::open_or_create(path, "open lock file")?;
            loop {
                match file.try_lock() {
                    Ok(()) => break,
                    Err(TryLockError::WouldBlock) => {}
                    Err(TryLockError::Error(e)) => return Err(StoreError::io("lock", path, e)),
                }
                let waited = start.elapsed();
                if waited >= timeout {
                    return Err(StoreError::LockTimeout {
                        key: crate::key::display_key(key),
                        path: PathBuf::from(path),
                        waited_ms: waited.as_millis(),
                    });
                }
                std::thread::sleep(backoff.min(timeout - waited));
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            if still_linked(&file, path)? {
                return Ok(Self {
                    file,
                    path: path.to_owned(),
                });
            }
            // The holder we waited for removed the file: lock the one at the path now.
        }
    }

    /// Takes the lock at `path` only if it is free right now; `None` when another
    /// process holds it (or the file vanished meanwhile).
    pub fn try_acquire(path: &Path) -> Result<Option<Self>> {
        let file = nofollow::open_or_create(path, "open lock file")?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(StoreError::io("lock", path, e)),
        }
        if !still_linked(&file, path)? {
            return Ok(None);
        }
        Ok(Some(Self {
            file,
            path: path.to_owned(),
        }))
    }

    /// Removes the lock file while still holding it, then releases the lock. Waiters
    /// notice (see the module notes) and lock a new file.
    pub fn remove(self) -> Result<()> {
        match fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io("remove lock file", &self.path, e)),
        }
    }
}

/// True when `file` is still the file linked at `path`.
fn still_linked(file: &File, path: &Path) -> Result<bool> {
    let held = file
        .metadata()
        .map_err(|e| StoreError::io("inspect lock file", path, e))?;
    match fs::symlink_metadata(path) {
        Ok(now) => Ok(now.ino() == held.ino() && now.dev() == held.dev()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StoreError::io("inspect lock file", path, e)),
    }
}

impl Drop for KeyLock {
    fn drop(&mut self) {
        // Closing the descriptor releases the lock too; unlocking first makes it prompt
        // even if the `File` were leaked elsewhere.
        let _ = self.file.unlock();
    }
}

/// Removes the lock files in `dir` that no process holds (each taken, then removed
/// while held). Busy ones stay. Returns how many were removed.
pub fn remove_idle_lock_files(dir: &Path) -> Result<usize> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(StoreError::io("list", dir, e)),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("list", dir, e))?;
        let path = entry.path();
        let is_lock = path.extension().is_some_and(|ext| ext == "lock");
        if !is_lock || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        match KeyLock::try_acquire(&path) {
            Ok(Some(lock)) => {
                lock.remove()?;
                removed += 1;
            }
            Ok(None) => {}
            Err(e) => tracing::debug!("left lock file {} in place: {e}", path.display()),
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_times_out_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.lock");
        let first = KeyLock::acquire(&path, "k", Duration::from_secs(1)).unwrap();
        let err = KeyLock::acquire(&path, "k", Duration::from_millis(30)).unwrap_err();
        assert!(err.to_string().contains("k.lock"), "{err}");
        drop(first);
        KeyLock::acquire(&path, "k", Duration::from_millis(30)).unwrap();
    }

    #[test]
    fn timeout_hint_never_says_to_delete_the_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.lock");
        let _first = KeyLock::acquire(&path, "k", Duration::from_secs(1)).unwrap();
        let err = KeyLock::acquire(&path, "k", Duration::from_millis(10)).unwrap_err();
        let text = err.to_string();
        assert!(!text.contains("remove the lock file"), "{text}");
        assert!(text.contains("never delete the lock file"), "{text}");
    }

    #[test]
    fn a_symlinked_lock_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        fs::write(&target, b"").unwrap();
        let path = dir.path().join("k.lock");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let err = KeyLock::acquire(&path, "k", Duration::from_millis(10)).unwrap_err();
        assert!(matches!(err, StoreError::Symlink { .. }), "{err:?}");
    }

    #[test]
    fn a_waiter_relocks_after_the_holder_removed_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.lock");
        let first = KeyLock::acquire(&path, "k", Duration::from_secs(1)).unwrap();
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || KeyLock::acquire(&path, "k", Duration::from_secs(10)))
        };
        // Whether the waiter opened the old file or not, it must end up holding the
        // file linked at the path, and a third party must then be locked out.
        first.remove().unwrap();
        let second = waiter.join().unwrap().unwrap();
        assert!(still_linked(&second.file, &path).unwrap());
        assert!(KeyLock::try_acquire(&path).unwrap().is_none());
    }

    #[test]
    fn idle_lock_files_are_removed_and_busy_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let busy =
            KeyLock::acquire(&dir.path().join("a.lock"), "a", Duration::from_secs(1)).unwrap();
        drop(KeyLock::acquire(&dir.path().join("b.lock"), "b", Duration::from_secs(1)).unwrap());
        assert_eq!(remove_idle_lock_files(dir.path()).unwrap(), 1);
        assert!(dir.path().join("a.lock").exists());
        assert!(!dir.path().join("b.lock").exists());
        drop(busy);
    }
}

//! Cross-process locks on variables.
//!
//! Each key has a stable lock file in `<data-dir>/locks/` (never the variable file
//! itself: an atomic rename replaces that inode, so a lock on it would protect nothing).
//! Locks are `flock(2)` through std's `File::try_lock`, held by an RAII guard and
//! released when it drops — also when the holding process dies.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Result, StoreError};

/// Longest pause between two attempts to take a busy lock.
const MAX_BACKOFF: Duration = Duration::from_millis(20);

/// An exclusive lock on one variable, released on drop.
#[derive(Debug)]
pub struct KeyLock {
    file: File,
}

impl KeyLock {
    /// Takes the exclusive lock at `path`, waiting up to `timeout`.
    pub fn acquire(path: &Path, key: &str, timeout: Duration) -> Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| StoreError::io("open lock file", path, e))?;
        let start = Instant::now();
        let mut backoff = Duration::from_micros(50);
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Self { file }),
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
    }
}

impl Drop for KeyLock {
    fn drop(&mut self) {
        // Closing the descriptor releases the lock too; unlocking first makes it prompt
        // even if the `File` were leaked elsewhere.
        let _ = self.file.unlock();
    }
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
}

//! Limits that hold across the whole process tree: `--max-requests` (model requests in
//! flight at once) and `--max-agents` (external agent processes at once), at every depth.
//!
//! A limit of N is N slot files under `<data-dir>/slots/<name>/`; holding a slot is
//! holding an exclusive `flock` on one of them. Every process of the tree (nested runs
//! are separate processes) shares the data directory and so the slots; the kernel
//! releases a dead holder's lock, so a killed process never leaks one. A slot is held
//! only around the thing it counts (one HTTP request, one agent's life), never while
//! waiting for children, so a waiting parent cannot starve its own children.

use rlm_context_store::private_fs::create_dir_all_private;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Directory of the slot files, under the data directory.
pub const SLOTS_DIR: &str = "slots";

/// First pause between two rounds of trying every slot; doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(2);
/// Longest pause between two rounds.
const MAX_PAUSE: Duration = Duration::from_millis(50);

/// One tree-wide limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slots {
    dir: PathBuf,
    count: usize,
}

/// A held slot, released when dropped (or when its process dies).
#[derive(Debug)]
pub struct SlotGuard {
    _file: File,
}

impl Slots {
    /// The limit `name` (`requests`, `agents`) of `count` slots in `data_dir`.
    pub fn new(data_dir: &Path, name: &str, count: usize) -> Self {
        Self {
            dir: data_dir.join(SLOTS_DIR).join(name),
            count: count.max(1),
        }
    }

    /// How many may hold a slot at once.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Waits for a free slot and holds it. Fails only if the slot files cannot be
    /// created (a read-only data directory, …).
    pub async fn acquire(&self) -> std::io::Result<SlotGuard> {
        let mut pause = FIRST_PAUSE;
        loop {
            if let Some(guard) = self.try_acquire()? {
                return Ok(guard);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }

    /// A free slot, if there is one now.
    pub fn try_acquire(&self) -> std::io::Result<Option<SlotGuard>> {
        create_dir_all_private(&self.dir).map_err(|e| e.source)?;
        for index in 0..self.count {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(self.dir.join(format!("{index}.lock")))?;
            match file.try_lock() {
                Ok(()) => return Ok(Some(SlotGuard { _file: file })),
                Err(std::fs::TryLockError::WouldBlock) => continue,
                Err(std::fs::TryLockError::Error(error)) => return Err(error),
            }
        }
        Ok(None)
    }
}

/// A provider whose requests each hold a `requests` slot (`--max-requests`).
pub struct SlottedProvider {
    inner: std::sync::Arc<dyn crate::provider::Provider>,
    slots: Slots,
}

impl SlottedProvider {
    /// `inner`, limited by `slots`.
    pub fn new(inner: std::sync::Arc<dyn crate::provider::Provider>, slots: Slots) -> Self {
        Self { inner, slots }
    }
}

#[async_trait::async_trait]
impl crate::provider::Provider for SlottedProvider {
    async fn complete(
        &self,
        request: &crate::provider::ChatRequest,
        on_delta: Option<crate::provider::DeltaSink<'_>>,
    ) -> Result<crate::provider::Completion, crate::provider::ProviderError> {
        let _slot = self.slots.acquire().await.map_err(|error| {
            crate::provider::ProviderError::Config(format!(
                "--max-requests: could not take a request slot in {}: {error}",
                self.slots.dir.display()
            ))
        })?;
        self.inner.complete(request, on_delta).await
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_more_than_count_are_held_and_a_dropped_guard_frees_its_slot() {
        let dir = tempfile::tempdir().unwrap();
        let slots = Slots::new(dir.path(), "requests", 2);
        let first = slots.try_acquire().unwrap().unwrap();
        let second = slots.try_acquire().unwrap().unwrap();
        assert!(slots.try_acquire().unwrap().is_none());
        // Another handle on the same directory (another process) sees the same slots.
        let other = Slots::new(dir.path(), "requests", 2);
        assert!(other.try_acquire().unwrap().is_none());
        drop(first);
        assert!(other.try_acquire().unwrap().is_some());
        drop(second);
    }

    #[tokio::test]
    async fn acquire_waits_for_a_slot() {
        let dir = tempfile::tempdir().unwrap();
        let slots = Slots::new(dir.path(), "agents", 1);
        let held = slots.try_acquire().unwrap().unwrap();
        let waiter = {
            let slots = slots.clone();
            tokio::spawn(async move { slots.acquire().await.map(|_| ()) })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(held);
        waiter.await.unwrap().unwrap();
    }
}

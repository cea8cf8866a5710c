//! Waiting for a variable that another process will write.
//!
//! A `notify` watcher on `variables/` (the directory: watching the file itself dies
//! with the first atomic rename) wakes the waiter; a slow poll backs it up in case an
//! event is missed, e.g. on file systems without inotify.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};

use super::Store;
use crate::error::{Result, StoreError};
use crate::reference::VariableRef;

/// Longest sleep between two looks at the disk when no event arrives.
const POLL_INTERVAL: Duration = Duration::from_millis(250);

pub(crate) fn wait_for(store: &Store, key: &str, timeout: Duration) -> Result<VariableRef> {
    crate::key::validate_key(key)?;
    let start = Instant::now();
    let (tx, rx) = mpsc::channel();
    let dir = store.variables_dir().to_owned();
    let mut watcher = notify::recommended_watcher(move |event| {
        let _ = tx.send(event);
    })
    .map_err(|source| StoreError::Watch {
        path: dir.clone(),
        source,
    })?;
    watcher
        .watch(&dir, RecursiveMode::NonRecursive)
        .map_err(|source| StoreError::Watch {
            path: dir.clone(),
            source,
        })?;
    loop {
        if let Some(reference) = store.probe(key)? {
            return Ok(reference);
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return Err(StoreError::WaitTimeout {
                key: crate::key::display_key(key),
                waited_ms: waited.as_millis(),
            });
        }
        // Any event (or none within the poll interval) is a reason to look again.
        let _ = rx.recv_timeout((timeout - waited).min(POLL_INTERVAL));
    }
}

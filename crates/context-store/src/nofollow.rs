//! Opening files in `variables/` and `locks/` without following symbolic links.
//!
//! A symlink planted in the data directory could make `get` read a file outside the
//! store (one `list` never shows) or make a lock be taken on some other file. Every
//! open of a variable, temp or lock file therefore passes `O_NOFOLLOW`, and a link is
//! reported as [`StoreError::Symlink`] instead of being read.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Result, StoreError};

/// Opens `path` for reading, refusing a symbolic link.
pub(crate) fn open_read(path: &Path, action: &'static str) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| error(action, path, e))
}

/// Opens (creating with mode 0600 if needed) `path` for writing, refusing a symbolic
/// link; never truncates.
pub(crate) fn open_or_create(path: &Path, action: &'static str) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| error(action, path, e))
}

/// The store error for a failed open: a symlink (`ELOOP` under `O_NOFOLLOW`) is
/// named as such, anything else is an I/O error on `path`.
pub(crate) fn error(action: &'static str, path: &Path, e: io::Error) -> StoreError {
    if e.raw_os_error() == Some(libc::ELOOP) {
        StoreError::Symlink {
            path: path.to_owned(),
        }
    } else {
        StoreError::io(action, path, e)
    }
}

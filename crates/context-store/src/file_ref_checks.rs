//! Checks of the file a `file` variable refers to, shared by the store and
//! [`VariableFile`](crate::variable_file::VariableFile): decoding the reference,
//! verifying its signature against the data directory's key, and the error for a
//! failed copy of the file.

use std::path::Path;

use crate::error::{Result, StoreError};
use crate::file_ref::{FileCopyError, FileRef};
use crate::key::display_key;
use crate::private_fs::Durability;

/// The store error for a failed [`FileRef::copy_to`] of the file the variable `key`
/// (in the variable file `variable`) refers to.
pub(crate) fn file_copy_error(
    key: &str,
    file: &FileRef,
    variable: &Path,
    e: FileCopyError,
) -> StoreError {
    match e {
        FileCopyError::Changed(change) => StoreError::FileChanged {
            key: display_key(key),
            path: file.path.clone(),
            change: change.0,
        },
        FileCopyError::Read(source) => {
            StoreError::io("read the referenced file", file.path.clone(), source)
        }
        FileCopyError::Write(source) => StoreError::io(
            "write the contents of the file referenced by",
            variable,
            source,
        ),
    }
}

/// The [`FileRef`] a `file` variable's value holds.
pub(crate) fn decode(key: &str, value: &serde_json::Value) -> Result<FileRef> {
    <FileRef as serde::Deserialize>::deserialize(value).map_err(|e| StoreError::Json {
        action: "read the file reference in",
        key: display_key(key),
        source: e,
    })
}

/// Name of the data directory's signing key for file variables: in the directory
/// itself, which confined children (the kernel, sandboxed agents) cannot read; they
/// get `variables/` and `locks/` only.
pub(crate) const SIGNING_KEY_FILE: &str = "file-ref.key";

/// How the signing key is written: without an fsync. It is made on the path to a
/// run's first model request (the first `--context` reference of a new data
/// directory), and an fsync there waited about a second for the disk to flush a
/// multi-GB context written just before. A key lost in a crash (missing, or left
/// empty) is made again; the `file` variables signed with the old one then fail their
/// signature check with an error that says to reference the file again.
const SIGNING_KEY_DURABILITY: Durability = Durability::Bulk;

/// The shortest key accepted; a shorter file is a key a crash cut short.
pub(crate) const SIGNING_KEY_BYTES: usize = 32;

/// The data directory's signing key, made (32 random bytes, 0600) on first use.
pub(crate) fn signing_key(data_dir: &Path) -> Result<Vec<u8>> {
    let path = data_dir.join(SIGNING_KEY_FILE);
    let lost = match std::fs::read(&path) {
        Ok(key) if key.len() >= SIGNING_KEY_BYTES => return Ok(key),
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(StoreError::io("read the signing key", path, e)),
    };
    let key: Vec<u8> = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()]
        .iter()
        .flat_map(|id| id.as_bytes().to_vec())
        .collect();
    if lost {
        // Written without an fsync, it did not survive a crash: a new key, and the
        // file variables signed with the old one must be referenced again.
        tracing::warn!(
            "the signing key {} was cut short (a crash before it reached the disk): a new one is made; file variables referenced before must be referenced again",
            path.display()
        );
        crate::private_fs::write_private_atomic(&path, &key, SIGNING_KEY_DURABILITY)
            .map_err(|e| StoreError::io("write the signing key", path.clone(), e.source))?;
        // Another process may have replaced it at the same moment: use what is there.
        return std::fs::read(&path).map_err(|e| StoreError::io("read the signing key", path, e));
    }
    // Made whole under a temporary name and linked into place: two processes starting
    // at once agree on whichever key won.
    match crate::private_fs::write_private_new_with(&path, &key, SIGNING_KEY_DURABILITY) {
        Ok(()) => Ok(key),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::read(&path).map_err(|e| StoreError::io("read the signing key", path, e))
        }
        Err(e) => Err(StoreError::io("write the signing key", path, e.source)),
    }
}

/// Refuses a file variable this data directory did not sign.
pub(crate) fn verify(file: &FileRef, key: &str, variable: &Path, data_dir: &Path) -> Result<()> {
    if file.signed_by(&signing_key(data_dir)?) {
        return Ok(());
    }
    Err(StoreError::Corrupt {
        path: variable.to_owned(),
        reason: format!(
            "file variable {} does not carry this data directory's signature, so it was not made by rlm \
             (a process that can write variables could point it at any file), or the data directory's \
             signing key ({SIGNING_KEY_FILE}) was lost in a crash and made again: it is not read; \
             reference the file again with `rlm-orchestrate vars set KEY --ref PATH`",
            display_key(key)
        ),
    })
}

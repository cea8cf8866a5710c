//! What identifies the file a suite was built from (`eval --data PATH`), so that
//! results of other data are never mixed.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Which data file an item was made from: the path given and the SHA-256 of its bytes
/// (for a directory of records, of each file's name, NUL, length, NUL and contents in
/// name order, as for haystacks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataId {
    /// The path given to `--data`.
    pub path: PathBuf,
    /// SHA-256 (hex).
    pub digest: String,
}

impl DataId {
    /// The id of `bytes`, the file at `path`.
    pub(crate) fn of(path: &Path, bytes: &[u8]) -> Self {
        Self {
            path: path.to_owned(),
            digest: Sha256::digest(bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        }
    }
}

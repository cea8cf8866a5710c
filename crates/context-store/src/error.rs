//! Errors of the context store.
//!
//! Every variant carries what failed and on what (the key, the path), so a message
//! printed by the CLI or returned to a model tells the reader where to look.

use std::path::PathBuf;

/// Everything that can go wrong in the context store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A key is empty, longer than [`crate::MAX_KEY_BYTES`] or otherwise unusable.
    #[error("invalid variable key {key:?}: {reason}")]
    InvalidKey {
        /// The offending key (possibly truncated for display).
        key: String,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// No variable with this key exists in the store.
    #[error("no variable named {key:?} (list them with `rlm-orchestrate vars list`)")]
    NotFound {
        /// The key that was asked for.
        key: String,
    },

    /// `compare_and_set` found a different value than the caller expected.
    #[error(
        "conflict on variable {key:?}: expected sha256 {expected}, found {actual}; \
         re-read it and retry"
    )]
    Conflict {
        /// The variable's key.
        key: String,
        /// What the caller expected (`none` for "must not exist").
        expected: String,
        /// What the store holds (`none` when the variable does not exist).
        actual: String,
    },

    /// A file system operation failed.
    #[error("failed to {action} {}", path.display())]
    Io {
        /// What was being done, e.g. "write variable file".
        action: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A variable file could not be parsed.
    #[error("variable file {} is not a valid rlm variable: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// A text value being stored is not valid UTF-8.
    #[error("{source_name} is not valid UTF-8 at byte offset {offset}; store it as a file path or re-encode it as UTF-8")]
    InvalidUtf8 {
        /// Where the bytes came from (a file name, "stdin", …).
        source_name: String,
        /// Byte offset of the first invalid sequence.
        offset: u64,
    },

    /// The file a `file` variable refers to is not the one referenced any more.
    #[error(
        "the file {} behind variable {key:?} changed since it was referenced: {change}; \
         reference it again (start the run again, or `rlm-orchestrate vars set KEY --ref {}`), \
         or pass --copy-context so that a run works on a copy that cannot change under it",
        path.display(),
        path.display()
    )]
    FileChanged {
        /// The variable's key.
        key: String,
        /// The referenced file.
        path: std::path::PathBuf,
        /// What changed.
        change: String,
    },

    /// A value could not be serialised or parsed as JSON.
    #[error("failed to {action} JSON for variable {key:?}: {source}")]
    Json {
        /// What was being done.
        action: &'static str,
        /// The variable's key.
        key: String,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },

    /// Another process held the variable's lock for longer than the lock timeout.
    #[error(
        "timed out after {waited_ms} ms waiting for the lock on variable {key:?} ({}); \
         another process holds it (an rlm writer, or a `vars set --file -` still reading its input) — \
         retry once it is done, or find it with `fuser {}`; the lock is released when that process exits, \
         so never delete the lock file (that would let two writers in at once)",
        path.display(), path.display()
    )]
    LockTimeout {
        /// The variable's key.
        key: String,
        /// The lock file.
        path: PathBuf,
        /// How long we waited.
        waited_ms: u128,
    },

    /// A variable file's value does not match the size or sha256 its header records
    /// (a hand edit, a truncated copy, a disk error).
    #[error(
        "variable file {} does not match its recorded {what}: {reason}; \
         its value cannot be trusted — write it again with `rlm-orchestrate vars set` or remove it with `vars rm`",
        path.display()
    )]
    Integrity {
        /// The file.
        path: PathBuf,
        /// What was checked: "size" or "sha256".
        what: &'static str,
        /// What was expected and found.
        reason: String,
    },

    /// A file in `variables/` or `locks/` is a symbolic link, which rlm never follows
    /// (a link could make a variable read or a lock taken outside the data directory).
    #[error(
        "refusing to follow the symbolic link {}: rlm never follows links in variables/ or locks/; \
         replace it with a regular file (e.g. `rlm-orchestrate vars set KEY --file TARGET`) or remove it",
        path.display()
    )]
    Symlink {
        /// The link.
        path: PathBuf,
    },

    /// `wait_for` gave up before the variable appeared.
    #[error("variable {key:?} did not appear within {waited_ms} ms")]
    WaitTimeout {
        /// The awaited key.
        key: String,
        /// How long we waited.
        waited_ms: u128,
    },

    /// The file watcher could not be set up.
    #[error("failed to watch {} for new variables: {source}", path.display())]
    Watch {
        /// The watched directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: notify::Error,
    },

    /// The pluggable summariser failed.
    #[error("failed to summarise variable {key:?}: {error}")]
    Summarize {
        /// The variable's key.
        key: String,
        /// What the summariser reported (in the message already, so not a `source`:
        /// a chain printer would say it twice).
        error: crate::summary::SummarizeError,
    },
}

impl StoreError {
    /// Builds an [`StoreError::Io`] from an action, a path and an I/O error.
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

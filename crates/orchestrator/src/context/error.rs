//! Why a load failed, as one error type for every step, so the binary can map all of
//! them but one (a cancelled load) to bad input, and every message names the path.

use std::io;
use std::path::PathBuf;

use rlm_context_store::StoreError;

/// Why a context could not be loaded. All of these are bad input (exit 2) except
/// [`ContextError::Cancelled`].
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// A path does not exist.
    #[error("context path {} does not exist", .0.display())]
    NotFound(PathBuf),
    /// `--context` was given a directory.
    #[error("context path {} is a directory; use --context-dir for directories", .0.display())]
    IsDirectory(PathBuf),
    /// `--context-dir` was given something else.
    #[error("{} is not a directory; use --context for files", .0.display())]
    NotDirectory(PathBuf),
    /// The inputs are larger than allowed.
    #[error("context is {size} bytes ({}), over --max-context-bytes {max}, the most that is copied or loaded whole; {hint}", .path.display())]
    TooLarge {
        /// The file or directory that crossed the limit.
        path: PathBuf,
        /// Bytes counted so far.
        size: u64,
        /// The limit.
        max: u64,
        /// What to do instead.
        hint: &'static str,
    },
    /// An input turned out larger than allowed while it was read (a pipe, device or
    /// stdin has no size to check first; a file may grow).
    #[error("context is over --max-context-bytes ({max} bytes): reading {} crossed the limit, so nothing of it was stored; raise --max-context-bytes or pass less (a regular file passed by path is referenced, not copied, and read lazily when large)", .path.display())]
    OverLimit {
        /// The input being read when the limit was crossed.
        path: PathBuf,
        /// The limit.
        max: u64,
    },
    /// Ctrl-C or SIGTERM stopped the load.
    #[error("loading the context from {} was stopped (Ctrl-C or SIGTERM); nothing of it was stored", .path.display())]
    Cancelled {
        /// The input being read.
        path: PathBuf,
    },
    /// A `--context-dir` entry is not a regular file.
    #[error("{} in --context-dir is a {kind}, not a regular file; --context-dir reads regular files only: move it out of the directory, or pass it with --context", .path.display())]
    NotRegular {
        /// The entry.
        path: PathBuf,
        /// What it is (`FIFO (named pipe)`, `character device`, …).
        kind: &'static str,
    },
    /// A text file is not UTF-8.
    #[error("context file {} is not valid UTF-8 at byte offset {offset}; convert it to UTF-8 (e.g. iconv) first", .path.display())]
    InvalidUtf8 {
        /// The file.
        path: PathBuf,
        /// Offset of the first bad byte.
        offset: u64,
    },
    /// A `.json` file does not parse.
    #[error("context file {} is not valid JSON: {message}", .path.display())]
    InvalidJson {
        /// The file.
        path: PathBuf,
        /// serde_json's message (with line and column).
        message: String,
    },
    /// A file could not be read.
    #[error("cannot read context file {}: {source}", .path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// `--context-var` names no variable.
    #[error(
        "context variable {0:?} does not exist; list variables with `rlm-orchestrate vars list`"
    )]
    MissingVariable(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

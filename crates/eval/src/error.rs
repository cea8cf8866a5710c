//! What can go wrong in the evaluation library.

use std::path::PathBuf;

/// An evaluation error: what failed, on what, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A suite name that is not one of the four.
    #[error("unknown suite `{0}`; use sniah, multi-needle, aggregate or pairs")]
    UnknownSuite(String),
    /// A context length that cannot be read.
    #[error("bad context length `{0}`; use a number of characters with an optional k or m suffix, e.g. 8k, 1m, 64m (at least 1k)")]
    BadLength(String),
    /// A file could not be written or read.
    #[error("failed to {action} {}: {source}; check the --out directory", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// On which file.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// The chart could not be drawn.
    #[error("failed to draw the chart {}: {message}", path.display())]
    Chart {
        /// The chart's file.
        path: PathBuf,
        /// What plotters said.
        message: String,
    },
}

impl EvalError {
    /// An I/O failure doing `action` on `path`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

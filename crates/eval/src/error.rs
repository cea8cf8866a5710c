//! What can go wrong in the evaluation library.

use std::path::PathBuf;

/// An evaluation error: what failed, on what, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A suite name that is not one of the suites.
    #[error("unknown suite `{0}`; use sniah, multi-needle, aggregate, pairs, word-count, ruler/<task> (niah_single_1..3, niah_multikey_1..3, niah_multivalue, niah_multiquery, vt, cwe, fwe), oolong/trec_coarse or oolong/released")]
    UnknownSuite(String),
    /// A `--variant` that is not one of the forms.
    #[error("unknown variant `{0}`; use default, reworded, json or csv")]
    UnknownForm(String),
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
    /// The haystack (`--haystack`) could not be read.
    #[error("failed to read the haystack {}: {source}; pass --haystack a readable .txt file or a directory of .txt files", path.display())]
    HaystackRead {
        /// The file or directory.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// The haystack was read but cannot serve as one.
    #[error("the haystack {} {reason}; pass --haystack a .txt file or a directory of .txt files of prose (scripts/corpora.sh fetches some)", path.display())]
    Haystack {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A file of the haystack is a device, a FIFO or a socket, which has no end to read
    /// to (or no writer to wait for).
    #[error("the haystack file {} is {what}, not a regular file; pass --haystack a .txt file or a directory of .txt files", path.display())]
    HaystackNotRegular {
        /// The file.
        path: PathBuf,
        /// What it is (`a FIFO`, `a character device`, …).
        what: &'static str,
    },
    /// The haystack holds more than `--max-context-bytes`.
    #[error("the haystack {} holds more than {max} bytes (--max-context-bytes); pass a smaller --haystack or raise --max-context-bytes", path.display())]
    HaystackTooLarge {
        /// The file or directory.
        path: PathBuf,
        /// The limit, in bytes.
        max: u64,
    },
    /// A suite that needs real text was asked for without a haystack.
    #[error("suite {0} counts words in real text: pass --haystack FILE|DIR (scripts/corpora.sh fetches corpora; crates/eval/fixtures/haystack is a small one)")]
    HaystackRequired(&'static str),
    /// A RULER suite whose haystack is essays was asked for without a haystack.
    #[error("suite {0} hides its needles in essays (RULER's essay haystack): pass --haystack DIR of .txt essays (scripts/corpora.sh installs Paul Graham's essays, RULER's haystack, into ~/.cache/rlm-corpora/essays)")]
    EssayRequired(&'static str),
    /// A suite built from a data file was asked for without it.
    #[error("suite {suite} is built from {needs}: pass --data PATH (docs/benchmarks.md says where to get it)")]
    DataRequired {
        /// The suite.
        suite: &'static str,
        /// What file it needs.
        needs: &'static str,
    },
    /// A `--data` file could not be read.
    #[error("failed to read the data file {}: {source}; pass --data a readable file", path.display())]
    DataRead {
        /// The file.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A `--data` file was read but is not what a suite needs.
    #[error("failed to read the data file {}{}: {reason}; --data takes a TREC file (`COARSE:fine question` lines) or released OOLONG records (JSON lines), see docs/benchmarks.md", path.display(), at_line(*.line))]
    Data {
        /// The file.
        path: PathBuf,
        /// The line (from 1; 0: the file as a whole).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// Released OOLONG records were asked for beyond what a length has.
    #[error("the OOLONG records of {} hold {have} of context_len {length}, fewer than the items asked; it holds {lengths}: pass --items {have} or fewer, or --lengths among those", path.display())]
    ReleasedShort {
        /// The `--data` path.
        path: PathBuf,
        /// The length asked.
        length: u64,
        /// Records of that length.
        have: usize,
        /// The lengths the file holds, written out.
        lengths: String,
    },
    /// A context could not be written.
    #[error("failed to write a context: {0}; check the space left and the permissions of the --out directory")]
    Write(#[source] std::io::Error),
    /// The chart could not be drawn.
    #[error("failed to draw the chart {}: {message}", path.display())]
    Chart {
        /// The chart's file.
        path: PathBuf,
        /// What plotters said.
        message: String,
    },
}

/// `, line N` for a line number, nothing for 0.
fn at_line(line: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(", line {line}")
    }
}

impl EvalError {
    /// A failure reading the haystack at `path`.
    pub fn haystack_io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::HaystackRead {
            path: path.into(),
            source,
        }
    }

    /// An I/O failure doing `action` on `path`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

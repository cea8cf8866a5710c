//! How the context reaches an environment: the descriptor a run hands its REPL (files
//! by path, never the text through a pipe) and the shape `context` takes there.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Characters per item of `context_chunks` when nothing else is said.
pub const CHUNK_CHARS: u64 = 100_000;

/// How the context reaches the environment: by file path, never through a pipe.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContextSource {
    /// `single`: `context` is the value of the one file; `list`: a list of the files' values.
    pub shape: ContextShape,
    /// Variable files (`<data-dir>/variables/*.json`), read directly by the environment.
    pub files: Vec<PathBuf>,
    /// The keys of those variables, in the same order (empty when not known).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    /// Characters per item of `context_chunks` (a lazy view; no copy is made).
    pub chunk_chars: u64,
    /// For a single text context: its length in characters (lets the kernel allocate
    /// the string once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chars: Option<u64>,
    /// For a single text context: an upper bound of its largest code point
    /// (127, 255, 65535 or 1114111).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_char: Option<u32>,
    /// The files that `file` variables among `files` refer to: the environment reads
    /// them where they are (a confined kernel is allowed to).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub referenced: Vec<PathBuf>,
}

/// Shape of `context`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContextShape {
    /// One value.
    Single,
    /// A list of values.
    List,
}

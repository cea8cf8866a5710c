//! What the model is told about a loaded context, and what the environment is told to
//! find it: the result types of a load, shared by every kind of input.

use std::path::PathBuf;

use rlm_protocol::{ContextShape, ContextSource, CHUNK_CHARS};
use serde::Serialize;

/// Longest preview shown to the model, in characters.
pub const PREVIEW_CHARS: usize = 200;

/// What the model is told about the context.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ContextInfo {
    /// `str`, `list`, `dict` or another JSON kind (`number`, …).
    pub kind: String,
    /// Characters (text) or characters of the compact JSON (other values).
    pub total_chars: u64,
    /// Bytes of the stored JSON values.
    pub total_bytes: u64,
    /// Items of a list or dict.
    pub items: Option<u64>,
    /// At most [`PREVIEW_CHARS`] characters from the start.
    pub preview: String,
    /// Where it came from, for the prompt (file names, not contents).
    pub origin: String,
    /// Text statistics of a single text context (the kernel uses them to load fast).
    pub text: Option<TextStats>,
    /// Lines of a text context, when counted or estimated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<u64>,
    /// True when `total_chars` and `lines` are estimated from samples of a referenced
    /// file (it was not read whole).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
    /// True when the REPL reads it lazily (a view of the file, not a `str`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lazy: bool,
    /// True when it is a file referenced where it is (not copied into the store).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub referenced: bool,
    /// Entries of a `--context-dir` that were not read, each `path (why)` (symbolic
    /// links not followed), at most twenty named and the rest counted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

/// Statistics of a text gathered while streaming it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct TextStats {
    /// Unicode scalar values.
    pub chars: u64,
    /// Upper bound of the largest code point: 127, 255, 65535 or 1114111.
    pub max_char: u32,
}

/// A loaded context.
#[derive(Debug, Clone)]
pub struct LoadedContext {
    /// How the environment finds it.
    pub source: ContextSource,
    /// What the model is told.
    pub info: ContextInfo,
    /// The variables holding it.
    pub keys: Vec<String>,
}

impl LoadedContext {
    /// A context held in the variables `keys`, persisted for sub-agents at `paths`;
    /// `referenced` lists the files it refers to where they are.
    pub(super) fn new(
        shape: ContextShape,
        paths: Vec<PathBuf>,
        info: ContextInfo,
        keys: Vec<String>,
        referenced: Vec<PathBuf>,
    ) -> Self {
        let source = ContextSource {
            shape,
            files: paths,
            keys: keys.clone(),
            chunk_chars: CHUNK_CHARS,
            chars: info.text.map(|t| t.chars),
            max_char: info.text.map(|t| t.max_char),
            referenced,
        };
        Self { source, info, keys }
    }
}

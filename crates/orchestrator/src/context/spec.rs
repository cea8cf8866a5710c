//! What the user asked to load, and where its variables go: the settings a caller
//! fills in ([`ContextSpec`], [`ContextKeys`]) kept apart from the loading itself, so
//! the CLI and the session can build them without reading any of the loader.

use std::path::{Path, PathBuf};

use rlm_context_store::{Durability, SetOptions};
use serde::{Deserialize, Serialize};

use super::input::STDIN_PATH;
use super::lazy::LazyPolicy;

/// Default `--max-context-bytes`: 1 GiB.
pub const DEFAULT_MAX_CONTEXT_BYTES: u64 = 1 << 30;

/// How `--context-dir` becomes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DirAs {
    /// A list of file contents in lexical order of their paths.
    #[default]
    List,
    /// `{relative path: content}`.
    Dict,
    /// One string: each file preceded by a `=== path ===` line.
    Concat,
}

/// Where the context comes from (at most one of the three kinds).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextSpec {
    /// `--context` files; several make a list. `-` ([`STDIN_PATH`]) is stdin.
    pub files: Vec<PathBuf>,
    /// `--context-dir`.
    pub dir: Option<PathBuf>,
    /// `--dir-as`.
    pub dir_as: DirAs,
    /// `--follow-symlinks`: follow the symbolic links of `--context-dir` that resolve
    /// inside it (others are skipped, and listed as skipped, either way).
    #[serde(default)]
    pub follow_symlinks: bool,
    /// `--context-var`: an existing variable.
    pub var: Option<String>,
    /// `--max-context-bytes`: the most that is copied into the store or loaded whole.
    pub max_bytes: u64,
    /// `--copy-context`: copy `--context` files into the store instead of referencing
    /// them.
    #[serde(default)]
    pub copy: bool,
    /// `--lazy-context` and `--lazy-above`: which referenced files the REPL reads lazily.
    #[serde(default)]
    pub lazy: LazyPolicy,
}

impl ContextSpec {
    /// True when no context was given.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.dir.is_none() && self.var.is_none()
    }
}

/// Where a run's context variables go.
#[derive(Debug, Clone)]
pub struct ContextKeys {
    /// Key of a single context; several get `-0`, `-1`, … appended.
    pub prefix: String,
    /// Their scope, e.g. `session:<run-id>`.
    pub scope: String,
}

impl ContextKeys {
    /// The key of slot `index` of `count` context inputs.
    pub(super) fn slot_key(&self, index: usize, count: usize) -> String {
        if count == 1 {
            self.prefix.clone()
        } else {
            format!("{}-{index}", self.prefix)
        }
    }

    /// How a reference to a file is stored: in the run's scope.
    pub(super) fn reference_options(&self) -> SetOptions {
        SetOptions::default().scope(self.scope.clone())
    }

    /// How a copy of `source` is stored: in the run's scope, and, when it is a copy of
    /// a file or directory the user still has, without the fsyncs (a 512 MiB copy spent
    /// seconds waiting for the disk; a power failure loses the run anyway, not the
    /// input). Stdin is kept durable: it cannot be read again.
    pub(super) fn copy_options(&self, source: &Path) -> SetOptions {
        let options = self.reference_options();
        if source.as_os_str() == STDIN_PATH {
            options
        } else {
            options.durability(Durability::Bulk)
        }
    }
}

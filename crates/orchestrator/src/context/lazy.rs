//! `--lazy-context`: when the REPL's `context` is a lazy, memory-mapped view of a
//! referenced file rather than a `str` loaded whole.

use serde::{Deserialize, Serialize};

/// Default size above which `--lazy-context auto` reads a referenced file lazily: 1 GiB.
pub const DEFAULT_LAZY_ABOVE_BYTES: u64 = 1 << 30;

/// `--lazy-context`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LazyMode {
    /// Lazy for referenced files larger than the threshold (`--lazy-above`).
    #[default]
    Auto,
    /// Lazy for every referenced file.
    Always,
    /// Never lazy: every context is loaded whole (and `--max-context-bytes` applies).
    Never,
}

/// Which referenced files are read lazily.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LazyPolicy {
    /// `--lazy-context`.
    pub mode: LazyMode,
    /// `--lazy-above`: the threshold of `auto`, in bytes.
    pub above_bytes: u64,
}

impl Default for LazyPolicy {
    fn default() -> Self {
        Self {
            mode: LazyMode::Auto,
            above_bytes: DEFAULT_LAZY_ABOVE_BYTES,
        }
    }
}

impl LazyPolicy {
    /// Whether a referenced file of `size` bytes is read lazily.
    pub fn is_lazy(&self, size: u64) -> bool {
        match self.mode {
            LazyMode::Always => true,
            LazyMode::Never => false,
            LazyMode::Auto => size > self.above_bytes,
        }
    }

    /// The size above which files are lazy, for an environment deciding per file:
    /// `Some(0)` for `always`, `None` for `never`.
    pub fn lazy_above(&self) -> Option<u64> {
        match self.mode {
            LazyMode::Always => Some(0),
            LazyMode::Never => None,
            LazyMode::Auto => Some(self.above_bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_is_lazy_only_above_the_threshold() {
        let auto = LazyPolicy::default();
        assert!(!auto.is_lazy(DEFAULT_LAZY_ABOVE_BYTES));
        assert!(auto.is_lazy(DEFAULT_LAZY_ABOVE_BYTES + 1));
        assert_eq!(auto.lazy_above(), Some(DEFAULT_LAZY_ABOVE_BYTES));
        let always = LazyPolicy {
            mode: LazyMode::Always,
            ..auto
        };
        assert!(always.is_lazy(1) && always.lazy_above() == Some(0));
        let never = LazyPolicy {
            mode: LazyMode::Never,
            ..auto
        };
        assert!(!never.is_lazy(u64::MAX) && never.lazy_above().is_none());
    }
}

//! The regular expressions plans hold: case-insensitive, multi-line (`^` and `$` at
//! line ends), bounded in length and compiled size, in Rust's `regex` syntax.

use regex::{Regex, RegexBuilder};

/// Longest regular expression a plan may hold, in bytes (compiled size is bounded too).
pub const MAX_PATTERN_BYTES: usize = 1_000;

/// Compiled size a plan's pattern may take.
const MAX_COMPILED_BYTES: usize = 1 << 20;

/// Why a plan's pattern cannot be used; the message is for the model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatternError {
    /// Longer than [`MAX_PATTERN_BYTES`].
    #[error("the pattern is {bytes} bytes, over {MAX_PATTERN_BYTES}")]
    TooLong {
        /// Its length.
        bytes: usize,
    },
    /// Not a regular expression of Rust's `regex` syntax, or too large compiled.
    #[error("`{pattern}` is not a regular expression rlm can use ({error}); Rust regex syntax, no look-around or back-references")]
    Invalid {
        /// The pattern.
        pattern: String,
        /// What the compiler said (in the message, which the model reads, so not a
        /// source).
        error: regex::Error,
    },
}

/// Compiles a plan's pattern, or says why it cannot be used.
pub fn compile(pattern: &str) -> Result<Regex, PatternError> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(PatternError::TooLong {
            bytes: pattern.len(),
        });
    }
    RegexBuilder::new(pattern)
        .case_insensitive(true)
        .multi_line(true)
        .size_limit(MAX_COMPILED_BYTES)
        .build()
        .map_err(|error| PatternError::Invalid {
            pattern: pattern.to_owned(),
            error,
        })
}

//! The regular expressions plans hold: case-insensitive, multi-line (`^` and `$` at
//! line ends), bounded in length and compiled size, in Rust's `regex` syntax.

use regex::{Regex, RegexBuilder};

/// Longest regular expression a plan may hold, in bytes (compiled size is bounded too).
pub const MAX_PATTERN_BYTES: usize = 1_000;

/// Compiled size a plan's pattern may take.
const MAX_COMPILED_BYTES: usize = 1 << 20;

/// Compiles a plan's pattern, or says why it cannot be used.
pub fn compile(pattern: &str) -> Result<Regex, String> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(format!(
            "the pattern is {} bytes, over {MAX_PATTERN_BYTES}",
            pattern.len()
        ));
    }
    RegexBuilder::new(pattern)
        .case_insensitive(true)
        .multi_line(true)
        .size_limit(MAX_COMPILED_BYTES)
        .build()
        .map_err(|e| format!("`{pattern}` is not a regular expression rlm can use ({e}); Rust regex syntax, no look-around or back-references"))
}

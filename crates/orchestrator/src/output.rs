//! Shaping REPL output before it goes back to the model: the redaction guard against
//! context dumps, then truncation with a stable, explicit marker.

/// What replaces output that would leak too much of the context into the prompt.
pub const REDACTED_MARKER: &str = "[redacted: output too large]";

/// Default cap on output characters per block (`--max-output-chars`).
pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 20_000;

/// Default redaction ratio (`--redact-ratio`).
pub const DEFAULT_REDACT_RATIO: f64 = 0.25;

/// Output shorter than this is never redacted: for a tiny context, "25 % of the
/// context" is a few characters, and showing them costs nothing.
pub const REDACT_FLOOR_CHARS: usize = 2_000;

/// The marker appended to truncated output. Stable so models learn it.
pub fn truncation_marker(shown: usize, total: usize) -> String {
    format!("\n[output truncated: showing the first {shown} of {total} characters]")
}

/// Applies the redaction guard and truncation to one block's output.
///
/// Output longer than `redact_ratio × context_chars` is replaced by
/// [`REDACTED_MARKER`] (skipped when there is no context, and for output under
/// [`REDACT_FLOOR_CHARS`]); otherwise output longer
/// than `max_chars` is cut on a character boundary and marked.
pub fn shape_output(
    output: &str,
    max_chars: usize,
    context_chars: u64,
    redact_ratio: f64,
) -> String {
    let chars = output.chars().count();
    if context_chars > 0
        && chars >= REDACT_FLOOR_CHARS
        && redact_ratio > 0.0
        && (chars as f64) > redact_ratio * context_chars as f64
    {
        return REDACTED_MARKER.to_owned();
    }
    if chars <= max_chars {
        return output.to_owned();
    }
    let cut = output
        .char_indices()
        .nth(max_chars)
        .map_or(output.len(), |(i, _)| i);
    let mut shaped = output[..cut].to_owned();
    shaped.push_str(&truncation_marker(max_chars, chars));
    shaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_untouched() {
        assert_eq!(shape_output("hello", 10, 1000, 0.25), "hello");
    }

    #[test]
    fn long_output_is_cut_with_a_stable_marker() {
        let out = shape_output(&"é".repeat(30), 10, 1_000_000, 0.25);
        assert_eq!(
            out,
            format!(
                "{}\n[output truncated: showing the first 10 of 30 characters]",
                "é".repeat(10)
            )
        );
    }

    #[test]
    fn dumping_the_context_is_redacted() {
        assert_eq!(
            shape_output(&"x".repeat(3000), 20_000, 10_000, 0.25),
            REDACTED_MARKER
        );
        assert_eq!(
            shape_output(&"x".repeat(2400), 20_000, 10_000, 0.25),
            "x".repeat(2400)
        );
    }

    #[test]
    fn short_output_of_a_tiny_context_is_never_redacted() {
        assert_eq!(shape_output("5\n", 20_000, 5, 0.25), "5\n");
    }

    #[test]
    fn no_context_means_no_redaction() {
        assert_eq!(shape_output("abc", 20_000, 0, 0.25), "abc");
    }
}

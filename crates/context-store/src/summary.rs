//! Summaries of variables for prompts and inventories.
//!
//! The default is the TypeScript store's truncation (`max_tokens × 4` characters); an LLM-backed
//! summariser plugs in through [`Summarizer`]. The store caches summaries by the
//! value's sha256, so an unchanged variable is summarised once.

use serde_json::Value;

/// Characters per token assumed by truncation.
pub const CHARS_PER_TOKEN: usize = 4;

/// Something that turns a value into a short text.
pub trait Summarizer: Send + Sync {
    /// Summarises `value` (the variable `key`) in about `max_tokens` tokens.
    fn summarize(&self, key: &str, value: &Value, max_tokens: usize) -> Result<String, String>;
}

/// Keeps the first `max_tokens × 4` characters, with a marker when it cut.
#[derive(Debug, Default, Clone, Copy)]
pub struct TruncatingSummarizer;

impl Summarizer for TruncatingSummarizer {
    fn summarize(&self, _key: &str, value: &Value, max_tokens: usize) -> Result<String, String> {
        let text = match value {
            Value::String(s) => std::borrow::Cow::Borrowed(s.as_str()),
            other => std::borrow::Cow::Owned(other.to_string()),
        };
        Ok(truncate_chars(
            &text,
            max_tokens.saturating_mul(CHARS_PER_TOKEN),
        ))
    }
}

/// The first `max_chars` characters of `text`, plus `… [truncated, N chars total]` if cut.
pub fn truncate_chars(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some((cut, _)) => {
            let total = text.chars().count();
            format!("{}… [truncated, {total} chars total]", &text[..cut])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn truncates_on_char_boundaries() {
        assert_eq!(truncate_chars("héllo", 10), "héllo");
        assert_eq!(truncate_chars("héllo", 2), "hé… [truncated, 5 chars total]");
    }

    #[test]
    fn json_is_summarised_as_text() {
        let s = TruncatingSummarizer
            .summarize("k", &json!({"a": 1}), 2)
            .unwrap();
        assert_eq!(s, r#"{"a":1}"#);
    }
}

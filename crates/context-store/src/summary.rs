//! Summaries of variables for prompts and inventories.
//!
//! The default is the TypeScript store's truncation (`max_tokens × 4` characters); an LLM-backed
//! summariser plugs in through [`Summarizer`]. The store caches summaries by the
//! value's sha256, so an unchanged variable is summarised once.

use serde_json::Value;

/// Characters per token assumed by truncation.
pub const CHARS_PER_TOKEN: usize = 4;

/// Why a [`Summarizer`] could not summarise a value, in its own words (an LLM-backed
/// one: the provider's error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SummarizeError {
    /// What went wrong.
    pub message: String,
}

impl SummarizeError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// Something that turns a value into a short text.
pub trait Summarizer: Send + Sync {
    /// Summarises `value` (the variable `key`) in about `max_tokens` tokens.
    fn summarize(
        &self,
        key: &str,
        value: &Value,
        max_tokens: usize,
    ) -> Result<String, SummarizeError>;
}

/// Keeps the first `max_tokens × 4` characters, with a marker when it cut.
#[derive(Debug, Default, Clone, Copy)]
pub struct TruncatingSummarizer;

impl Summarizer for TruncatingSummarizer {
    fn summarize(
        &self,
        _key: &str,
        value: &Value,
        max_tokens: usize,
    ) -> Result<String, SummarizeError> {
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

    #[test]
    fn a_summariser_error_reads_as_its_message_in_the_store_error() {
        struct Failing;
        impl Summarizer for Failing {
            fn summarize(&self, _: &str, _: &Value, _: usize) -> Result<String, SummarizeError> {
                Err(SummarizeError::new("the provider is down"))
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let options = crate::StoreOptions {
            summarizer: std::sync::Arc::new(Failing),
            ..crate::StoreOptions::default()
        };
        let store = crate::Store::open_with(dir.path(), options).unwrap();
        store
            .set("k", json!("text"), crate::SetOptions::default())
            .unwrap();
        let error = store.summarize("k", 10).unwrap_err();
        assert_eq!(
            error.to_string(),
            "failed to summarise variable \"k\": the provider is down"
        );
    }
}

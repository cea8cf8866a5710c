//! Describing a context by metadata: kind, sizes, item count and a short preview, so
//! the prompt's size never depends on the context's. Pure functions over what was
//! already measured; nothing here reads a file or the store.

use serde_json::Value;

use super::info::{ContextInfo, TextStats, PREVIEW_CHARS};
use super::sample::Sampled;

/// Describes an in-memory value.
pub fn describe_value(value: &Value, origin: String) -> ContextInfo {
    let (kind, items) = match value {
        Value::String(_) => ("str", None),
        Value::Array(a) => ("list", Some(a.len() as u64)),
        Value::Object(o) => ("dict", Some(o.len() as u64)),
        Value::Number(_) => ("number", None),
        Value::Bool(_) => ("bool", None),
        Value::Null => ("none", None),
    };
    let (total_chars, preview, text) = match value {
        Value::String(s) => {
            let chars = s.chars().count() as u64;
            (
                chars,
                s.chars().take(PREVIEW_CHARS).collect(),
                Some(TextStats {
                    chars,
                    max_char: max_char_class(s),
                }),
            )
        }
        other => {
            let compact = other.to_string();
            (
                compact.chars().count() as u64,
                compact.chars().take(PREVIEW_CHARS).collect(),
                None,
            )
        }
    };
    let total_bytes = serde_json::to_vec(value)
        .map(|v| v.len() as u64)
        .unwrap_or(0);
    ContextInfo {
        kind: kind.into(),
        total_chars,
        total_bytes,
        items,
        preview,
        origin,
        text,
        ..ContextInfo::default()
    }
}

/// Describes a file referenced where it is, from its samples.
pub(super) fn describe_referenced_file(
    sampled: Sampled,
    size: u64,
    lazy: bool,
    origin: String,
) -> ContextInfo {
    ContextInfo {
        kind: "str".into(),
        total_chars: sampled.chars,
        total_bytes: size,
        items: None,
        preview: sampled.preview,
        origin,
        text: None,
        lines: Some(sampled.lines),
        estimated: !sampled.exact,
        lazy,
        referenced: true,
        skipped: Vec::new(),
    }
}

/// Describes streamed text from the statistics gathered on the way.
pub(super) fn describe_streamed_text(
    stats: TextStats,
    total_bytes: u64,
    preview: String,
    origin: String,
) -> ContextInfo {
    ContextInfo {
        kind: "str".into(),
        total_chars: stats.chars,
        total_bytes,
        items: None,
        preview,
        origin,
        text: Some(stats),
        ..ContextInfo::default()
    }
}

/// Describes several inputs loaded as one list: sizes summed, the first one's preview.
pub(super) fn describe_list(infos: Vec<ContextInfo>) -> ContextInfo {
    let items = infos.len() as u64;
    let total_chars = infos.iter().map(|i| i.total_chars).sum();
    let total_bytes = infos.iter().map(|i| i.total_bytes).sum();
    let origin = infos
        .iter()
        .map(|i| i.origin.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let preview = infos.first().map(|i| i.preview.clone()).unwrap_or_default();
    ContextInfo {
        kind: "list".into(),
        total_chars,
        total_bytes,
        items: Some(items),
        preview,
        origin,
        text: None,
        lines: None,
        estimated: infos.iter().any(|i| i.estimated),
        lazy: infos.iter().any(|i| i.lazy),
        referenced: infos.iter().any(|i| i.referenced),
        skipped: Vec::new(),
    }
}

/// The upper bound of the largest code point in `s`: 127, 255, 65535 or 1114111.
fn max_char_class(s: &str) -> u32 {
    match s.chars().map(u32::from).max().unwrap_or(0) {
        0..=0x7f => 0x7f,
        0x80..=0xff => 0xff,
        0x100..=0xffff => 0xffff,
        _ => 0x10ffff,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_described_by_kind_size_and_a_bounded_preview() {
        let text = describe_value(&Value::String("é".repeat(300)), "t".into());
        assert_eq!((text.kind.as_str(), text.total_chars), ("str", 300));
        assert_eq!(text.preview.chars().count(), PREVIEW_CHARS);
        assert_eq!(
            text.text,
            Some(TextStats {
                chars: 300,
                max_char: 0xff
            })
        );
        let list = describe_value(&serde_json::json!([1, "two", {"three": 3}]), "l".into());
        assert_eq!((list.kind.as_str(), list.items), ("list", Some(3)));
        assert_eq!(list.preview, r#"[1,"two",{"three":3}]"#);
        assert_eq!(list.text, None);
        let none = describe_value(&Value::Null, String::new());
        assert_eq!((none.kind.as_str(), none.total_bytes), ("none", 4));
    }

    #[test]
    fn the_char_class_is_the_smallest_that_holds_every_character() {
        assert_eq!(max_char_class(""), 0x7f);
        assert_eq!(max_char_class("abc"), 0x7f);
        assert_eq!(max_char_class("aÿ"), 0xff);
        assert_eq!(max_char_class("aĀ"), 0xffff);
        assert_eq!(max_char_class("a😀"), 0x10ffff);
    }
}

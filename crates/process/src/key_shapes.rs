//! Credentials recognised by their shape, whoever's they are: an agent that prints a
//! key it found (in its own config, a file, its environment) has it scrubbed even when
//! the key is not one this process was given.
//!
//! A shape is a well-known prefix (`sk-ant-`, `sk-`, `ghp_`, `AKIA`, …) at the start of
//! a token, followed by enough token characters (`A-Z a-z 0-9 _ -`) that it cannot be
//! an ordinary word (`sk-learn`, `kiosk-3` and `task-7` stay).

use std::borrow::Cow;

/// What a key found by its shape is replaced by.
pub const REDACTED_KEY: &str = "[redacted key]";

/// Known key prefixes and the fewest token characters that must follow each.
const SHAPES: &[(&str, usize)] = &[
    // Anthropic (`sk-ant-api03-…`) and OpenAI (`sk-…`, `sk-proj-…`) keys.
    ("sk-", 20),
    // GitHub tokens.
    ("ghp_", 30),
    ("gho_", 30),
    ("ghs_", 30),
    ("ghu_", 30),
    ("github_pat_", 30),
    // Hugging Face, Google, Slack, AWS access key ids.
    ("hf_", 30),
    ("AIza", 30),
    ("xoxb-", 20),
    ("xoxp-", 20),
    ("AKIA", 16),
];

/// Whether `byte` may be part of a key.
fn is_key_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-'
}

/// The end of the key that starts at `start` with a prefix of `prefix_len` bytes, if
/// enough key characters follow it.
fn key_end(bytes: &[u8], start: usize, prefix_len: usize, min_body: usize) -> Option<usize> {
    if start > 0 && is_key_byte(bytes[start - 1]) {
        return None;
    }
    let body_start = start + prefix_len;
    let body = bytes[body_start..]
        .iter()
        .take_while(|b| is_key_byte(**b))
        .count();
    (body >= min_body).then_some(body_start + body)
}

/// `text` with every credential of a known shape replaced by [`REDACTED_KEY`];
/// borrowed when there was none.
pub fn redact_key_shapes(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut at = 0;
    while at < bytes.len() {
        // Every prefix starts with one of these.
        if !matches!(bytes[at], b's' | b'g' | b'h' | b'A' | b'x') {
            at += 1;
            continue;
        }
        let found = SHAPES.iter().find_map(|(prefix, min_body)| {
            bytes[at..]
                .starts_with(prefix.as_bytes())
                .then(|| key_end(bytes, at, prefix.len(), *min_body))
                .flatten()
        });
        match found {
            Some(end) => {
                let buffer = out.get_or_insert_with(|| String::with_capacity(text.len()));
                // Prefixes are ASCII and keys end before a non-key byte: both ends are
                // character boundaries.
                buffer.push_str(&text[copied..at]);
                buffer.push_str(REDACTED_KEY);
                copied = end;
                at = end;
            }
            None => at += 1,
        }
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut buffer) => {
            buffer.push_str(&text[copied..]);
            Cow::Owned(buffer)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_known_shapes_are_scrubbed() {
        let anthropic = "sk-ant-api03-AbCdEf0123456789_AbCdEf0123456789-xyzXYZ0123AA";
        let openai = "sk-proj-0123456789abcdefABCDEF0123456789";
        let text = format!("err={anthropic}\nOPENAI={openai} done\n\"{openai}\"");
        let scrubbed = redact_key_shapes(&text);
        assert_eq!(
            scrubbed,
            "err=[redacted key]\nOPENAI=[redacted key] done\n\"[redacted key]\""
        );
        assert_eq!(
            redact_key_shapes("token ghp_0123456789abcdefghijABCDEFGHIJ0123 ok"),
            "token [redacted key] ok"
        );
    }

    #[test]
    fn ordinary_words_stay() {
        for plain in [
            "kiosk-3 sold 4.50",
            "task-0123456789abcdefghijklmnop",
            "pip install sk-learn",
            "sk-short",
            "AKIA",
            "é sk- ü",
        ] {
            assert!(
                matches!(redact_key_shapes(plain), Cow::Borrowed(_)),
                "{plain}"
            );
        }
    }
}

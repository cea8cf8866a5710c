//! Variable keys and the file names they map to.
//!
//! Keys are arbitrary UTF-8 (1–512 bytes). File names must be portable and must never
//! escape `variables/`, so a key is sanitised to `[A-Za-z0-9._-]`; whenever that changed
//! anything (or the key could be mistaken for a sanitised one) a hash suffix derived
//! from the whole key is appended. Two different keys therefore never share a file:
//! unsuffixed names are the key itself, and suffixed names end in `--<16 hex>` that an
//! unsuffixed name never does.

use sha2::{Digest, Sha256};

use crate::error::{Result, StoreError};

/// The longest key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 512;

/// Longest sanitised stem kept before the hash suffix, so names stay under 255 bytes.
const MAX_STEM_BYTES: usize = 160;

/// Length of the hex hash suffix.
const SUFFIX_HEX_LEN: usize = 16;

/// File name extension of variable files.
pub const VARIABLE_FILE_EXT: &str = "json";

/// Checks that `key` is usable as a variable key.
pub fn validate_key(key: &str) -> Result<()> {
    let reason = if key.is_empty() {
        Some("a key must not be empty")
    } else if key.len() > MAX_KEY_BYTES {
        Some("a key must be at most 512 bytes")
    } else {
        // Any other UTF-8 is fine, NUL and control characters included (docs/store.md, "File names"): a
        // key only reaches the file system through its sanitised `file_stem`, and JSON
        // escapes it in the header.
        None
    };
    match reason {
        Some(reason) => Err(StoreError::InvalidKey {
            key: display_key(key),
            reason,
        }),
        None => Ok(()),
    }
}

/// The file stem (name without `.json`) for a key. Assumes `validate_key` passed.
pub fn file_stem(key: &str) -> String {
    let sanitised: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let needs_suffix = sanitised != key
        || key.starts_with('.')
        || key.len() > MAX_STEM_BYTES
        || looks_suffixed(key);
    if !needs_suffix {
        return sanitised;
    }
    let mut stem: String = sanitised.chars().take(MAX_STEM_BYTES).collect();
    if stem.starts_with('.') {
        stem.replace_range(0..1, "_");
    }
    stem.push_str("--");
    stem.push_str(&short_hash(key));
    stem
}

/// The file name (`<stem>.json`) for a key.
pub fn file_name(key: &str) -> String {
    format!("{}.{VARIABLE_FILE_EXT}", file_stem(key))
}

/// True when `name` ends like a hashed stem (`--` and 16 lowercase hex digits).
fn looks_suffixed(name: &str) -> bool {
    let bytes = name.as_bytes();
    if bytes.len() < SUFFIX_HEX_LEN + 2 {
        return false;
    }
    let (head, tail) = bytes.split_at(bytes.len() - SUFFIX_HEX_LEN);
    head.ends_with(b"--") && tail.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn short_hash(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    digest
        .iter()
        .take(SUFFIX_HEX_LEN / 2)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A key shortened for error messages.
pub(crate) fn display_key(key: &str) -> String {
    const SHOWN: usize = 80;
    if key.len() <= SHOWN {
        return key.to_owned();
    }
    let mut end = SHOWN;
    while !key.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &key[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_keys_keep_their_name() {
        assert_eq!(file_name("chunk-3"), "chunk-3.json");
        assert_eq!(file_name("sub-result-1234.a_b"), "sub-result-1234.a_b.json");
    }

    #[test]
    fn sanitised_keys_get_a_suffix_and_never_collide() {
        let slash = file_stem("a/b");
        assert!(slash.starts_with("a_b--"), "{slash}");
        assert_ne!(slash, file_stem("a_b"));
        // A key spelled like another key's sanitised name is suffixed again.
        assert_ne!(file_stem(&slash), slash);
    }

    #[test]
    fn dot_keys_cannot_escape_or_hide() {
        for key in [".", "..", "../etc/passwd", ".hidden"] {
            let stem = file_stem(key);
            assert!(!stem.starts_with('.'), "{key} -> {stem}");
            assert!(!stem.contains('/'), "{key} -> {stem}");
        }
    }

    #[test]
    fn long_keys_are_bounded() {
        let key = "x".repeat(MAX_KEY_BYTES);
        assert!(file_name(&key).len() < 200);
        assert!(validate_key(&key).is_ok());
        assert!(validate_key(&"x".repeat(MAX_KEY_BYTES + 1)).is_err());
        assert!(validate_key("").is_err());
    }

    #[test]
    fn any_utf8_is_a_key_and_never_reaches_the_file_name_raw() {
        for key in ["nul\0byte", "\0", "tab\tnew\nline", "\u{7f}"] {
            assert!(validate_key(key).is_ok(), "{key:?}");
            let stem = file_stem(key);
            assert!(
                stem.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)),
                "{key:?} -> {stem:?}"
            );
        }
    }
}

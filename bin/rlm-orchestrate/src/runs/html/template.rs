//! The page around a rendered trace, and what keeps it safe: the template
//! (`viewer.html`, with its CSS and script), HTML escaping, `{{placeholder}}` filling,
//! and the Content Security Policy hashes that let only the template's own style and
//! script run.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

/// The page: CSS, script and `{{placeholders}}`.
const TEMPLATE: &str = include_str!("../viewer.html");

/// The whole page: `title` (plain text, escaped here) and `body` (HTML) in the
/// template, with the CSP hashes of its style and script.
pub fn page(title: &str, body: &str) -> String {
    fill(
        TEMPLATE,
        &[
            ("title", &esc(title)),
            (
                "style_hash",
                &csp_hash(between(TEMPLATE, "<style>", "</style>")),
            ),
            (
                "script_hash",
                &csp_hash(between(TEMPLATE, "<script>", "</script>")),
            ),
            ("body", body),
        ],
    )
}

/// Escapes text for HTML content and quoted attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters other than tab and newlines are not allowed in HTML.
            c if c.is_control() && !matches!(c, '\n' | '\t' | '\r') => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// Replaces each `{{name}}` of `template` once, in one pass, so that a value holding
/// `{{…}}` is never itself filled in.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out =
        String::with_capacity(template.len() + values.iter().map(|(_, v)| v.len()).sum::<usize>());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let found = after.find("}}").and_then(|end| {
            let name = &after[..end];
            values
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v, end))
        });
        match found {
            Some((value, end)) => {
                out.push_str(value);
                rest = &after[end + 2..];
            }
            None => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The text between the first `open` and the next `close` of `text`.
fn between<'a>(text: &'a str, open: &str, close: &str) -> &'a str {
    text.split_once(open)
        .and_then(|(_, rest)| rest.split_once(close))
        .map_or("", |(inside, _)| inside)
}

/// A CSP source allowing exactly the inline element whose text is `inline`.
fn csp_hash(inline: &str) -> String {
    format!("'sha256-{}'", base64(&Sha256::digest(inline.as_bytes())))
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> shift & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_content_and_attributes() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(esc("a\u{0}b\u{1b}"), "a\\u{0}b\\u{1b}");
    }

    #[test]
    fn placeholders_are_filled_once() {
        let page = fill(
            "<b>{{a}}</b>{{b}}{{unknown}}",
            &[("a", "{{b}}"), ("b", "B")],
        );
        assert_eq!(page, "<b>{{b}}</b>B{{unknown}}");
    }

    #[test]
    fn base64_matches_the_standard() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        // sha256("") in CSP form.
        assert_eq!(
            csp_hash(""),
            "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='"
        );
    }

    #[test]
    fn the_template_has_its_placeholders_and_no_remote_resources() {
        for name in ["title", "style_hash", "script_hash", "body"] {
            assert!(TEMPLATE.contains(&format!("{{{{{name}}}}}")), "{name}");
        }
        for remote in ["http://", "https://", "src=", "@import", "url("] {
            assert!(!TEMPLATE.contains(remote), "{remote}");
        }
        assert!(!between(TEMPLATE, "<script>", "</script>").is_empty());
        assert!(!between(TEMPLATE, "<style>", "</style>").is_empty());
    }
}

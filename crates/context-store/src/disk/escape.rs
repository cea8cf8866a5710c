//! JSON string escaping for streamed text values, byte for byte what `serde_json`
//! writes (the store hashes the encoded value, so a streamed text and the same text
//! set whole must encode alike), but fast on text that needs no escape: eight bytes are
//! checked at a time, and runs without a quote, backslash or control character are
//! copied whole. Copying a 512 MiB context spent more than a third of its time in
//! `serde_json`'s byte-at-a-time escaping.

/// `0x01` in every byte of a word.
const ONES: u64 = 0x0101_0101_0101_0101;
/// The high bit of every byte of a word.
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Whether any byte of `word` is below 0x20, a `"` or a `\`.
fn needs_escape(word: u64) -> bool {
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    let quote = word ^ (ONES * u64::from(b'"'));
    let backslash = word ^ (ONES * u64::from(b'\\'));
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS != 0;
    below_space != 0 || has_zero(quote) || has_zero(backslash)
}

/// Appends the body of the JSON string literal of `text` (without its quotes) to `out`.
pub(crate) fn escape_into(text: &str, out: &mut Vec<u8>) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + bytes.len() / 16);
    let mut run_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if let Some(chunk) = bytes.get(i..i + 8) {
            let mut word = [0_u8; 8];
            word.copy_from_slice(chunk);
            if !needs_escape(u64::from_le_bytes(word)) {
                i += 8;
                continue;
            }
        }
        let byte = bytes[i];
        let escaped: Option<&[u8]> = match byte {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0x08 => Some(b"\\b"),
            0x0c => Some(b"\\f"),
            _ => None,
        };
        if escaped.is_some() || byte < 0x20 {
            out.extend_from_slice(&bytes[run_start..i]);
            match escaped {
                Some(sequence) => out.extend_from_slice(sequence),
                None => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    out.extend_from_slice(b"\\u00");
                    out.push(HEX[usize::from(byte >> 4)]);
                    out.push(HEX[usize::from(byte & 0xf)]);
                }
            }
            run_start = i + 1;
        }
        i += 1;
    }
    out.extend_from_slice(&bytes[run_start..]);
}

#[cfg(test)]
mod tests {
    use super::escape_into;
    use proptest::prelude::*;

    fn serde_escaped(text: &str) -> Vec<u8> {
        let quoted = serde_json::to_vec(text).unwrap();
        quoted[1..quoted.len() - 1].to_vec()
    }

    #[test]
    fn every_escape_matches_serde_json() {
        let all: String = (0_u8..0x80).map(char::from).collect();
        for text in [
            all.as_str(),
            "",
            "plain ascii text that needs nothing at all",
            "quote \" backslash \\ newline \n tab \t",
            "é 😀 \u{2028} \u{7f}",
            "12345678\"12345678\\",
        ] {
            let mut out = Vec::new();
            escape_into(text, &mut out);
            assert_eq!(out, serde_escaped(text), "{text:?}");
        }
    }

    proptest! {
        #[test]
        fn any_text_escapes_as_serde_json_does(text in "(?s).{0,300}", noise in proptest::collection::vec(0_u8..0x80, 0..64)) {
            let mixed: String = text.chars().chain(noise.iter().map(|b| char::from(*b))).collect();
            let mut out = Vec::new();
            escape_into(&mixed, &mut out);
            prop_assert_eq!(out, serde_escaped(&mixed));
        }
    }
}

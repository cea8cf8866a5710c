//! How the text of a result is read, by every reduction alike: its first number
//! (`sum`, `argmax`), and its normalised form (what `vote`, `union` and `group_by`
//! compare), so one result reads the same wherever it is reduced.

/// The first number in `text`: digits with optional thousands separators (`1,432`),
/// a decimal part and a sign.
pub fn first_number(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    let start = bytes.iter().position(u8::is_ascii_digit)?;
    let negative = start > 0 && bytes[start - 1] == b'-';
    let mut digits = String::new();
    let mut i = start;
    while i < bytes.len() {
        let b = bytes[i];
        let grouped = b == b','
            && i + 3 < bytes.len() + 1
            && bytes[i + 1..].iter().take(3).all(u8::is_ascii_digit)
            && bytes.get(i + 4).is_none_or(|b| !b.is_ascii_digit());
        if b.is_ascii_digit() {
            digits.push(b as char);
        } else if grouped {
            // "1,432": a thousands separator, skipped.
        } else if b == b'.'
            && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)
            && !digits.contains('.')
        {
            digits.push('.');
        } else {
            break;
        }
        i += 1;
    }
    let value: f64 = digits.parse().ok()?;
    Some(if negative { -value } else { value })
}

/// `text` lower-cased, trimmed, its whitespace made single spaces and its trailing
/// full stop dropped.
pub fn normalise(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .join(" ")
        .to_lowercase()
        .trim_end_matches('.')
        .to_owned()
}

//! Reading the JSON a small model writes: single quotes, raw control characters in
//! strings, trailing commas and sums of whole numbers are mended before parsing. Used
//! by the strict argument parser and the text protocol alike.

use std::fmt::Write as _;

use serde_json::Value;

/// JSON, or JSON with single quotes, raw control characters in strings and
/// trailing commas.
pub(crate) fn lenient_json(text: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str(text) {
        return Some(value);
    }
    let fixed = requote(text);
    let fixed = drop_trailing_commas(&fixed);
    let fixed = fold_sums(&fixed);
    serde_json::from_str(&fixed).ok()
}

/// Sums and differences of whole numbers outside strings replaced by their value:
/// small models write `"end": 7864353 + 2000`.
fn fold_sums(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(next) = chars.get(i + 1) {
                    out.push(*next);
                    i += 1;
                }
            } else if c == '"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        if c == '"' {
            in_string = true;
            out.push(c);
            i += 1;
            continue;
        }
        let starts_number = c.is_ascii_digit() && (i == 0 || !chars[i - 1].is_alphanumeric());
        if !starts_number {
            out.push(c);
            i += 1;
            continue;
        }
        let (mut total, mut end) = number_at(&chars, i);
        let mut folded = false;
        loop {
            let mut j = end;
            while chars.get(j).is_some_and(|c| *c == ' ') {
                j += 1;
            }
            let Some(op @ ('+' | '-')) = chars.get(j).copied() else {
                break;
            };
            j += 1;
            while chars.get(j).is_some_and(|c| *c == ' ') {
                j += 1;
            }
            if !chars.get(j).is_some_and(char::is_ascii_digit) {
                break;
            }
            let (operand, after) = number_at(&chars, j);
            total = if op == '+' {
                total.saturating_add(operand)
            } else {
                total.saturating_sub(operand)
            };
            end = after;
            folded = true;
        }
        if folded {
            out.push_str(&total.to_string());
        } else {
            out.extend(&chars[i..end]);
        }
        i = end;
    }
    out
}

/// The whole number starting at `start` (digits only), and the index after it.
fn number_at(chars: &[char], start: usize) -> (i64, usize) {
    let mut end = start;
    let mut value: i64 = 0;
    while let Some(digit) = chars.get(end).and_then(|c| c.to_digit(10)) {
        value = value.saturating_mul(10).saturating_add(i64::from(digit));
        end += 1;
    }
    (value, end)
}

/// Single-quoted strings turned into double-quoted ones.
fn requote(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '\'') => {
                quote = Some('\'');
                out.push('"');
            }
            (None, '"') => {
                quote = Some('"');
                out.push('"');
            }
            (Some('\''), '\'') => {
                quote = None;
                out.push('"');
            }
            (Some('\''), '"') => out.push_str("\\\""),
            (Some('"'), '"') => {
                quote = None;
                out.push('"');
            }
            (Some(_), '\\') => {
                out.push('\\');
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            }
            // A raw line break or tab inside a string (JSON wants them escaped).
            (Some(_), c) if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            (_, c) => out.push(c),
        }
    }
    out
}

fn drop_trailing_commas(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    let mut in_string = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(next) = chars.get(i + 1) {
                    out.push(*next);
                    i += 1;
                }
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if !matches!(next, Some('}' | ']')) {
                out.push(c);
            }
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

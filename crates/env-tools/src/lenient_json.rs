//! Reading the JSON a small model writes: single quotes, raw control characters in
//! strings, trailing commas and sums of whole numbers are mended before parsing. Used
//! by the strict argument parser and the text protocol alike.
//!
//! The mending is a chain of streaming steps between the text and `serde_json`, so a
//! parse reads the text only as far as its JSON goes: trying every `{` of a reply as
//! the start of a call costs what each attempt reads, not the reply's length each time
//! (160 KB of `{` took 19.3 s when each attempt first found its closing brace). What a
//! caller lets a run of attempts read in all is a [`Budget`].

use std::cell::Cell;
use std::collections::VecDeque;
use std::io::{self, Read};

use serde::Deserialize;
use serde_json::Value;

/// A character of the mended text and the byte offset, in the source text, of the
/// character it comes from.
type Item = (char, usize);

/// Characters of source text the parses of one reply may read in all; once spent, a
/// parse sees the text end where the budget ran out.
#[derive(Debug)]
pub(crate) struct Budget(Cell<usize>);

impl Budget {
    /// A budget of `chars` characters.
    pub(crate) fn new(chars: usize) -> Self {
        Self(Cell::new(chars))
    }

    /// True when nothing is left.
    pub(crate) fn spent(&self) -> bool {
        self.0.get() == 0
    }

    /// Takes `chars` (as much as is left); false when it was not all there.
    pub(crate) fn take(&self, chars: usize) -> bool {
        let left = self.0.get();
        self.0.set(left.saturating_sub(chars));
        left >= chars
    }
}

/// JSON, or JSON with single quotes, raw control characters in strings and
/// trailing commas: the whole of `text`.
pub(crate) fn lenient_json(text: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str(text) {
        return Some(value);
    }
    let budget = Budget::new(usize::MAX);
    let last = Cell::new(None);
    let mut de = serde_json::Deserializer::from_reader(mended(text, 0, &budget, &last));
    let value = Value::deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(value)
}

/// The one value that starts at byte `start` of `text` (read leniently, as
/// [`lenient_json`]), and the byte just past it; what follows it is not read.
pub(crate) fn lenient_value_at(
    text: &str,
    start: usize,
    budget: &Budget,
) -> Option<(Value, usize)> {
    let last = Cell::new(None);
    let mut de = serde_json::Deserializer::from_reader(mended(text, start, budget, &last));
    let value = Value::deserialize(&mut de).ok()?;
    let at = last.get()?;
    let width = text[at..].chars().next().map_or(0, char::len_utf8);
    Some((value, at + width))
}

/// The mended text from `start`, as bytes for `serde_json`.
fn mended<'a>(
    text: &'a str,
    start: usize,
    budget: &'a Budget,
    last: &'a Cell<Option<usize>>,
) -> impl Read + 'a {
    let source = text[start..]
        .char_indices()
        .map_while(move |(at, c)| budget.take(1).then_some((c, start + at)));
    Bytes {
        chars: FoldSums::new(DropCommas::new(Requote::new(source))),
        buf: [0; 4],
        len: 0,
        pos: 0,
        last,
    }
}

/// The characters of a mended text as UTF-8 bytes, noting the source offset of the
/// last character read.
struct Bytes<'a, I> {
    chars: I,
    buf: [u8; 4],
    len: usize,
    pos: usize,
    last: &'a Cell<Option<usize>>,
}

impl<I: Iterator<Item = Item>> Read for Bytes<'_, I> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        if self.pos == self.len {
            let Some((c, at)) = self.chars.next() else {
                return Ok(0);
            };
            self.len = c.encode_utf8(&mut self.buf).len();
            self.pos = 0;
            self.last.set(Some(at));
        }
        let n = out.len().min(self.len - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Single-quoted strings turned into double-quoted ones, and raw control characters in
/// strings escaped.
struct Requote<I> {
    inner: I,
    quote: Option<char>,
    out: VecDeque<Item>,
}

impl<I> Requote<I> {
    fn new(inner: I) -> Self {
        Self {
            inner,
            quote: None,
            out: VecDeque::new(),
        }
    }
}

impl<I: Iterator<Item = Item>> Iterator for Requote<I> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        if let Some(item) = self.out.pop_front() {
            return Some(item);
        }
        let (c, at) = self.inner.next()?;
        Some(match (self.quote, c) {
            (None, '\'' | '"') => {
                self.quote = Some(c);
                ('"', at)
            }
            (Some('\''), '\'') | (Some('"'), '"') => {
                self.quote = None;
                ('"', at)
            }
            (Some('\''), '"') => {
                self.out.push_back(('"', at));
                ('\\', at)
            }
            (Some(_), '\\') => {
                self.out.extend(self.inner.next());
                ('\\', at)
            }
            // A raw line break or tab inside a string (JSON wants them escaped).
            (Some(_), c) if c.is_control() => {
                let escape = format!("u{:04x}", u32::from(c));
                self.out.extend(escape.chars().map(|e| (e, at)));
                ('\\', at)
            }
            (_, c) => (c, at),
        })
    }
}

/// Where a step stands in the JSON it passes on: outside strings, in one, or just after
/// a backslash in one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InString {
    No,
    Yes,
    Escaped,
}

impl InString {
    /// The state after `c`.
    fn after(self, c: char) -> Self {
        match (self, c) {
            (Self::No, '"') => Self::Yes,
            (Self::No, _) => Self::No,
            (Self::Yes, '\\') => Self::Escaped,
            (Self::Yes, '"') => Self::No,
            (Self::Yes, _) | (Self::Escaped, _) => Self::Yes,
        }
    }
}

/// A step that can look ahead of what it has passed on.
struct Ahead<I> {
    inner: I,
    ahead: VecDeque<Item>,
}

impl<I: Iterator<Item = Item>> Ahead<I> {
    fn pull(&mut self) -> Option<Item> {
        self.ahead.pop_front().or_else(|| self.inner.next())
    }

    /// The character `k` places ahead of the next one to pull.
    fn peek(&mut self, k: usize) -> Option<char> {
        while self.ahead.len() <= k {
            self.ahead.push_back(self.inner.next()?);
        }
        self.ahead.get(k).map(|(c, _)| *c)
    }
}

/// Commas before a closing `}` or `]` dropped.
struct DropCommas<I> {
    input: Ahead<I>,
    state: InString,
}

impl<I> DropCommas<I> {
    fn new(inner: I) -> Self {
        Self {
            input: Ahead {
                inner,
                ahead: VecDeque::new(),
            },
            state: InString::No,
        }
    }
}

impl<I: Iterator<Item = Item>> Iterator for DropCommas<I> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        loop {
            let (c, at) = self.input.pull()?;
            let outside = self.state == InString::No;
            self.state = self.state.after(c);
            if outside && c == ',' {
                let mut k = 0;
                while self.input.peek(k).is_some_and(char::is_whitespace) {
                    k += 1;
                }
                if matches!(self.input.peek(k), Some('}' | ']')) {
                    continue;
                }
            }
            return Some((c, at));
        }
    }
}

/// Sums and differences of whole numbers outside strings replaced by their value:
/// small models write `"end": 7864353 + 2000`.
struct FoldSums<I> {
    input: Ahead<I>,
    state: InString,
    previous: Option<char>,
    out: VecDeque<Item>,
}

impl<I> FoldSums<I> {
    fn new(inner: I) -> Self {
        Self {
            input: Ahead {
                inner,
                ahead: VecDeque::new(),
            },
            state: InString::No,
            previous: None,
            out: VecDeque::new(),
        }
    }
}

impl<I: Iterator<Item = Item>> FoldSums<I> {
    /// The whole number whose first digit is `first`, read on (digits only).
    fn number(&mut self, first: char, digits: &mut Vec<Item>) -> i64 {
        let mut value = i64::from(first.to_digit(10).unwrap_or(0));
        while let Some(digit) = self.input.peek(0).and_then(|c| c.to_digit(10)) {
            digits.extend(self.input.pull());
            value = value.saturating_mul(10).saturating_add(i64::from(digit));
        }
        value
    }

    /// `Some(op)` and how many characters it takes when what follows is ` + 12`: spaces,
    /// an operator, spaces, a digit.
    fn operator_ahead(&mut self) -> Option<(char, usize)> {
        let mut k = 0;
        while self.input.peek(k) == Some(' ') {
            k += 1;
        }
        let op @ ('+' | '-') = self.input.peek(k)? else {
            return None;
        };
        k += 1;
        while self.input.peek(k) == Some(' ') {
            k += 1;
        }
        self.input.peek(k).filter(char::is_ascii_digit)?;
        Some((op, k))
    }
}

impl<I: Iterator<Item = Item>> Iterator for FoldSums<I> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        if let Some(item) = self.out.pop_front() {
            return Some(item);
        }
        let (c, at) = self.input.pull()?;
        let outside = self.state == InString::No;
        self.state = self.state.after(c);
        let starts_number =
            outside && c.is_ascii_digit() && !self.previous.is_some_and(char::is_alphanumeric);
        if !starts_number {
            self.previous = Some(c);
            return Some((c, at));
        }
        let mut digits = vec![(c, at)];
        let mut total = self.number(c, &mut digits);
        let mut folded = false;
        while let Some((op, skip)) = self.operator_ahead() {
            for _ in 0..skip {
                self.input.pull();
            }
            let Some((first, _)) = self.input.pull() else {
                break;
            };
            let mut operand_digits = Vec::new();
            let operand = self.number(first, &mut operand_digits);
            total = if op == '+' {
                total.saturating_add(operand)
            } else {
                total.saturating_sub(operand)
            };
            folded = true;
            self.previous = operand_digits.last().map_or(Some(first), |(d, _)| Some(*d));
        }
        if folded {
            self.out.extend(total.to_string().chars().map(|d| (d, at)));
        } else {
            self.previous = digits.last().map(|(d, _)| *d);
            self.out.extend(digits);
        }
        self.out.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn model_json_is_mended() {
        assert_eq!(
            lenient_json("{'a': 'it\"s', 'b': [1, 2,],}"),
            Some(json!({"a": "it\"s", "b": [1, 2]}))
        );
        assert_eq!(
            lenient_json("{\"end\": 7864353 + 2000 - 1, \"x\": \"1 + 2\"}"),
            Some(json!({"end": 7866352, "x": "1 + 2"}))
        );
        assert_eq!(
            lenient_json("{\"a\": \"one\n\ttwo\"}"),
            Some(json!({"a": "one\n\ttwo"}))
        );
        assert_eq!(lenient_json("{\"a\": x1 + 2}"), None);
        assert_eq!(lenient_json("{\"a\": 1} trailing"), None);
    }

    #[test]
    fn a_value_is_read_only_as_far_as_it_goes() {
        let text = "say {'tool': 'ctx_length', 'n': 1 + 2,} then more {";
        let start = text.find('{').unwrap_or(0);
        let budget = Budget::new(usize::MAX);
        let (value, end) = lenient_value_at(text, start, &budget).unwrap_or_default();
        assert_eq!(value, json!({"tool": "ctx_length", "n": 3}));
        assert_eq!(&text[end..], " then more {");
        // An attempt that fails stops at the first byte that is not JSON.
        let braces = "{".repeat(1000);
        let budget = Budget::new(usize::MAX);
        assert!(lenient_value_at(&braces, 0, &budget).is_none());
        assert!(usize::MAX - budget.0.get() <= 4);
    }

    #[test]
    fn a_spent_budget_ends_the_text() {
        let budget = Budget::new(5);
        assert!(lenient_value_at("{\"a\": 1}", 0, &budget).is_none());
        assert!(budget.spent());
    }
}

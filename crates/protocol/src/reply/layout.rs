//! The layout of a reply, read once in one pass: where its lines start, its fenced
//! blocks, its inline code spans, and what of it is prose. Every question the rule asks
//! about a place in the reply is then a binary search, so judging many actions of one
//! reply stays linear in its length.

use std::collections::HashMap;
use std::ops::Range;

/// A fenced block of a reply (```` ```tag … ``` ````).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The first word of the info string, lowercased (`""` for a bare fence).
    pub tag: String,
    /// The whole block: from its opening line to the end of its closing line (or of the
    /// reply, when no line closes it).
    pub span: Range<usize>,
    /// The lines between the fence lines.
    pub body: Range<usize>,
}

/// What the rule needs to know about a reply's lines, fences and code spans.
#[derive(Debug)]
pub(super) struct Layout {
    /// The byte offset each line starts at (the first is 0).
    pub line_starts: Vec<usize>,
    /// The fenced blocks, in order.
    pub fences: Vec<Fence>,
    /// Inline code spans (`` `…` ``) outside fences, in order, with their backticks.
    pub code_spans: Vec<Range<usize>>,
    /// The first and last byte of the reply that are not whitespace or decoration
    /// ([`is_decoration`]).
    pub substance: Option<(usize, usize)>,
    /// True when a line outside fences is prose: not blank, not indented as code, not
    /// only a tag (`<tool_call>`).
    pub has_prose: bool,
}

/// Characters that frame an action without saying anything: whitespace, emphasis,
/// backticks and quotation marks.
pub(super) fn is_decoration(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '*' | '_' | '`' | '"' | '\'' | '“' | '”' | '‘' | '’' | '«' | '»'
        )
}

impl Layout {
    /// Reads `text` once.
    pub fn read(text: &str) -> Self {
        let mut line_starts = Vec::new();
        let mut fences = Vec::new();
        let mut code_spans = Vec::new();
        let mut has_prose = false;
        let mut lines = lines_of(text).peekable();
        while let Some((start, line)) = lines.next() {
            line_starts.push(start);
            let Some((ticks, info)) = fence_open(line) else {
                code_spans.extend(code_spans_of(line, start));
                has_prose |= is_prose(line);
                continue;
            };
            let body_start = start + line.len();
            let mut end = body_start;
            let mut body_end = body_start;
            for (inner_start, inner) in lines.by_ref() {
                line_starts.push(inner_start);
                end = inner_start + inner.len();
                if is_fence_close(inner, ticks) {
                    break;
                }
                body_end = end;
            }
            fences.push(Fence {
                tag: info
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase(),
                span: start..end,
                body: body_start..body_end,
            });
        }
        let first = text.find(|c: char| !is_decoration(c));
        let last = text
            .char_indices()
            .rev()
            .find(|(_, c)| !is_decoration(*c))
            .map(|(at, _)| at);
        Self {
            line_starts,
            fences,
            code_spans,
            substance: first.zip(last),
            has_prose,
        }
    }

    /// The index of the line that holds byte `at`.
    pub fn line_of(&self, at: usize) -> usize {
        self.line_starts
            .partition_point(|start| *start <= at)
            .saturating_sub(1)
    }

    /// The bytes of line `line`, without its line end.
    pub fn line(&self, text: &str, line: usize) -> Range<usize> {
        let start = self.line_starts.get(line).copied().unwrap_or(text.len());
        let end = self
            .line_starts
            .get(line + 1)
            .copied()
            .unwrap_or(text.len());
        let content = text[start..end].trim_end_matches(['\n', '\r']);
        start..start + content.len()
    }

    /// The fence that holds byte `at`, if any.
    pub fn fence_at(&self, at: usize) -> Option<&Fence> {
        let index = self.fences.partition_point(|fence| fence.span.start <= at);
        let fence = self.fences.get(index.checked_sub(1)?)?;
        fence.span.contains(&at).then_some(fence)
    }

    /// The code span that holds byte `at` inside its backticks, if any.
    pub fn code_span_at(&self, at: usize) -> Option<Range<usize>> {
        let index = self.code_spans.partition_point(|span| span.start < at);
        let span = self.code_spans.get(index.checked_sub(1)?)?;
        (at < span.end).then(|| span.clone())
    }
}

/// Each line of `text` with the offset it starts at, line end included.
fn lines_of(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split_inclusive('\n').scan(0, |offset, line| {
        let start = *offset;
        *offset += line.len();
        Some((start, line))
    })
}

/// `Some((backtick count, info string))` when `line` opens a fence: three or more
/// backticks after at most three spaces, and no backtick after them (```` ```x``` ````
/// on one line is inline code).
pub(super) fn fence_open(line: &str) -> Option<(usize, &str)> {
    let trimmed = line.trim_start();
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let ticks = trimmed.bytes().take_while(|b| *b == b'`').count();
    if ticks < 3 {
        return None;
    }
    let info = trimmed[ticks..].trim();
    if info.contains('`') {
        return None;
    }
    Some((ticks, info))
}

/// True when `line` closes a fence opened with `ticks` backticks.
fn is_fence_close(line: &str, ticks: usize) -> bool {
    let trimmed = line.trim();
    trimmed.len() >= ticks && trimmed.bytes().all(|b| b == b'`')
}

/// The columns of indentation `line` starts with (a tab counts to the next multiple of
/// four).
pub(super) fn indent(line: &str) -> usize {
    let mut columns = 0;
    for c in line.chars() {
        match c {
            ' ' => columns += 1,
            '\t' => columns += 4 - columns % 4,
            _ => break,
        }
    }
    columns
}

/// True when `line` (outside fences) is prose: not blank, indented less than a code
/// block's four columns, and not only a tag such as `<tool_call>` or `</invoke>`.
fn is_prose(line: &str) -> bool {
    let trimmed = line.trim();
    let tag_only = trimmed.starts_with('<') && trimmed.ends_with('>');
    !trimmed.is_empty() && indent(line) < 4 && !tag_only
}

/// The inline code spans of one line starting at `offset`: a run of backticks up to the
/// next run of as many (CommonMark's rule, kept within a line); a run no other matches
/// is a literal backtick.
fn code_spans_of(line: &str, offset: usize) -> Vec<Range<usize>> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'`' {
            let start = i;
            while i < bytes.len() && bytes[i] == b'`' {
                i += 1;
            }
            runs.push((start, i - start));
        } else {
            i += 1;
        }
    }
    if runs.len() < 2 {
        return Vec::new();
    }
    let mut by_length: HashMap<usize, Vec<usize>> = HashMap::new();
    for (index, (_, length)) in runs.iter().enumerate() {
        by_length.entry(*length).or_default().push(index);
    }
    let mut spans = Vec::new();
    let mut index = 0;
    while index < runs.len() {
        let (start, length) = runs[index];
        let same = by_length.get(&length).map_or(&[][..], Vec::as_slice);
        let next = same.partition_point(|other| *other <= index);
        match same.get(next) {
            Some(&close) => {
                let (close_start, close_length) = runs[close];
                spans.push(offset + start..offset + close_start + close_length);
                index = close + 1;
            }
            None => index += 1,
        }
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_lines_and_code_spans_are_found() {
        let text =
            "Look at `x` and ``a ` b``.\n```repl\nprint(1)\n```\n    indented\n<tool_call>\n";
        let layout = Layout::read(text);
        assert_eq!(layout.line_starts.len(), 6);
        assert_eq!(layout.fences.len(), 1);
        let fence = &layout.fences[0];
        assert_eq!(fence.tag, "repl");
        assert_eq!(&text[fence.body.clone()], "print(1)\n");
        assert_eq!(&text[fence.span.clone()], "```repl\nprint(1)\n```\n");
        let spans: Vec<&str> = layout.code_spans.iter().map(|s| &text[s.clone()]).collect();
        assert_eq!(spans, ["`x`", "``a ` b``"]);
        assert!(layout.has_prose);
        assert_eq!(layout.line_of(0), 0);
        assert_eq!(layout.line_of(text.find("print").unwrap_or(0)), 2);
        assert!(layout.fence_at(text.find("print").unwrap_or(0)).is_some());
        assert!(layout.fence_at(0).is_none());
        assert_eq!(layout.code_span_at(9), Some(8..11));
        assert_eq!(layout.code_span_at(3), None);
    }

    #[test]
    fn an_unclosed_fence_runs_to_the_end() {
        let text = "```repl\nprint(1)\n";
        let layout = Layout::read(text);
        assert_eq!(layout.fences[0].span, 0..text.len());
        assert_eq!(&text[layout.fences[0].body.clone()], "print(1)\n");
        assert!(!layout.has_prose);
    }

    #[test]
    fn an_unmatched_backtick_is_literal() {
        let layout = Layout::read("a ` b `` c ` d");
        assert_eq!(layout.code_spans, vec![(2..12)]);
        assert!(Layout::read("one ` only").code_spans.is_empty());
    }
}

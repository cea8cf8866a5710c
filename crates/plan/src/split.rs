//! Cutting text into pieces in one streaming pass: the input is read once, in
//! segments of at most a line or 64 KiB, so a file of any size is cut with bounded
//! memory, and each piece is a byte range of it (a reference, not a copy).
//!
//! - `chars`: at most `size` characters a piece; a piece ends at a line end when one
//!   falls in its last fifth, else at the limit (on a character boundary).
//! - `lines`: `size` whole lines a piece.
//! - records: a record starts at each line the pattern matches (text before the first
//!   match is a record too); records are grouped whole, up to `size` characters a
//!   piece (one record a piece without a size; a record longer than `size` is a piece
//!   of its own).
//!
//! With an overlap, each piece after the first also starts that many characters (or
//! lines) before where the one before it ended. Where that is, is found by a second
//! reader of the input that trails the first, moving only forward from one piece's
//! start to the next: an overlap costs one more pass over the input and no memory
//! (it once kept a mark for every character it repeats — 540 MB for a split of 32 MiB).

use std::io::BufRead;

use regex::Regex;

/// Bytes of a segment when a line is longer.
const SEGMENT_MAX_BYTES: usize = 64 * 1024;

/// A piece: bytes `start..end` of the input, holding `chars` characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// Characters (UTF-8 sequences; an invalid byte counts as one).
    pub chars: u64,
}

/// How pieces are cut.
#[derive(Debug, Clone)]
pub enum Cut {
    /// At most `size` characters, `overlap` of them repeated from the piece before.
    Chars {
        /// Characters a piece.
        size: u64,
        /// Characters repeated.
        overlap: u64,
    },
    /// `size` lines, `overlap` of them repeated.
    Lines {
        /// Lines a piece.
        size: u64,
        /// Lines repeated.
        overlap: u64,
    },
    /// Whole records, starting at lines `start` matches, grouped up to `size`
    /// characters.
    Records {
        /// Where a record starts.
        start: Regex,
        /// Characters a piece may gather (one record a piece when absent).
        size: Option<u64>,
    },
}

impl Cut {
    /// The units each piece repeats from the one before (0 for records).
    pub fn overlap(&self) -> u64 {
        match self {
            Self::Chars { overlap, .. } | Self::Lines { overlap, .. } => *overlap,
            Self::Records { .. } => 0,
        }
    }
}

/// A point of the input: a byte offset, and the characters and line ends before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Mark {
    byte: u64,
    chars: u64,
    lines: u64,
}

impl Mark {
    /// The point after `bytes` more of the input.
    fn after(self, bytes: &[u8]) -> Self {
        Self {
            byte: self.byte + bytes.len() as u64,
            chars: self.chars + chars_of(bytes),
            lines: self.lines + bytes.iter().filter(|&&b| b == b'\n').count() as u64,
        }
    }
}

/// Why an input was not cut.
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    /// The input could not be read.
    #[error("{0}")]
    Read(#[from] std::io::Error),
    /// The cut would make more than `max` pieces; reading stopped there.
    #[error("the split cuts the input into more than {max} pieces; use a larger `split.size`")]
    TooMany {
        /// The bound.
        max: usize,
    },
}

/// Cuts the input `open` reads into at most `max_pieces` pieces (reading stops, and
/// the cut fails, at one more). An empty input has no pieces. `open` is called once
/// for the pass, and once more for a cut with an overlap (the reader that finds where
/// each piece starts); each call reads the same input from its start.
pub fn split_input<R: BufRead>(
    mut open: impl FnMut() -> std::io::Result<R>,
    cut: &Cut,
    max_pieces: usize,
) -> Result<Vec<Piece>, SplitError> {
    let mut reader = open()?;
    let trail = match cut.overlap() {
        0 => None,
        _ => Some(Trail {
            reader: open()?,
            at: Mark::default(),
        }),
    };
    let mut cutter = Cutter::new(cut, trail);
    let mut segment: Vec<u8> = Vec::new();
    let mut line_start = true;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            break;
        }
        let newline = buffer.iter().position(|&b| b == b'\n');
        let room = SEGMENT_MAX_BYTES - segment.len();
        let (take, ends_line) = match newline {
            Some(i) if i < room => (i + 1, true),
            _ => (buffer.len().min(room), false),
        };
        segment.extend_from_slice(&buffer[..take]);
        reader.consume(take);
        if ends_line || segment.len() >= SEGMENT_MAX_BYTES {
            // A long line is cut on a character boundary; the rest starts the next.
            let keep = if ends_line {
                segment.len()
            } else {
                char_boundary(&segment)
            };
            let rest = segment.split_off(keep);
            cutter.segment(&segment, line_start, ends_line, max_pieces)?;
            line_start = ends_line;
            segment = rest;
        }
    }
    if !segment.is_empty() {
        cutter.segment(&segment, line_start, true, max_pieces)?;
    }
    let pieces = cutter.finish()?;
    if pieces.len() > max_pieces {
        return Err(SplitError::TooMany { max: max_pieces });
    }
    Ok(pieces)
}

/// Cuts `text` into pieces (an in-memory input), however many.
pub fn split_str(text: &str, cut: &Cut) -> Vec<Piece> {
    // Reading from a slice cannot fail, and there is no bound to pass.
    split_input(|| Ok(text.as_bytes()), cut, usize::MAX).unwrap_or_default()
}

/// The largest prefix length of `bytes` that ends on a UTF-8 character boundary: all
/// of it unless its last character is unfinished.
fn char_boundary(bytes: &[u8]) -> usize {
    let len = bytes.len();
    let mut i = len;
    while i > 0 && len - i < 4 {
        i -= 1;
        let lead = bytes[i];
        if lead & 0xC0 != 0x80 {
            let need = match lead {
                0xF0.. => 4,
                0xE0.. => 3,
                0xC0.. => 2,
                _ => 1,
            };
            return if i + need <= len { len } else { i };
        }
    }
    len
}

/// True for a byte that starts a character (an invalid byte counts as one).
fn starts_char(byte: u8) -> bool {
    byte & 0xC0 != 0x80
}

/// Characters of `bytes`: bytes that start a UTF-8 sequence (an invalid byte counts
/// as one).
fn chars_of(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| starts_char(b)).count() as u64
}

/// The second reader of a cut with an overlap: it trails the pass, at or before the
/// start of the piece being gathered, and moves forward to where the next piece
/// starts. Piece starts only grow, so it reads the input once in all.
struct Trail<R> {
    reader: R,
    at: Mark,
}

impl<R: BufRead> Trail<R> {
    /// Moves forward to the first byte of character `chars` (or the end of the input).
    fn forward_to_char(&mut self, chars: u64) -> std::io::Result<Mark> {
        self.forward(|at, byte| at.chars == chars && starts_char(byte))
    }

    /// Moves forward to just after the `lines`-th line end (or the end of the input).
    fn forward_to_line(&mut self, lines: u64) -> std::io::Result<Mark> {
        self.forward(|at, _| at.lines == lines)
    }

    /// Moves forward to the first point where `reached` holds of the point and the
    /// byte after it.
    fn forward(&mut self, reached: impl Fn(&Mark, u8) -> bool) -> std::io::Result<Mark> {
        loop {
            let buffer = self.reader.fill_buf()?;
            if buffer.is_empty() {
                return Ok(self.at);
            }
            let mut at = self.at;
            let mut stop = None;
            for (i, &byte) in buffer.iter().enumerate() {
                if reached(&at, byte) {
                    stop = Some(i);
                    break;
                }
                at = at.after(std::slice::from_ref(&byte));
            }
            let take = stop.unwrap_or(buffer.len());
            self.at = at;
            self.reader.consume(take);
            if stop.is_some() {
                return Ok(at);
            }
        }
    }
}

/// The streaming state of a cut.
struct Cutter<'c, R> {
    cut: &'c Cut,
    pieces: Vec<Piece>,
    /// Where the piece being gathered starts.
    start: Mark,
    /// Where the input read so far ends.
    here: Mark,
    /// The reader that finds where an overlapping piece starts (none without one).
    trail: Option<Trail<R>>,
    /// Records: where the record being read started.
    record: Option<Mark>,
    /// Where the last piece ended: a piece must reach past it (with an overlap, the
    /// text after the last piece may be only what it repeats).
    last_end: Mark,
}

impl<'c, R: BufRead> Cutter<'c, R> {
    fn new(cut: &'c Cut, trail: Option<Trail<R>>) -> Self {
        Self {
            cut,
            pieces: Vec::new(),
            start: Mark::default(),
            here: Mark::default(),
            trail,
            record: None,
            last_end: Mark::default(),
        }
    }

    /// Closes the piece at `end`; the next starts at `next` (`end`, or an overlap
    /// before it).
    fn close(&mut self, end: Mark, next: Mark) {
        if end.byte > self.start.byte && end.byte > self.last_end.byte {
            self.pieces.push(Piece {
                start: self.start.byte,
                end: end.byte,
                chars: end.chars - self.start.chars,
            });
            self.last_end = end;
        }
        self.start = next;
    }

    /// Cuts what `bytes` holds; fails once there are more than `max_pieces` pieces.
    fn segment(
        &mut self,
        bytes: &[u8],
        starts_line: bool,
        ends_line: bool,
        max_pieces: usize,
    ) -> Result<(), SplitError> {
        match self.cut {
            Cut::Chars { size, overlap } => self.chars(bytes, *size, *overlap)?,
            Cut::Lines { size, overlap } => {
                self.here = self.here.after(bytes);
                // A last line without a line end ends the input: `finish` closes it.
                if ends_line && self.here.lines - self.start.lines >= *size {
                    let next = self.overlap_start(*overlap)?;
                    self.close(self.here, next);
                }
            }
            Cut::Records { start, size } => {
                let opens = starts_line && start.is_match(&String::from_utf8_lossy(bytes));
                if opens {
                    self.end_record(*size);
                }
                if self.record.is_none() {
                    self.record = Some(self.here);
                }
                self.here = self.here.after(bytes);
            }
        }
        if self.pieces.len() > max_pieces {
            return Err(SplitError::TooMany { max: max_pieces });
        }
        Ok(())
    }

    /// Where the next piece starts: `overlap` units (characters, or lines for a
    /// `lines` cut) before here, but after the current piece's start; here without an
    /// overlap.
    fn overlap_start(&mut self, overlap: u64) -> std::io::Result<Mark> {
        let Some(trail) = self.trail.as_mut().filter(|_| overlap > 0) else {
            return Ok(self.here);
        };
        match self.cut {
            Cut::Lines { .. } => {
                let line = self.here.lines.saturating_sub(overlap);
                if line > self.start.lines {
                    return trail.forward_to_line(line);
                }
            }
            _ => {
                let char = self.here.chars.saturating_sub(overlap);
                if char > self.start.chars {
                    return trail.forward_to_char(char);
                }
            }
        }
        Ok(self.here)
    }

    fn chars(&mut self, bytes: &[u8], size: u64, overlap: u64) -> std::io::Result<()> {
        let mut rest = bytes;
        while !rest.is_empty() {
            let gathered = self.here.chars - self.start.chars;
            let count = chars_of(rest);
            if gathered + count <= size {
                self.here = self.here.after(rest);
                return Ok(());
            }
            if gathered > 0 && gathered >= size * 4 / 5 {
                // A line end is near enough: the piece ends before this segment.
                let next = self.overlap_start(overlap)?;
                self.close(self.here, next);
                continue;
            }
            // Cut inside the segment, after the characters that fill the piece.
            let fill = size - gathered;
            let cut = byte_after_chars(rest, fill);
            let (head, tail) = rest.split_at(cut);
            self.here = self.here.after(head);
            let next = self.overlap_start(overlap)?;
            self.close(self.here, next);
            rest = tail;
        }
        Ok(())
    }

    /// The record being read ends here: it joins the piece, or starts the next one.
    fn end_record(&mut self, size: Option<u64>) {
        let Some(record) = self.record.take() else {
            return;
        };
        let record_chars = self.here.chars - record.chars;
        let gathered = record.chars - self.start.chars;
        match size {
            None => {
                self.close(record, record);
                self.close(self.here, self.here);
            }
            Some(size) if gathered > 0 && gathered + record_chars > size => {
                self.close(record, record);
            }
            Some(_) => {}
        }
    }

    fn finish(mut self) -> Result<Vec<Piece>, SplitError> {
        if let Cut::Records { size, .. } = self.cut {
            self.end_record(*size);
        }
        let here = self.here;
        self.close(here, here);
        Ok(self.pieces)
    }
}

/// The byte offset in `bytes` after its first `chars` characters.
fn byte_after_chars(bytes: &[u8], chars: u64) -> usize {
    let mut seen = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b & 0xC0 != 0x80 {
            if seen == chars {
                return i;
            }
            seen += 1;
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn texts(text: &str, pieces: &[Piece]) -> Vec<String> {
        pieces
            .iter()
            .map(|p| text[p.start as usize..p.end as usize].to_owned())
            .collect()
    }

    #[test]
    fn chars_end_on_lines_when_near_else_at_the_limit() {
        let text = "aaaa\nbbbb\ncccc\n";
        let pieces = split_str(
            text,
            &Cut::Chars {
                size: 11,
                overlap: 0,
            },
        );
        assert_eq!(texts(text, &pieces), ["aaaa\nbbbb\n", "cccc\n"]);
        let long = "x".repeat(25);
        let pieces = split_str(
            &long,
            &Cut::Chars {
                size: 10,
                overlap: 0,
            },
        );
        assert_eq!(
            pieces.iter().map(|p| p.chars).collect::<Vec<_>>(),
            [10, 10, 5]
        );
        assert!(split_str(
            "",
            &Cut::Chars {
                size: 10,
                overlap: 0
            }
        )
        .is_empty());
    }

    #[test]
    fn multibyte_characters_are_never_split() {
        let text = "é".repeat(30);
        let pieces = split_str(
            &text,
            &Cut::Chars {
                size: 7,
                overlap: 0,
            },
        );
        assert_eq!(texts(&text, &pieces).concat(), text);
        assert!(pieces.iter().all(|p| p.chars <= 7));
    }

    #[test]
    fn overlaps_repeat_the_end_of_the_piece_before() {
        let text = "0123456789abcdefghij";
        let pieces = split_str(
            text,
            &Cut::Chars {
                size: 8,
                overlap: 3,
            },
        );
        let got = texts(text, &pieces);
        assert_eq!(got[0], "01234567");
        assert_eq!(&got[1][..3], "567", "{got:?}");
        assert!(got.last().unwrap().ends_with('j'));
        let lines = "l1\nl2\nl3\nl4\nl5\n";
        let pieces = split_str(
            lines,
            &Cut::Lines {
                size: 2,
                overlap: 1,
            },
        );
        assert_eq!(
            texts(lines, &pieces),
            ["l1\nl2\n", "l2\nl3\n", "l3\nl4\n", "l4\nl5\n"]
        );
    }

    #[test]
    fn records_start_at_matching_lines_and_group_whole() {
        let log = "intro\n2026-01-01 a\nmore a\n2026-01-02 b\n2026-01-03 c\nmore c\n";
        let start = crate::pattern::compile(r"^\d{4}-").unwrap();
        let one = split_str(
            log,
            &Cut::Records {
                start: start.clone(),
                size: None,
            },
        );
        assert_eq!(
            texts(log, &one),
            [
                "intro\n",
                "2026-01-01 a\nmore a\n",
                "2026-01-02 b\n",
                "2026-01-03 c\nmore c\n"
            ]
        );
        let grouped = split_str(
            log,
            &Cut::Records {
                start,
                size: Some(35),
            },
        );
        assert_eq!(
            texts(log, &grouped),
            [
                "intro\n2026-01-01 a\nmore a\n",
                "2026-01-02 b\n2026-01-03 c\nmore c\n"
            ]
        );
    }

    #[test]
    fn a_cut_into_too_many_pieces_stops_reading_and_fails() {
        // Found trying a one-character size as a user would: a 950 KB log became
        // 950 000 pieces, 1.7 GB of memory and a 239 MB trace.
        let text = "a line of log text\n".repeat(50_000);
        let cut = Cut::Chars {
            size: 1,
            overlap: 0,
        };
        let error = split_input(|| Ok(text.as_bytes()), &cut, 1_000).unwrap_err();
        assert!(matches!(error, SplitError::TooMany { max: 1_000 }));
        assert!(error.to_string().contains("larger `split.size`"));
        let fits = Cut::Chars {
            size: 10_000,
            overlap: 0,
        };
        // 950 000 characters in pieces ending on line ends, a little under 10 000 each.
        assert_eq!(
            split_input(|| Ok(text.as_bytes()), &fits, 1_000)
                .unwrap()
                .len(),
            96
        );
    }

    #[test]
    fn a_line_longer_than_a_segment_is_read_in_bounded_pieces() {
        let text = format!("{}\nend\n", "y".repeat(200_000));
        let pieces = split_input(
            || Ok(std::io::BufReader::with_capacity(4096, text.as_bytes())),
            &Cut::Chars {
                size: 100_000,
                overlap: 0,
            },
            usize::MAX,
        )
        .unwrap();
        assert_eq!(texts(&text, &pieces).concat(), text);
        assert_eq!(pieces[0].chars, 100_000);
    }

    /// The peak resident memory of this process so far (`VmHWM`), in KiB (each test
    /// runs in a process of its own under nextest).
    fn peak_rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn a_large_overlap_holds_no_memory_of_its_own() {
        // Found by the fourth hostile review: a `chars` overlap kept a 16-byte mark for
        // every character it repeats, and a split of 32 MiB peaked at 540 MB. Here 32
        // MiB of log lines, pieces of 8 Mi characters repeating 4 Mi of the one before.
        let text = "a line of a log, about forty bytes long\n".repeat(800_000);
        let cut = Cut::Chars {
            size: 8 << 20,
            overlap: 4 << 20,
        };
        let before = peak_rss_kib();
        let pieces = split_str(&text, &cut);
        let grew = peak_rss_kib().saturating_sub(before);
        assert!(pieces.len() > 4, "{}", pieces.len());
        assert!(pieces.windows(2).all(|w| w[1].start < w[0].end));
        assert_eq!(pieces.last().map(|p| p.end), Some(text.len() as u64));
        // A segment (64 KiB) and the list of pieces: a generous bound, far below the
        // 64 MiB that 4 Mi marks take.
        assert!(grew < 16 * 1024, "the split grew the process by {grew} KiB");
    }

    proptest! {
        /// With an overlap the pieces still cover the input, in order, each starting
        /// before the one before it ended and within its size.
        #[test]
        fn overlapping_pieces_cover_the_input(
            text in "(\\PC{0,30}\n?){1,20}",
            size in 2u64..40,
            overlap_share in 0u64..100,
        ) {
            // An empty input has no pieces (and nothing to cover).
            prop_assume!(!text.is_empty());
            let overlap = (size - 1) * overlap_share / 100;
            for cut in [Cut::Chars { size, overlap }, Cut::Lines { size, overlap }] {
                let pieces = split_input(
                    || Ok(std::io::BufReader::with_capacity(5, text.as_bytes())),
                    &cut,
                    usize::MAX,
                ).unwrap();
                prop_assert_eq!(pieces.first().map(|p| p.start), Some(0));
                prop_assert_eq!(pieces.last().map(|p| p.end), Some(text.len() as u64));
                for pair in pieces.windows(2) {
                    prop_assert!(pair[1].start <= pair[0].end);
                    prop_assert!(pair[1].start > pair[0].start);
                    prop_assert!(pair[1].end > pair[0].end);
                    // The next piece starts where this one ended, or exactly `overlap`
                    // characters (or whole lines) before.
                    let repeated = &text[pair[1].start as usize..pair[0].end as usize];
                    let units = match cut {
                        Cut::Lines { .. } => repeated.matches('\n').count(),
                        _ => repeated.chars().count(),
                    } as u64;
                    prop_assert!(units == 0 || units == overlap, "{:?} repeats {:?}", cut, repeated);
                    if let Cut::Lines { .. } = cut {
                        prop_assert!(pair[1].start == 0 || text.as_bytes()[pair[1].start as usize - 1] == b'\n');
                    }
                }
                if let Cut::Chars { size, .. } = cut {
                    prop_assert!(pieces.iter().all(|p| p.chars <= size));
                }
            }
        }

        /// Without overlap the pieces tile the input exactly, each within its size.
        #[test]
        fn pieces_tile_the_input(text in "(\\PC{0,40}\n?){0,30}", size in 1u64..50) {
            for cut in [Cut::Chars { size, overlap: 0 }, Cut::Lines { size, overlap: 0 }] {
                let pieces = split_input(
                    || Ok(std::io::BufReader::with_capacity(7, text.as_bytes())),
                    &cut,
                    usize::MAX,
                ).unwrap();
                prop_assert_eq!(texts(&text, &pieces).concat(), text.clone());
                for p in &pieces {
                    prop_assert_eq!(p.chars, text[p.start as usize..p.end as usize].chars().count() as u64);
                    if let Cut::Chars { size, .. } = cut {
                        prop_assert!(p.chars <= size);
                    }
                }
            }
        }
    }
}

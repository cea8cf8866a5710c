//! Real text for the contexts (`eval --haystack`): a file or a directory of `.txt`
//! files, made ASCII and cut into segments (sentences and lines) that the generators
//! cycle through to reach any length.
//!
//! The haystack is identified by its digest: the SHA-256 of its files in byte order of
//! their names, each as its name, a NUL byte, its length in decimal, a NUL byte and its
//! raw contents (`scripts/corpora.sh` prints the same digest). Items are reproducible
//! from the seed and that digest.

use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::EvalError;

mod files;

/// The longest segment, in bytes: a longer sentence is cut at a space before it, so a
/// context falls short of its length by less than this.
pub const MAX_SEGMENT: usize = 300;

/// Which haystack an item's context was cut from (recorded in the item and its
/// results).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HaystackId {
    /// The path given to `--haystack`.
    pub path: PathBuf,
    /// SHA-256 of the haystack's files (hex).
    pub digest: String,
}

/// A loaded haystack: its text, made ASCII, and its segments.
#[derive(Debug, Clone)]
pub struct Haystack {
    id: HaystackId,
    files: usize,
    bytes: u64,
    text: String,
    segments: Vec<Range<usize>>,
    /// `name (why)` of each `.txt` entry of its directory that was not read.
    skipped: Vec<String>,
}

impl Haystack {
    /// Reads `path`: a `.txt` file, or a directory whose `.txt` files (not those of its
    /// subdirectories, nor its symbolic links, which are listed in
    /// [`Haystack::skipped`]) are read in byte order of their names; at most
    /// `max_bytes` in all. Devices, FIFOs and sockets are refused unread.
    pub fn load(path: &Path, max_bytes: u64) -> Result<Self, EvalError> {
        let read = files::read_haystack(path, max_bytes)?;
        if read.files.is_empty() {
            return Err(EvalError::Haystack {
                path: path.to_owned(),
                reason: "holds no .txt file".to_owned(),
            });
        }
        let mut haystack = Self::from_files(path, &read.files)?;
        haystack.skipped = read.skipped;
        Ok(haystack)
    }

    /// A haystack of `files` (each a name and raw contents, in the order given), known
    /// as `path`.
    pub fn from_files(path: &Path, files: &[(Vec<u8>, Vec<u8>)]) -> Result<Self, EvalError> {
        let mut hasher = Sha256::new();
        let mut text = String::new();
        let mut bytes = 0_u64;
        for (name, contents) in files {
            hasher.update(name);
            hasher.update([0]);
            hasher.update(contents.len().to_string().as_bytes());
            hasher.update([0]);
            hasher.update(contents);
            bytes += contents.len() as u64;
            to_ascii(&String::from_utf8_lossy(contents), &mut text);
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
        }
        let mut digest = String::with_capacity(64);
        for byte in hasher.finalize() {
            let _ = write!(digest, "{byte:02x}");
        }
        if !text.bytes().any(|b| b.is_ascii_alphabetic()) {
            return Err(EvalError::Haystack {
                path: path.to_owned(),
                reason: "holds no words (no ASCII letters once made ASCII)".to_owned(),
            });
        }
        let segments = segments(&text);
        Ok(Self {
            id: HaystackId {
                path: path.to_owned(),
                digest,
            },
            files: files.len(),
            bytes,
            text,
            segments,
            skipped: Vec::new(),
        })
    }

    /// What identifies it: its path and digest.
    pub fn id(&self) -> &HaystackId {
        &self.id
    }

    /// How many files it was read from.
    pub fn files(&self) -> usize {
        self.files
    }

    /// `name (why)` of each `.txt` entry of its directory that was not read (symbolic
    /// links), for the user to be told.
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }

    /// The raw bytes of its files.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Its text, made ASCII.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// How many segments it has (never 0).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Segment `i` modulo the count: a sentence or a line, ending with its whitespace.
    pub fn segment(&self, i: usize) -> &str {
        let range = &self.segments[i % self.segments.len()];
        &self.text[range.clone()]
    }
}

/// Appends `text` made ASCII: line ends become `\n`, other control characters spaces,
/// curly quotes, dashes and the ellipsis their ASCII forms, Latin-1 letters their base
/// letters; any other non-ASCII character is dropped.
pub(crate) fn to_ascii(text: &str, out: &mut String) {
    const LATIN1: &str = "AAAAAAACEEEEIIIIDNOOOOOxOUUUUYTsaaaaaaaceeeeiiiidnooooo/ouuuuyty";
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\r' => out.push('\n'),
            '\n' | '\t' => out.push(c),
            c if c.is_ascii_control() => out.push(' '),
            c if c.is_ascii() => out.push(c),
            '\u{2018}' | '\u{2019}' | '\u{201a}' | '\u{201b}' | '\u{2032}' | '\u{91}'
            | '\u{92}' => out.push('\''),
            '\u{201c}' | '\u{201d}' | '\u{201e}' | '\u{2033}' | '\u{93}' | '\u{94}' => {
                out.push('"')
            }
            '\u{2010}'..='\u{2015}' | '\u{96}' | '\u{97}' => out.push('-'),
            '\u{2026}' | '\u{85}' => out.push_str("..."),
            '\u{a0}' | '\u{2000}'..='\u{200a}' => out.push(' '),
            '\u{c0}'..='\u{ff}' => {
                let i = c as usize - 0xc0;
                out.push_str(&LATIN1[i..=i]);
            }
            _ => {}
        }
    }
}

/// The text cut into sentences and lines: a segment ends after a newline, or after the
/// space that follows `.`, `!` or `?` (a closing quote or bracket between them
/// allowed); a segment longer than [`MAX_SEGMENT`] is cut after a space before it.
/// Every byte of the text is in exactly one segment.
fn segments(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let push = |start: usize, end: usize, out: &mut Vec<Range<usize>>| {
        let mut from = start;
        while end - from > MAX_SEGMENT {
            let window = &bytes[from..from + MAX_SEGMENT];
            let cut = window
                .iter()
                .rposition(|b| *b == b' ')
                .filter(|at| *at > 0)
                .map_or(MAX_SEGMENT, |at| at + 1);
            out.push(from..from + cut);
            from += cut;
        }
        if end > from {
            out.push(from..end);
        }
    };
    for i in 0..bytes.len() {
        let end_here = match bytes[i] {
            b'\n' => true,
            b' ' if i > 0 => {
                let mut j = i - 1;
                while j > start && matches!(bytes[j], b'"' | b'\'' | b')' | b']') {
                    j -= 1;
                }
                matches!(bytes[j], b'.' | b'!' | b'?')
            }
            _ => false,
        };
        if end_here {
            push(start, i + 1, &mut out);
            start = i + 1;
        }
    }
    push(start, bytes.len(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn haystack(files: &[(&str, &str)]) -> Haystack {
        let files: Vec<(Vec<u8>, Vec<u8>)> = files
            .iter()
            .map(|(n, t)| (n.as_bytes().to_vec(), t.as_bytes().to_vec()))
            .collect();
        Haystack::from_files(Path::new("mem"), &files).unwrap()
    }

    #[test]
    fn text_is_made_ascii() {
        let h = haystack(&[(
            "a.txt",
            "\u{201c}Caf\u{e9}\u{201d} \u{2014} it\u{2019}s\r\nfine\u{2026}\u{1f600}\x0c",
        )]);
        assert_eq!(h.text(), "\"Cafe\" - it's\nfine... \n");
    }

    #[test]
    fn segments_are_sentences_and_lines_and_cover_the_text() {
        let h = haystack(&[(
            "a.txt",
            "One. Two? \"Three!\" Four\nfive. Mr.X stays.\n\nEnd",
        )]);
        let all: Vec<&str> = (0..h.segment_count()).map(|i| h.segment(i)).collect();
        assert_eq!(
            all,
            [
                "One. ",
                "Two? ",
                "\"Three!\" ",
                "Four\n",
                "five. ",
                "Mr.X stays.\n",
                "\n",
                "End\n"
            ]
        );
        let long = "word ".repeat(200);
        let h = haystack(&[("b.txt", &long)]);
        let joined: String = (0..h.segment_count()).map(|i| h.segment(i)).collect();
        assert_eq!(joined, h.text());
        assert!((0..h.segment_count()).all(|i| h.segment(i).len() <= MAX_SEGMENT));
        assert!(h.segment_count() >= 4);
    }

    #[test]
    fn the_digest_covers_names_and_contents() {
        let a = haystack(&[("a.txt", "Some words."), ("b.txt", "More words.")]);
        // Pinned: `scripts/corpora.sh` computes the same digest.
        let mut h = Sha256::new();
        h.update(b"a.txt\x0011\x00Some words.b.txt\x0011\x00More words.");
        let want: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(a.id().digest, want);
        let renamed = haystack(&[("a.txt", "Some words."), ("c.txt", "More words.")]);
        assert_ne!(a.id().digest, renamed.id().digest);
        let moved = haystack(&[("a.txt", "Some words.More"), ("b.txt", " words.")]);
        assert_ne!(a.id().digest, moved.id().digest);
        assert_eq!((a.files(), a.bytes()), (2, 22));
    }

    #[test]
    fn a_directory_is_read_in_name_order_and_an_empty_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.txt"), "Second file.").unwrap();
        std::fs::write(dir.path().join("a.txt"), "First file.").unwrap();
        std::fs::write(dir.path().join("notes.md"), "Not read.").unwrap();
        let h = Haystack::load(dir.path(), 1 << 20).unwrap();
        assert_eq!(h.text(), "First file.\nSecond file.\n");
        let single = Haystack::load(&dir.path().join("a.txt"), 1 << 20).unwrap();
        assert_eq!(single.text(), "First file.\n");
        let empty = tempfile::tempdir().unwrap();
        let error = Haystack::load(empty.path(), 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(error.contains("holds no .txt file"), "{error}");
        let missing = Haystack::load(&empty.path().join("nope"), 1 << 20).unwrap_err();
        assert!(missing.to_string().contains("nope"), "{missing}");
    }
}

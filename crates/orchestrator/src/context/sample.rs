//! Describing a referenced file from a few samples, so that the description costs
//! the same for 2 KB and 40 GB: its size from `stat`, a preview from its head, and
//! characters and lines counted exactly in small files and estimated from the head,
//! middle and tail of large ones. The samples are checked to be UTF-8 (a binary file
//! is refused at once, with the offset); the rest is checked when it is read.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::error::ContextError;
use super::info::PREVIEW_CHARS;

/// Bytes of each sample.
const SAMPLE_BYTES: u64 = 64 * 1024;

/// What the samples say about a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Sampled {
    /// Its first [`PREVIEW_CHARS`] characters.
    pub preview: String,
    /// Characters: exact when `exact`, else estimated.
    pub chars: u64,
    /// Lines (a last line without a newline counts): exact when `exact`, else estimated.
    pub lines: u64,
    /// True when the whole file was read.
    pub exact: bool,
}

/// Samples `path` (of `size` bytes, from `stat`).
pub(super) fn sample(path: &Path, size: u64) -> Result<Sampled, ContextError> {
    let unreadable = |source: io::Error| ContextError::Unreadable {
        path: path.to_owned(),
        source,
    };
    let file = File::open(path).map_err(unreadable)?;
    let exact = size <= 3 * SAMPLE_BYTES;
    let ranges: Vec<(u64, u64)> = if exact {
        vec![(0, size)]
    } else {
        let middle = size / 2 - SAMPLE_BYTES / 2;
        vec![
            (0, SAMPLE_BYTES),
            (middle, middle + SAMPLE_BYTES),
            (size - SAMPLE_BYTES, size),
        ]
    };
    let (mut bytes_seen, mut chars, mut newlines) = (0u64, 0u64, 0u64);
    let mut preview = String::new();
    let mut last_byte = None;
    for (i, &(start, end)) in ranges.iter().enumerate() {
        let mut buffer = vec![0u8; (end - start) as usize];
        file.read_exact_at(&mut buffer, start).map_err(unreadable)?;
        let text = utf8_inside(&buffer, start, end == size, path)?;
        if i == 0 {
            preview = text.chars().take(PREVIEW_CHARS).collect();
        }
        bytes_seen += text.len() as u64;
        chars += text.chars().count() as u64;
        newlines += memchr_count(text.as_bytes());
        last_byte = buffer.last().copied();
    }
    let unterminated = u64::from(size > 0 && last_byte != Some(b'\n'));
    if exact {
        return Ok(Sampled {
            preview,
            chars,
            lines: newlines + unterminated,
            exact,
        });
    }
    let scale = |count: u64| (count as f64 * size as f64 / bytes_seen.max(1) as f64).round() as u64;
    Ok(Sampled {
        preview,
        chars: scale(chars),
        lines: scale(newlines).max(1),
        exact,
    })
}

fn memchr_count(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

/// The whole characters of `buffer` (read at `start` of the file): a sample may begin
/// inside a character and end inside one; anything else that is not UTF-8 is an error
/// naming its offset in the file.
fn utf8_inside<'b>(
    buffer: &'b [u8],
    start: u64,
    at_end_of_file: bool,
    path: &Path,
) -> Result<&'b str, ContextError> {
    let skip = if start == 0 {
        0
    } else {
        buffer
            .iter()
            .take(3)
            .take_while(|&&b| b & 0xC0 == 0x80)
            .count()
    };
    let body = &buffer[skip..];
    match std::str::from_utf8(body) {
        Ok(text) => Ok(text),
        // Cut inside the last character by the sample's end: keep what is whole.
        Err(e) if e.error_len().is_none() && !at_end_of_file => {
            Ok(std::str::from_utf8(&body[..e.valid_up_to()]).unwrap_or_default())
        }
        Err(e) => Err(ContextError::InvalidUtf8 {
            path: path.to_owned(),
            offset: start + (skip + e.valid_up_to()) as u64,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampled(content: &[u8]) -> Result<Sampled, ContextError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, content).unwrap();
        sample(&path, content.len() as u64)
    }

    #[test]
    fn small_files_are_counted_exactly() {
        let s = sampled("héllo\nwörld".as_bytes()).unwrap();
        assert_eq!((s.chars, s.lines, s.exact), (11, 2, true));
        assert_eq!(s.preview, "héllo\nwörld");
        assert_eq!(sampled(b"").unwrap().lines, 0);
        assert_eq!(sampled(b"a\n").unwrap().lines, 1);
    }

    #[test]
    fn large_files_are_estimated_from_three_samples() {
        let line = "2026-11-24 svc=api ok é\n"; // 24 chars, 25 bytes
        let text = line.repeat(100_000);
        let s = sampled(text.as_bytes()).unwrap();
        assert!(!s.exact);
        let lines = s.lines as f64;
        assert!((lines - 100_000.0).abs() / 100_000.0 < 0.01, "{lines}");
        let chars = s.chars as f64;
        assert!((chars - 2_400_000.0).abs() / 2_400_000.0 < 0.01, "{chars}");
        assert!(s.preview.starts_with("2026-11-24 svc=api ok é\n"));
        assert_eq!(s.preview.chars().count(), PREVIEW_CHARS);
    }

    #[test]
    fn a_binary_file_is_refused_with_its_offset() {
        let mut content = b"text\n".repeat(100).to_vec();
        content.extend_from_slice(&[0xff, 0xfe]);
        let error = sampled(&content).unwrap_err();
        assert!(
            matches!(error, ContextError::InvalidUtf8 { offset: 500, .. }),
            "{error}"
        );
        // Also in the middle sample of a large file.
        let mut big = vec![b'a'; 400_000];
        big[200_000] = 0xC3;
        big[200_001] = b'(';
        let error = sampled(&big).unwrap_err();
        assert!(
            matches!(
                error,
                ContextError::InvalidUtf8 {
                    offset: 200_000,
                    ..
                }
            ),
            "{error}"
        );
    }
}

//! Text statistics gathered while text streams by, so a copied input or a stored
//! variable is counted (characters, widest code point, a preview) in the same pass that
//! moves it, never by holding it whole.

use std::io::{self, Read, Write};

use super::info::{TextStats, PREVIEW_CHARS};

/// Tracks character count, code point class and a preview of UTF-8 bytes passing by.
#[derive(Debug, Default)]
struct Stats {
    stats: TextStats,
    head: Vec<u8>,
}

impl Stats {
    fn observe(&mut self, bytes: &[u8]) {
        if self.head.len() < PREVIEW_CHARS * 4 {
            let take = (PREVIEW_CHARS * 4 - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
        }
        let mut class = self.stats.max_char;
        for &b in bytes {
            if b & 0xc0 != 0x80 {
                self.stats.chars += 1;
            }
            // The lead byte of a sequence bounds its code point.
            class = class.max(match b {
                0x00..=0xbf => 0x7f, // ASCII or a continuation byte
                0xc0..=0xc3 => 0xff,
                0xc4..=0xef => 0xffff,
                _ => 0x10ffff,
            });
        }
        self.stats.max_char = class;
    }

    fn preview(&self) -> String {
        let text = String::from_utf8_lossy(&self.head);
        text.trim_end_matches('\u{fffd}')
            .chars()
            .take(PREVIEW_CHARS)
            .collect()
    }
}

/// A reader that gathers statistics of what it reads.
pub(super) struct StatsReader<R> {
    inner: R,
    stats: Stats,
}

impl<R: Read> StatsReader<R> {
    /// Counts what is read from `inner`.
    pub(super) fn new(inner: R) -> Self {
        Self {
            inner,
            stats: Stats::default(),
        }
    }

    /// The reader it reads from.
    pub(super) fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The statistics of what was read so far.
    pub(super) fn stats(&self) -> TextStats {
        let mut stats = self.stats.stats;
        stats.max_char = stats.max_char.max(0x7f);
        stats
    }

    /// At most [`PREVIEW_CHARS`] characters from the start of what was read.
    pub(super) fn preview(&self) -> String {
        self.stats.preview()
    }
}

impl<R: Read> Read for StatsReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.stats.observe(&buf[..n]);
        Ok(n)
    }
}

/// A writer that only gathers statistics of what is written to it.
#[derive(Default)]
pub(super) struct StatsWriter {
    stats: TextStats,
    inner: Stats,
}

impl StatsWriter {
    /// The statistics of what was written so far.
    pub(super) fn stats(&self) -> TextStats {
        self.stats
    }

    /// At most [`PREVIEW_CHARS`] characters from the start of what was written.
    pub(super) fn preview(&self) -> String {
        self.inner.preview()
    }
}

impl Write for StatsWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.observe(buf);
        self.stats = self.inner.stats;
        self.stats.max_char = self.stats.max_char.max(0x7f);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_split_anywhere_counts_the_same_as_whole() {
        let text = "héllo wörld → 𝄞 end".repeat(20);
        let mut whole = StatsWriter::default();
        whole.write_all(text.as_bytes()).unwrap();
        let mut split = StatsWriter::default();
        for byte in text.as_bytes().chunks(1) {
            split.write_all(byte).unwrap();
        }
        let expected = TextStats {
            chars: text.chars().count() as u64,
            max_char: 0x10ffff,
        };
        assert_eq!((whole.stats(), split.stats()), (expected, expected));
        assert_eq!(whole.preview(), split.preview());
        assert_eq!(
            whole.preview(),
            text.chars().take(PREVIEW_CHARS).collect::<String>()
        );
    }

    #[test]
    fn a_reader_counts_what_passes_and_ascii_is_the_least_class() {
        let mut reader = StatsReader::new(&b""[..]);
        io::copy(&mut reader, &mut io::sink()).unwrap();
        assert_eq!(
            reader.stats(),
            TextStats {
                chars: 0,
                max_char: 0x7f
            }
        );
        let mut reader = StatsReader::new("añb".as_bytes());
        io::copy(&mut reader, &mut io::sink()).unwrap();
        assert_eq!(
            reader.stats(),
            TextStats {
                chars: 3,
                max_char: 0xff
            }
        );
        assert_eq!(reader.preview(), "añb");
    }
}

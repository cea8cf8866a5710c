//! Human-readable rendering: sizes, times, keys and aligned tables.
//!
//! Kept apart from the commands so that every command formats the same things the
//! same way, and so the formatting is unit-tested without running the binary.

use std::io::{self, Write};

/// `1536` → `1.5 KiB`; bytes below 1 KiB are exact.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Milliseconds since the epoch as `YYYY-MM-DD HH:MM:SS` (UTC).
pub fn utc_time(ms_since_epoch: u64) -> String {
    const MS_PER_DAY: u64 = 86_400_000;
    let days = ms_since_epoch / MS_PER_DAY;
    let secs_of_day = (ms_since_epoch % MS_PER_DAY) / 1000;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        secs_of_day / 3600,
        secs_of_day / 60 % 60,
        secs_of_day % 60
    )
}

/// Days since 1970-01-01 to a (year, month, day) date, proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// A key as shown to a person: as is, unless it holds control characters (a newline
/// would break a table), which are escaped.
pub fn shown_key(key: &str) -> String {
    if key.chars().any(char::is_control) {
        escape_controls(key)
    } else {
        key.to_owned()
    }
}

/// Escapes control characters (`\n`, `\t`, `\u{1b}`…) and nothing else.
pub fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// Writes rows as left-aligned columns separated by two spaces, with a header row.
pub fn write_table(out: &mut dyn Write, header: &[&str], rows: &[Vec<String>]) -> io::Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', width - cell.chars().count() + 2));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// A writer that keeps the first `limit` bytes and then refuses more, so a preview of
/// a huge value is taken without reading all of it.
#[derive(Debug)]
pub struct Capture {
    limit: usize,
    bytes: Vec<u8>,
    full: bool,
}

impl Capture {
    /// A capture of at most `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            bytes: Vec::with_capacity(limit.min(64 * 1024)),
            full: false,
        }
    }

    /// True once more was offered than fits: the value is longer than the capture.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// The captured bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = self.limit - self.bytes.len();
        if buf.len() > room {
            self.bytes.extend_from_slice(&buf[..room]);
            self.full = true;
            return Err(io::Error::other("preview complete"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A writer that remembers whether the reader on the other end went away (`EPIPE`),
/// whatever error type a layer above turns that into.
#[derive(Debug)]
pub struct PipeAware<W> {
    inner: W,
    closed: bool,
}

impl<W: Write> PipeAware<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            closed: false,
        }
    }

    /// True once a write failed because the reader closed the pipe.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    fn watch<T>(&mut self, result: io::Result<T>) -> io::Result<T> {
        if let Err(e) = &result {
            if e.kind() == io::ErrorKind::BrokenPipe {
                self.closed = true;
            }
        }
        result
    }
}

impl<W: Write> Write for PipeAware<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let result = self.inner.write(buf);
        self.watch(result)
    }

    fn flush(&mut self) -> io::Result<()> {
        let result = self.inner.flush();
        self.watch(result)
    }
}

/// Prints `warning: …` on stderr (ignoring a closed stderr: there is no one to tell).
pub fn warning(message: std::fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr().lock(), "warning: {message}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_binary_units() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(20 * 1024 * 1024), "20.0 MiB");
        assert_eq!(human_size(1 << 30), "1.0 GiB");
    }

    #[test]
    fn times_are_utc_dates() {
        assert_eq!(utc_time(0), "1970-01-01 00:00:00");
        assert_eq!(utc_time(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(utc_time(1_763_804_399_999), "2025-11-22 09:39:59");
    }

    #[test]
    fn control_characters_are_escaped_in_keys() {
        assert_eq!(shown_key("a/b é"), "a/b é");
        assert_eq!(shown_key("a\nb\t"), "a\\nb\\t");
    }

    #[test]
    fn tables_align_columns() {
        let mut out = Vec::new();
        let rows = vec![
            vec!["a".to_owned(), "text".to_owned()],
            vec!["long-key".to_owned(), "json".to_owned()],
        ];
        write_table(&mut out, &["KEY", "TYPE"], &rows).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "KEY       TYPE\na         text\nlong-key  json\n"
        );
    }

    #[test]
    fn capture_stops_at_its_limit() {
        let mut capture = Capture::new(4);
        assert!(capture.write_all(b"ab").is_ok());
        assert!(capture.write_all(b"cdef").is_err());
        assert!(capture.is_full());
        assert_eq!(capture.bytes(), b"abcd");
    }

    #[test]
    fn pipe_aware_notices_a_closed_reader() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut out = PipeAware::new(Closed);
        assert!(!out.is_closed());
        assert!(out.write_all(b"x").is_err());
        assert!(out.is_closed());
    }
}

//! Small renderings shared by the library and the binary: UTC dates from epoch
//! milliseconds, byte sizes, short previews cut on character boundaries, and a writer
//! that keeps only the start of what it is given.
//!
//! They are here once so that a run id, a trace, a prompt and the command line show
//! the same thing the same way, without a date-time dependency.

use std::io::{self, Write};

const MS_PER_DAY: u64 = 86_400_000;

/// Serde for a [`Duration`](std::time::Duration) as whole milliseconds (`#[serde(with =
/// "crate::format::duration_ms")]`), the unit settings files and traces use.
pub mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the duration as milliseconds.
    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
    }

    /// Reads milliseconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        u64::deserialize(deserializer).map(Duration::from_millis)
    }
}

/// Like [`duration_ms`], for an optional duration.
pub mod option_duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the duration as milliseconds, or `null`.
    pub fn serialize<S: Serializer>(
        duration: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match duration {
            Some(d) => serializer.serialize_some(&u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => serializer.serialize_none(),
        }
    }

    /// Reads milliseconds or `null`.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        Option::<u64>::deserialize(deserializer).map(|ms| ms.map(Duration::from_millis))
    }
}

/// `1536` → `1.5 KiB`; bytes below 1 KiB are exact.
pub fn human_bytes(bytes: u64) -> String {
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

/// A moment in UTC, to the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcTime {
    /// Year.
    pub year: u64,
    /// Month, 1–12.
    pub month: u64,
    /// Day of the month, 1–31.
    pub day: u64,
    /// Hour, 0–23.
    pub hour: u64,
    /// Minute, 0–59.
    pub minute: u64,
    /// Second, 0–59.
    pub second: u64,
}

impl UtcTime {
    /// The moment `ms_since_epoch` milliseconds after 1970-01-01 00:00:00 UTC.
    pub fn from_ms(ms_since_epoch: u64) -> Self {
        let (year, month, day) = civil_from_days(ms_since_epoch / MS_PER_DAY);
        let secs_of_day = (ms_since_epoch % MS_PER_DAY) / 1000;
        Self {
            year,
            month,
            day,
            hour: secs_of_day / 3600,
            minute: secs_of_day / 60 % 60,
            second: secs_of_day % 60,
        }
    }
}

/// Milliseconds since the epoch as `YYYY-MM-DD HH:MM:SS` (UTC).
pub fn utc_time(ms_since_epoch: u64) -> String {
    let t = UtcTime::from_ms(ms_since_epoch);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        t.year, t.month, t.day, t.hour, t.minute, t.second
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

/// The first `max_chars` characters of `text`, followed by `…` when more was cut.
pub fn clip(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// `text` with every run of whitespace (newlines included) made one space, and no
/// whitespace at either end.
pub fn flatten_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` on one line (runs of whitespace become one space), cut to `max` characters
/// (followed by `…` when cut).
pub fn one_line(text: &str, max: usize) -> String {
    clip(&flatten_whitespace(text), max)
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

    /// The bytes as text, a multi-byte character cut at the limit dropped.
    pub fn into_string(self) -> String {
        match String::from_utf8(self.bytes) {
            Ok(text) => text,
            Err(e) => {
                let valid = e.utf8_error().valid_up_to();
                let mut bytes = e.into_bytes();
                bytes.truncate(valid);
                String::from_utf8_lossy(&bytes).into_owned()
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_binary_units() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(10), "10 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(20 * 1024 * 1024), "20.0 MiB");
        assert_eq!(human_bytes(64 << 20), "64.0 MiB");
        assert_eq!(human_bytes(1 << 30), "1.0 GiB");
    }

    #[test]
    fn civil_dates_are_right() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_414), (2025, 11, 22));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn times_are_utc_dates() {
        assert_eq!(utc_time(0), "1970-01-01 00:00:00");
        assert_eq!(utc_time(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(utc_time(1_763_804_399_999), "2025-11-22 09:39:59");
    }

    #[test]
    fn clips_cut_on_char_boundaries() {
        let long = "é".repeat(300);
        assert_eq!(clip(&long, 200).chars().count(), 201);
        assert_eq!(clip("short", 200), "short");
    }

    #[test]
    fn capture_stops_at_its_limit() {
        let mut capture = Capture::new(4);
        assert!(capture.write_all(b"ab").is_ok());
        assert!(capture.write_all(b"cdef").is_err());
        assert!(capture.is_full());
        assert_eq!(capture.bytes(), b"abcd");
        assert_eq!(capture.into_string(), "abcd");
    }
}

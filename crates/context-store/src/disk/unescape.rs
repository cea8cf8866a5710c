//! An incremental JSON string unescaper: a text value is streamed out of its file in
//! chunks, and an escape (`\n`, `\u00e9`, a surrogate pair) may straddle two of them.

use std::io::{self, Write};

/// Why unescaping stopped.
pub(super) enum UnescapeError {
    /// Writing the unescaped bytes failed.
    Io(io::Error),
    /// The string is not valid JSON (the reason).
    Bad(&'static str),
}

/// Incremental JSON string unescaper (state survives chunk boundaries).
#[derive(Default)]
pub(super) struct Unescaper {
    /// Bytes of an escape sequence seen so far (starting with `\`).
    pending: Vec<u8>,
    /// A high surrogate waiting for its low half.
    high_surrogate: Option<u16>,
    out_buf: Vec<u8>,
}

impl Unescaper {
    /// Feeds raw bytes; returns true when the closing quote was reached.
    pub(super) fn feed(
        &mut self,
        mut bytes: &[u8],
        out: &mut dyn Write,
    ) -> Result<bool, UnescapeError> {
        self.out_buf.clear();
        let mut closed = false;
        while !bytes.is_empty() {
            if !self.pending.is_empty() {
                self.pending.push(bytes[0]);
                bytes = &bytes[1..];
                self.try_finish_escape()?;
                continue;
            }
            match bytes.iter().position(|&b| b == b'"' || b == b'\\') {
                None => {
                    self.flush_surrogate_check(bytes)?;
                    self.out_buf.extend_from_slice(bytes);
                    bytes = &[];
                }
                Some(i) => {
                    self.flush_surrogate_check(&bytes[..i])?;
                    self.out_buf.extend_from_slice(&bytes[..i]);
                    if bytes[i] == b'"' {
                        if self.high_surrogate.is_some() {
                            return Err(UnescapeError::Bad("unpaired surrogate in text value"));
                        }
                        closed = true;
                        break;
                    }
                    self.pending.push(b'\\');
                    bytes = &bytes[i + 1..];
                }
            }
        }
        out.write_all(&self.out_buf).map_err(UnescapeError::Io)?;
        Ok(closed)
    }

    fn flush_surrogate_check(&self, bytes: &[u8]) -> Result<(), UnescapeError> {
        if self.high_surrogate.is_some() && !bytes.is_empty() {
            return Err(UnescapeError::Bad("unpaired surrogate in text value"));
        }
        Ok(())
    }

    fn try_finish_escape(&mut self) -> Result<(), UnescapeError> {
        let simple = match self.pending.get(1).copied() {
            None => return Ok(()),
            Some(b'"') => Some(b'"'),
            Some(b'\\') => Some(b'\\'),
            Some(b'/') => Some(b'/'),
            Some(b'b') => Some(0x08),
            Some(b'f') => Some(0x0c),
            Some(b'n') => Some(b'\n'),
            Some(b'r') => Some(b'\r'),
            Some(b't') => Some(b'\t'),
            Some(b'u') => None,
            Some(_) => return Err(UnescapeError::Bad("invalid escape in text value")),
        };
        if let Some(byte) = simple {
            if self.high_surrogate.is_some() {
                return Err(UnescapeError::Bad("unpaired surrogate in text value"));
            }
            self.out_buf.push(byte);
            self.pending.clear();
            return Ok(());
        }
        if self.pending.len() < 6 {
            return Ok(());
        }
        let digits = std::str::from_utf8(&self.pending[2..6])
            .map_err(|_| UnescapeError::Bad("invalid \\u escape"))?;
        let unit = u16::from_str_radix(digits, 16)
            .map_err(|_| UnescapeError::Bad("invalid \\u escape"))?;
        self.pending.clear();
        let ch = match (self.high_surrogate.take(), unit) {
            (None, 0xD800..=0xDBFF) => {
                self.high_surrogate = Some(unit);
                return Ok(());
            }
            (Some(high), 0xDC00..=0xDFFF) => {
                let code =
                    0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                char::from_u32(code)
            }
            (Some(_), _) | (None, 0xDC00..=0xDFFF) => None,
            (None, _) => char::from_u32(u32::from(unit)),
        };
        let ch = ch.ok_or(UnescapeError::Bad("unpaired surrogate in text value"))?;
        let mut utf8 = [0u8; 4];
        self.out_buf
            .extend_from_slice(ch.encode_utf8(&mut utf8).as_bytes());
        Ok(())
    }
}

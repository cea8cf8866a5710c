//! Reading a child's output with bounded memory.
//!
//! A child may print gigabytes or hold a pipe open forever; the orchestrator keeps only
//! what it will show: the first bytes of a result ([`read_capped`]) or the last bytes
//! of a diagnostic stream ([`TailBuffer`], for error messages). Both keep reading past
//! the cap, so the child never blocks on a full pipe.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt};

/// Read size for the pipe readers.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// The last `capacity` bytes of a stream, and how much was written in total.
#[derive(Debug, Clone)]
pub struct TailBuffer {
    bytes: VecDeque<u8>,
    capacity: usize,
    total: u64,
}

impl TailBuffer {
    /// An empty tail keeping at most `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        Self {
            bytes: VecDeque::with_capacity(capacity.min(READ_CHUNK_BYTES)),
            capacity,
            total: 0,
        }
    }

    /// Appends bytes, dropping the oldest beyond the capacity.
    pub fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        let keep = &data[data.len().saturating_sub(self.capacity)..];
        let overflow = (self.bytes.len() + keep.len()).saturating_sub(self.capacity);
        self.bytes.drain(..overflow);
        self.bytes.extend(keep);
    }

    /// Bytes written since creation (including dropped ones).
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Whether nothing was ever written.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Forgets everything kept so far.
    pub fn clear(&mut self) {
        self.bytes.clear();
    }

    /// The kept bytes as text (invalid UTF-8 replaced), prefixed with a marker when
    /// older bytes were dropped.
    pub fn to_string_lossy(&self) -> String {
        let (front, back) = self.bytes.as_slices();
        let mut joined = Vec::with_capacity(self.bytes.len());
        joined.extend_from_slice(front);
        joined.extend_from_slice(back);
        let text = String::from_utf8_lossy(&joined);
        let dropped = self.total - self.bytes.len() as u64;
        if dropped > 0 {
            format!("[… {dropped} earlier bytes not kept]\n{text}")
        } else {
            text.into_owned()
        }
    }
}

/// The first bytes of a stream and its full length.
#[derive(Debug, Clone, Default)]
pub struct Captured {
    /// At most the cap's worth of bytes, from the start.
    pub bytes: Vec<u8>,
    /// Everything the stream produced.
    pub total: u64,
}

impl Captured {
    /// Whether bytes past the cap were discarded.
    pub fn truncated(&self) -> bool {
        self.total > self.bytes.len() as u64
    }
}

/// Reads `reader` to its end, keeping the first `cap` bytes and discarding the rest.
pub async fn read_capped<R: AsyncRead + Unpin>(
    mut reader: R,
    cap: usize,
) -> std::io::Result<Captured> {
    let mut captured = Captured::default();
    let mut buf = vec![0u8; READ_CHUNK_BYTES];
    loop {
        let n = reader.read(&mut buf).await?;
        if n == 0 {
            return Ok(captured);
        }
        captured.total += n as u64;
        let room = cap.saturating_sub(captured.bytes.len());
        captured.bytes.extend_from_slice(&buf[..n.min(room)]);
    }
}

/// Reads `reader` to its end like [`read_capped`], but into shared state, so what was
/// read so far is there even if the reading is abandoned (a pipe held open forever).
pub(crate) async fn read_capped_into<R: AsyncRead + Unpin>(
    mut reader: R,
    cap: usize,
    sink: Arc<Mutex<Captured>>,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; READ_CHUNK_BYTES];
    loop {
        let n = reader.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        let mut captured = sink.lock().unwrap_or_else(PoisonError::into_inner);
        captured.total += n as u64;
        let room = cap.saturating_sub(captured.bytes.len());
        captured.bytes.extend_from_slice(&buf[..n.min(room)]);
    }
}

/// Reads `reader` to its end into a shared tail (e.g. a kernel's stderr, kept for
/// error messages).
pub async fn drain_into_tail<R: AsyncRead + Unpin>(
    mut reader: R,
    tail: Arc<Mutex<TailBuffer>>,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; READ_CHUNK_BYTES];
    loop {
        let n = reader.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        tail.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_bytes() {
        let mut tail = TailBuffer::new(5);
        tail.push(b"abc");
        assert_eq!(tail.to_string_lossy(), "abc");
        tail.push(b"defg");
        assert_eq!(
            tail.to_string_lossy(),
            "[… 2 earlier bytes not kept]\ncdefg"
        );
        tail.push(b"0123456789");
        assert!(tail.to_string_lossy().ends_with("\n56789"));
        assert_eq!(tail.total_bytes(), 17);
    }

    #[tokio::test]
    async fn read_capped_keeps_the_head_and_counts_everything() {
        let data = vec![b'x'; 200_000];
        let captured = read_capped(&data[..], 1000).await.unwrap();
        assert_eq!(captured.bytes.len(), 1000);
        assert_eq!(captured.total, 200_000);
        assert!(captured.truncated());
        let small = read_capped(&b"hi"[..], 1000).await.unwrap();
        assert!(!small.truncated());
    }
}

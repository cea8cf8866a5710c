//! Writing variable files: a value already encoded in memory, or text streamed from a
//! reader of any length (escaped, hashed and written on the way, memory bounded).
//!
//! Both land in a temp file beside the destination and are renamed into place
//! ([`crate::private_fs`]), so a reader never sees a torn file.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::header::{header_line, FileHeader, VALUE_PREFIX};
use super::STREAM_CHUNK_BYTES;
use crate::error::{Result, StoreError};
use crate::integrity::hex;
use crate::private_fs::{stage, write_atomically, Durability, Staged};
use crate::reference::VariableRef;

/// Spaces reserved in a streamed file's header for the final size digits.
const STREAM_HEADER_PAD: usize = 24;

/// Atomically writes a variable file: temp file in the same directory, optional fsync,
/// rename over `path`, optional fsync of the directory. Returns the value's offset.
pub fn write_file(
    path: &Path,
    header: &FileHeader,
    value: &[u8],
    durability: Durability,
) -> Result<u64> {
    let line = header_line(header, 0);
    let value_offset = (line.len() + VALUE_PREFIX.len()) as u64;
    write_atomically(path, durability, |file| {
        let mut out = io::BufWriter::with_capacity(64 * 1024, file);
        out.write_all(&line)?;
        out.write_all(VALUE_PREFIX)?;
        out.write_all(value)?;
        out.write_all(b"}")?;
        out.flush()
    })?;
    Ok(value_offset)
}

/// Streams UTF-8 text from `reader` into a variable file as a JSON string, computing
/// size and sha256 on the way; memory stays bounded whatever the length.
/// `header.reference`'s size and hash are filled in and returned.
#[cfg(test)]
pub fn write_text_streaming(
    path: &Path,
    header: FileHeader,
    reader: &mut dyn Read,
    source_name: &str,
    durability: Durability,
) -> Result<VariableRef> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let (staged, reference) = stage_text_streaming(dir, header, reader, source_name, durability)?;
    staged.publish(path)?;
    Ok(reference)
}

/// [`write_text_streaming`] up to, not including, the rename: the text lands in a
/// (locked) temp file in `dir`, fsynced if asked, and the caller publishes it with
/// [`Staged::publish`] — so a writer waiting for slow input (a pipe, a terminal) holds
/// no lock on the variable while it waits.
pub fn stage_text_streaming(
    dir: &Path,
    mut header: FileHeader,
    reader: &mut dyn Read,
    source_name: &str,
    durability: Durability,
) -> Result<(Staged, VariableRef)> {
    header.reference.size_bytes = 0;
    header.reference.sha256 = Some("0".repeat(64));
    let provisional = header_line(&header, STREAM_HEADER_PAD);
    let mut outcome: Option<Result<VariableRef>> = None;
    let written = stage(dir, durability, |file| {
        file.write_all(&provisional)?;
        file.write_all(VALUE_PREFIX)?;
        let mut out = io::BufWriter::with_capacity(STREAM_CHUNK_BYTES, &mut *file);
        let (size, sha) = match escape_stream(reader, &mut out, source_name) {
            Ok(done) => done,
            Err(e) => {
                outcome = Some(Err(e));
                return Err(io::Error::other("invalid text"));
            }
        };
        out.write_all(b"}")?;
        out.flush()?;
        drop(out);
        header.reference.size_bytes = size;
        header.reference.sha256 = Some(sha);
        let unpadded = header_line(&header, 0);
        let pad = provisional.len() - unpadded.len();
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&header_line(&header, pad))?;
        outcome = Some(Ok(header.reference.clone()));
        Ok(())
    });
    match (written, outcome) {
        (_, Some(Err(e))) => Err(e),
        (Err(e), _) => Err(e),
        (Ok(staged), Some(Ok(r))) => Ok((staged, r)),
        (Ok(staged), None) => Err(StoreError::Corrupt {
            path: staged.path().to_owned(),
            reason: "stream ended early".into(),
        }),
    }
}

/// Copies `reader` into `out` as the body of a JSON string (with quotes), validating
/// UTF-8 across chunk boundaries. Returns (bytes written, sha256 of them).
///
/// Reading and escaping run on this thread, hashing and writing on a second one, a
/// chunk behind: a large context is copied in about the time of the slower half
/// instead of the sum.
fn escape_stream(
    reader: &mut dyn Read,
    out: &mut (dyn Write + Send),
    source_name: &str,
) -> Result<(u64, String)> {
    let io_err =
        |e: io::Error| StoreError::io("write variable file for", source_name.to_owned(), e);
    std::thread::scope(|scope| {
        let (chunks, inbox) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
        let (spent, recycled) = std::sync::mpsc::channel::<Vec<u8>>();
        let writer = scope.spawn(move || -> io::Result<(u64, String)> {
            let mut hasher = Sha256::new();
            let mut size: u64 = 0;
            for chunk in inbox {
                hasher.update(&chunk);
                size += chunk.len() as u64;
                out.write_all(&chunk)?;
                let _ = spent.send(chunk);
            }
            Ok((size, hex(&hasher.finalize())))
        });
        let escaped = escape_chunks(
            reader,
            source_name,
            |chunk| chunks.send(chunk).is_ok(),
            &recycled,
        );
        drop(chunks);
        let written = match writer.join() {
            Ok(written) => written.map_err(io_err),
            Err(_) => Err(io_err(io::Error::other("the writer thread panicked"))),
        };
        // A read or UTF-8 error is the cause when there is one (the writer then only
        // saw its input end early); otherwise the writer's own error (a full disk).
        match (escaped, written) {
            (Err(error), _) | (Ok(_), Err(error)) => Err(error),
            (Ok(true), Ok(done)) => Ok(done),
            (Ok(false), Ok(_)) => Err(io_err(io::Error::other("the writer stopped early"))),
        }
    })
}

/// Reads `reader` in chunks, validates them as UTF-8 (across chunk boundaries) and
/// hands each one's JSON-escaped form, the quotes included, to `send` (which says
/// whether it was taken). Buffers come back through `recycled`. `Ok(false)`: the
/// receiver stopped taking them (its own error says why).
fn escape_chunks(
    reader: &mut dyn Read,
    source_name: &str,
    mut send: impl FnMut(Vec<u8>) -> bool,
    recycled: &std::sync::mpsc::Receiver<Vec<u8>>,
) -> Result<bool> {
    if !send(b"\"".to_vec()) {
        return Ok(false);
    }
    let mut buf = vec![0u8; STREAM_CHUNK_BYTES];
    let mut carry = 0usize; // bytes of an incomplete UTF-8 sequence kept from the last chunk
    let mut consumed: u64 = 0; // input bytes before buf[0]
    loop {
        let n = match reader.read(&mut buf[carry..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(StoreError::io("read", source_name.to_owned(), e)),
        };
        let filled = carry + n;
        let at_end = n == 0;
        let valid = match std::str::from_utf8(&buf[..filled]) {
            Ok(s) => s.len(),
            Err(e) if e.error_len().is_none() && !at_end => e.valid_up_to(),
            Err(e) => {
                return Err(StoreError::InvalidUtf8 {
                    source_name: source_name.to_owned(),
                    offset: consumed + e.valid_up_to() as u64,
                })
            }
        };
        // SAFETY-free: `valid` bytes were just checked.
        let text = std::str::from_utf8(&buf[..valid]).unwrap_or_default();
        if !text.is_empty() {
            let mut escaped = recycled
                .try_recv()
                .unwrap_or_else(|_| Vec::with_capacity(STREAM_CHUNK_BYTES + 1024));
            escaped.clear();
            super::escape::escape_into(text, &mut escaped);
            if !send(escaped) {
                return Ok(false);
            }
        }
        buf.copy_within(valid..filled, 0);
        carry = filled - valid;
        consumed += valid as u64;
        if at_end {
            break;
        }
    }
    Ok(send(b"\"".to_vec()))
}

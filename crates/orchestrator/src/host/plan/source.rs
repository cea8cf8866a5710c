//! Where a plan's input is read from — a file (the store's text view of a variable,
//! or the file a `file` variable refers to), text the REPL sent, or a piece of either
//! that a nested plan cuts again — and every read of it, each bounded: the split
//! streams it, a pass over a piece (a filter, a `count`, an `extract`, the line count
//! of a refusal) reads it in chunks of whole lines of at most
//! [`CHUNK_MAX_BYTES`], and only a piece that goes whole into a prompt or a variable
//! is read whole, up to [`WHOLE_PIECE_MAX_BYTES`]. A piece of a file with no line end
//! was once read whole for each of those passes (256 MiB held twice over).

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;

use rlm_plan::split::{split_input, Cut, Piece, SplitError};
use rlm_plan::{PlanError, MAX_PIECES};
use rlm_protocol::format::human_bytes;
use rlm_protocol::host_call::HostError;

use super::refused;

/// Bytes of one chunk a pass over a piece reads at a time: whole lines, or part of a
/// longer line, cut on a character boundary.
pub(crate) const CHUNK_MAX_BYTES: usize = 1 << 20;

/// Bytes of a piece that is read whole: the context of a prompt (which the window
/// bounds far below this), of a nested run or of an agent (stored as a variable).
pub(crate) const WHOLE_PIECE_MAX_BYTES: u64 = 64 << 20;

/// Bytes the pass over a file reads at a time.
const PASS_BUFFER_BYTES: usize = 1 << 20;

/// A plan's input: bytes `start..end` of a file or of a text (cheap to clone: the
/// passes over the whole input run off the async threads, on a clone).
#[derive(Clone)]
pub(super) struct Source {
    input: Input,
    start: u64,
    end: u64,
}

#[derive(Clone)]
enum Input {
    /// A file.
    File(PathBuf),
    /// Text the REPL sent (or a JSON list made one item a line).
    Text(Arc<str>),
}

impl Source {
    /// The whole of the file at `path`.
    pub(super) fn file(path: PathBuf) -> Result<Self, HostError> {
        let end = std::fs::metadata(&path)
            .map_err(|e| read_error(&Input::File(path.clone()), &e))?
            .len();
        Ok(Self {
            input: Input::File(path),
            start: 0,
            end,
        })
    }

    /// The whole of `text`.
    pub(super) fn text(text: impl Into<Arc<str>>) -> Self {
        let text: Arc<str> = text.into();
        Self {
            end: text.len() as u64,
            input: Input::Text(text),
            start: 0,
        }
    }

    /// Bytes of the input.
    pub(super) fn bytes(&self) -> u64 {
        self.end - self.start
    }

    /// `piece` of this input, as an input of its own (a nested plan's).
    pub(super) fn within(&self, piece: &Piece) -> Self {
        let (start, end) = self.bounds(piece);
        Self {
            input: self.input.clone(),
            start,
            end,
        }
    }

    /// Where `piece` lies in the file or text (clipped to this input).
    fn bounds(&self, piece: &Piece) -> (u64, u64) {
        let start = self.start.saturating_add(piece.start).min(self.end);
        let end = self.start.saturating_add(piece.end).clamp(start, self.end);
        (start, end)
    }

    /// A reader of bytes `start..end`.
    fn open(&self, (start, end): (u64, u64)) -> std::io::Result<Box<dyn BufRead + Send>> {
        match &self.input {
            Input::Text(text) => Ok(Box::new(TextSlice {
                text: Arc::clone(text),
                at: start as usize,
                end: end as usize,
            })),
            Input::File(path) => {
                let mut file = std::fs::File::open(path)?;
                file.seek(SeekFrom::Start(start))?;
                Ok(Box::new(BufReader::with_capacity(
                    PASS_BUFFER_BYTES,
                    file.take(end - start),
                )))
            }
        }
    }

    /// Cuts the input (one streaming pass; two with an overlap).
    pub(super) fn split(&self, cut: &Cut) -> Result<Vec<Piece>, HostError> {
        let whole = (self.start, self.end);
        split_input(|| self.open(whole), cut, MAX_PIECES).map_err(|e| match e {
            SplitError::Read(e) => refused(PlanError::Read(e.to_string())),
            too_many => refused(PlanError::Shape(too_many.to_string())),
        })
    }

    /// The text of `piece`, whole: for a prompt, a nested run or an agent. A piece
    /// over [`WHOLE_PIECE_MAX_BYTES`] is refused unread (pricing refuses it first).
    pub(super) fn read(&self, piece: &Piece) -> Result<String, HostError> {
        let (start, end) = self.bounds(piece);
        if end - start > WHOLE_PIECE_MAX_BYTES {
            return Err(too_large_to_read_whole(end - start));
        }
        let mut bytes = Vec::new();
        self.open((start, end))
            .and_then(|mut reader| reader.read_to_end(&mut bytes))
            .map_err(|e| read_error(&self.input, &e))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Hands the text of `piece` to `each` in chunks of whole lines of at most
    /// [`CHUNK_MAX_BYTES`] (a longer line in parts, cut on a character boundary), in
    /// order, until it ends or `each` breaks.
    pub(super) fn chunks(
        &self,
        piece: &Piece,
        each: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<(), HostError> {
        let bounds = self.bounds(piece);
        let fail = |e: std::io::Error| read_error(&self.input, &e);
        let mut reader = self.open(bounds).map_err(fail)?;
        let mut chunk: Vec<u8> = Vec::with_capacity(CHUNK_MAX_BYTES.min(64 << 10));
        loop {
            let buffer = reader.fill_buf().map_err(fail)?;
            if buffer.is_empty() {
                break;
            }
            let take = buffer.len().min(CHUNK_MAX_BYTES - chunk.len());
            chunk.extend_from_slice(&buffer[..take]);
            reader.consume(take);
            if chunk.len() < CHUNK_MAX_BYTES {
                continue;
            }
            // Full: hand over its whole lines, or all but an unfinished character.
            let keep = chunk
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or_else(|| char_boundary(&chunk), |i| i + 1);
            let rest = chunk.split_off(keep);
            if each(&String::from_utf8_lossy(&chunk)).is_break() {
                return Ok(());
            }
            chunk = rest;
        }
        if !chunk.is_empty() {
            let _ = each(&String::from_utf8_lossy(&chunk));
        }
        Ok(())
    }

    /// The lines of `piece` (a last line without a line end counts), counted in
    /// chunks.
    pub(super) fn lines_in(&self, piece: &Piece) -> Result<u64, HostError> {
        let (mut lines, mut last) = (0u64, b'\n');
        self.chunks(piece, &mut |text| {
            lines += text.bytes().filter(|&b| b == b'\n').count() as u64;
            last = text.bytes().last().unwrap_or(last);
            ControlFlow::Continue(())
        })?;
        Ok(lines + u64::from(last != b'\n'))
    }

    /// A sample of the input to calibrate the token estimate on
    /// ([`crate::window::ModelWindow::calibrate_on_sample`]): its start, middle and end, a few
    /// KiB each — never the whole of a large input. Empty when it cannot be read (the
    /// split that follows says why).
    pub(super) fn sample(&self) -> String {
        if let (Input::Text(text), 0) = (&self.input, self.start) {
            if self.end == text.len() as u64 {
                return crate::window::sample_of(text);
            }
        }
        let bytes = self.bytes();
        // Bytes a slice: a character is at most four.
        let slice = crate::window::SAMPLE_SLICE_CHARS as u64;
        let piece = |start: u64, end: u64| Piece {
            start,
            end,
            chars: 0,
        };
        let pieces = if bytes <= 3 * slice {
            vec![piece(0, bytes)]
        } else {
            let middle = bytes / 2 - slice / 2;
            vec![
                piece(0, slice),
                piece(middle, middle + slice),
                piece(bytes - slice, bytes),
            ]
        };
        pieces
            .iter()
            .filter_map(|p| self.read(p).ok())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The characters of each of `pieces`, counted from the input itself (a pieces
    /// variable's own figures are what model code wrote): in chunks, on the blocking
    /// pool.
    pub(super) fn measured(&self, pieces: &mut [(usize, Piece)]) -> Result<(), HostError> {
        for (_, piece) in pieces.iter_mut() {
            let mut chars = 0u64;
            self.chunks(piece, &mut |text| {
                chars += text.chars().count() as u64;
                ControlFlow::Continue(())
            })?;
            piece.chars = chars;
        }
        Ok(())
    }
}

/// A reader of bytes `at..end` of a text, without a copy.
struct TextSlice {
    text: Arc<str>,
    at: usize,
    end: usize,
}

impl Read for TextSlice {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let rest = self.fill_buf()?;
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for TextSlice {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        Ok(self
            .text
            .as_bytes()
            .get(self.at..self.end)
            .unwrap_or_default())
    }

    fn consume(&mut self, amount: usize) {
        self.at = self.at.saturating_add(amount).min(self.end);
    }
}

/// The refusal of a piece too large to be read whole.
pub(super) fn too_large_to_read_whole(bytes: u64) -> HostError {
    refused(PlanError::Shape(format!(
        "a piece of {} is handed on whole (to a prompt, a nested run or an agent), and a piece may hold {} at most: use a smaller `split.size`",
        human_bytes(bytes),
        human_bytes(WHOLE_PIECE_MAX_BYTES)
    )))
}

/// The model's error for an input that could not be read.
fn read_error(input: &Input, e: &std::io::Error) -> HostError {
    let what = match input {
        Input::File(path) => path.display().to_string(),
        Input::Text(_) => "text".to_owned(),
    };
    HostError::RespondToModel(format!("the plan's input {what} could not be read: {e}"))
}

/// The largest prefix length of `bytes` that ends on a UTF-8 character boundary: all
/// of it unless its last character is unfinished.
fn char_boundary(bytes: &[u8]) -> usize {
    let len = bytes.len();
    let lead = bytes
        .iter()
        .rposition(|&b| b & 0xC0 != 0x80)
        .filter(|&i| len - i < 4);
    match lead {
        Some(i) => {
            let need = match bytes[i] {
                0xF0.. => 4,
                0xE0.. => 3,
                0xC0.. => 2,
                _ => 1,
            };
            if i + need <= len {
                len
            } else {
                i
            }
        }
        None => len,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks_of(source: &Source, piece: &Piece) -> Vec<String> {
        let mut chunks = Vec::new();
        source
            .chunks(piece, &mut |text| {
                chunks.push(text.to_owned());
                ControlFlow::Continue(())
            })
            .unwrap();
        chunks
    }

    #[test]
    fn a_piece_without_line_ends_is_read_in_bounded_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("one-line.txt");
        let text = "é".repeat(3 * CHUNK_MAX_BYTES / 2 + 7);
        std::fs::write(&path, &text).unwrap();
        let source = Source::file(path).unwrap();
        let whole = Piece {
            start: 0,
            end: source.bytes(),
            chars: 0,
        };
        let chunks = chunks_of(&source, &whole);
        assert!(chunks.len() >= 3, "{}", chunks.len());
        assert!(chunks.iter().all(|c| c.len() <= CHUNK_MAX_BYTES));
        assert_eq!(chunks.concat(), text, "every character once, none cut");
        assert_eq!(source.lines_in(&whole).unwrap(), 1);
        // Lines are never cut when they fit: each chunk ends at a line end.
        let lines = "a line of forty bytes or so, give or take\n".repeat(60_000);
        let source = Source::text(lines.clone());
        let whole = Piece {
            start: 0,
            end: source.bytes(),
            chars: 0,
        };
        let chunks = chunks_of(&source, &whole);
        assert!(chunks.len() >= 2 && chunks.iter().all(|c| c.ends_with('\n')));
        assert_eq!(chunks.concat(), lines);
        assert_eq!(source.lines_in(&whole).unwrap(), 60_000);
    }

    #[test]
    fn a_piece_is_read_within_its_input_and_a_huge_one_is_not_read_whole() {
        let source = Source::text("0123456789abcdefghij");
        let inner = source.within(&Piece {
            start: 5,
            end: 15,
            chars: 10,
        });
        assert_eq!(inner.bytes(), 10);
        let piece = Piece {
            start: 2,
            end: 6,
            chars: 4,
        };
        assert_eq!(inner.read(&piece).unwrap(), "789a");
        // A piece past the input's end is clipped to it.
        let past = Piece {
            start: 8,
            end: 500,
            chars: 1,
        };
        assert_eq!(inner.read(&past).unwrap(), "de");
        let mut measured = vec![(0, past)];
        inner.measured(&mut measured).unwrap();
        assert_eq!(measured[0].1.chars, 2);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse.bin");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(WHOLE_PIECE_MAX_BYTES + 1)
            .unwrap();
        let source = Source::file(path).unwrap();
        let all = Piece {
            start: 0,
            end: source.bytes(),
            chars: 0,
        };
        let Err(HostError::RespondToModel(message)) = source.read(&all) else {
            panic!("read whole");
        };
        assert!(message.contains("use a smaller `split.size`"), "{message}");
    }
}

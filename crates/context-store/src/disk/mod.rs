//! The on-disk format of one variable file, private to the store.
//!
//! ```text
//! {"formatVersion":1,"ref":{"id":…,"key":…,"scope":…,"type":…,"sizeBytes":…,"createdAt":…,"sha256":…},"persist":true,
//! "value":<the value as compact JSON>}
//! ```
//! It is one JSON object, compatible with the original TypeScript context store (`ref`,
//! `value`, `persist`; docs/store.md), so any JSON parser reads it. The first line is
//! the *header*: everything but the value, ending in a comma. Opening a store reads only
//! headers (a bounded read per file), and the value starts at a known offset so a huge
//! text can be streamed out without parsing it whole. Files written by other programs
//! (any key order, no `sha256`, no `formatVersion`) are read by a streaming parse that
//! skips the value.
//!
//! Nothing outside the crate depends on this layout through Rust: other code reads
//! variables through [`crate::Store`], [`crate::VariableFile`] and
//! [`crate::TextReader`]. The modules split the format's jobs:
//!
//! - `header` — the first line: writing it, reading it back, foreign layouts;
//! - `write` — writing a file from encoded bytes or from streamed text;
//! - `escape` / `unescape` — JSON string escaping for streamed text, both ways;
//! - `read` — reading a value whole, checked against its header;
//! - `stream` — streaming a value out, checked on the way.

mod escape;
mod header;
mod read;
mod stream;
mod unescape;
mod write;

#[cfg(test)]
use header::read_header;
pub(crate) use header::read_header_of;
pub use header::{read_header_with_metadata, FileHeader, ParsedHeader, FORMAT_VERSION};
pub use read::{read_value, verified_sha256};
pub(crate) use read::{read_value_in, read_value_json_in};
pub(crate) use stream::copy_value_in;
#[cfg(test)]
use stream::{copy_json_value, copy_text_value};
pub use stream::{copy_value_of_file, write_value};
#[cfg(test)]
use write::write_text_streaming;
pub use write::{stage_text_streaming, write_file};

/// Chunk size for streaming copies.
const STREAM_CHUNK_BYTES: usize = 1 << 20;

#[cfg(test)]
mod tests;

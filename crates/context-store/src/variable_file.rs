//! One variable file opened by path, for readers that are handed files rather than
//! keys: a run's context slots (which may live in a parent run's data directory) and
//! the environments that load them.
//!
//! The header and the value are read from the one open file, so another process
//! renaming a new version over the path meanwhile can never pair one version's header
//! with the other's value. Everything read is checked as the store's own reads are:
//! the value against its recorded size and sha256, a `file` variable's reference
//! against the data directory's signature.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::disk::{self, ParsedHeader};
use crate::error::{Result, StoreError};
use crate::file_ref::FileRef;
use crate::nofollow;
use crate::reference::{VariableRef, VariableType};

/// A variable file, open, with its header read (not its value).
#[derive(Debug)]
pub struct VariableFile {
    path: PathBuf,
    file: File,
    parsed: ParsedHeader,
}

impl VariableFile {
    /// Opens the variable file at `path` (never through a symbolic link) and reads its
    /// header.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = nofollow::open_read(path, "open variable file")?;
        let parsed = disk::read_header_of(clone(&file, path)?, path)?;
        Ok(Self {
            path: path.to_owned(),
            file,
            parsed,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The reference its header records.
    pub fn reference(&self) -> &VariableRef {
        &self.parsed.header.reference
    }

    /// Where the value starts in the file, when it is in rlm's own layout (a file
    /// written by another program is parsed instead).
    pub(crate) fn value_offset(&self) -> Option<u64> {
        self.parsed.value_offset
    }

    /// The file a `file` variable refers to (its signature checked against the key of
    /// the data directory the variable file is in: `<data-dir>/variables/<file>.json`),
    /// or `None` for any other variable. Whether the referenced file is unchanged is
    /// checked by whoever reads it ([`FileRef::check`], [`FileRef::copy_to`]).
    pub fn file_reference(&mut self) -> Result<Option<FileRef>> {
        let recorded = &self.parsed.header.reference;
        if recorded.var_type != VariableType::File {
            return Ok(None);
        }
        let value = disk::read_value_in(
            clone(&self.file, &self.path)?,
            &self.path,
            self.parsed.value_offset,
            recorded,
        )?;
        let file = crate::file_ref_checks::decode(&recorded.key, &value)?;
        let data_dir = self
            .path
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."));
        crate::file_ref_checks::verify(&file, &recorded.key, &self.path, data_dir)?;
        Ok(Some(file))
    }

    /// The value as compact JSON text (for a `file` variable: the reference, not the
    /// file), checked against the recorded size and sha256 before it is returned. The
    /// bytes on disk are returned as they are when they are the recorded ones, so a
    /// parser sees the value once (the JS environment hands them to `JSON.parse`).
    pub fn value_json(&mut self) -> Result<Vec<u8>> {
        disk::read_value_json_in(
            clone(&self.file, &self.path)?,
            &self.path,
            self.parsed.value_offset,
            &self.parsed.header.reference,
        )
    }

    /// Writes the variable's *text* to `out` (see [`crate::TextReader`]): a text value
    /// raw, any other value as pretty JSON, and for a `file` variable the contents of
    /// the file it refers to, checked against the reference
    /// ([`StoreError::FileChanged`] when it changed). Streamed: memory stays bounded.
    pub(crate) fn write_text_to(&mut self, out: &mut dyn Write) -> Result<()> {
        if let Some(file) = self.file_reference()? {
            let key = self.parsed.header.reference.key.clone();
            return file
                .copy_to(out)
                .map(drop)
                .map_err(|e| crate::file_ref_checks::file_copy_error(&key, &file, &self.path, e));
        }
        disk::copy_value_in(
            clone(&self.file, &self.path)?,
            &self.path,
            &self.parsed,
            out,
            true,
        )
    }
}

/// A second handle on `file` (sharing its offset: every read seeks first).
fn clone(file: &File, path: &Path) -> Result<File> {
    file.try_clone()
        .map_err(|e| StoreError::io("open variable file", path, e))
}

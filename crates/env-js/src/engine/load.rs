//! A context slot's values as the JSON text QuickJS parses: the store reads each
//! variable file (checked against its recorded size and sha256) and hands back the
//! value's JSON as it is on disk, so `JSON.parse` in the engine sees it once.
//!
//! A `file` variable's value is the text of the file it refers to (checked unchanged),
//! as a JSON string; one that `--lazy-context` would read lazily is refused, naming
//! `--env python`, which can.

use std::path::Path;

use rlm_context_store::{FileRef, VariableFile};

use super::error::EngineError;

/// The value of the variable file at `path`, as JSON text.
pub(super) fn read_value(path: &Path, lazy_above: Option<u64>) -> Result<Vec<u8>, EngineError> {
    let mut file = VariableFile::open(path).map_err(|error| EngineError::NotAVariableFile {
        path: path.to_owned(),
        error,
    })?;
    match file.file_reference()? {
        Some(referenced) => read_referenced(&referenced, lazy_above),
        None => Ok(file.value_json()?),
    }
}

/// The text of a referenced file as a JSON string.
fn read_referenced(file: &FileRef, lazy_above: Option<u64>) -> Result<Vec<u8>, EngineError> {
    if lazy_above.is_some_and(|above| file.size > above) {
        return Err(EngineError::WouldBeLazy {
            path: file.path.clone(),
            size: file.size,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(file.size).unwrap_or(0));
    file.copy_to(&mut bytes)
        .map_err(|error| EngineError::Referenced {
            path: file.path.clone(),
            error,
        })?;
    let text = String::from_utf8(bytes).map_err(|e| EngineError::NotUtf8 {
        path: file.path.clone(),
        offset: e.utf8_error().valid_up_to(),
    })?;
    serde_json::to_vec(&text).map_err(EngineError::EncodeContext)
}

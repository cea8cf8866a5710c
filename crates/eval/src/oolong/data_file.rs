//! A `--data` path told apart by its content: a TREC question-classification file for
//! `oolong/trec_coarse`, released OOLONG records for `oolong/released`.

use std::io::{BufRead, BufReader};
use std::path::Path;

use super::{Released, TrecSet};
use crate::data::DataId;
use crate::error::EvalError;

/// A `--data` path, read.
#[derive(Debug, Clone)]
pub enum DataFile {
    /// A TREC file (`COARSE:fine question` lines).
    Trec(TrecSet),
    /// Released OOLONG records (JSON lines, or a directory of `.jsonl` files).
    Released(Released),
}

impl DataFile {
    /// Reads `path`: a directory or a file whose first non-blank character is `{` is
    /// read as released OOLONG records, any other file as a TREC file.
    pub fn load(path: &Path) -> Result<Self, EvalError> {
        let read = |source| EvalError::DataRead {
            path: path.to_owned(),
            source,
        };
        let metadata = std::fs::metadata(path).map_err(read)?;
        if metadata.is_dir() {
            return Released::load(path).map(Self::Released);
        }
        let mut reader = BufReader::new(std::fs::File::open(path).map_err(read)?);
        let first = loop {
            let buffer = reader.fill_buf().map_err(read)?;
            if buffer.is_empty() {
                break None;
            }
            match buffer.iter().position(|b| !b.is_ascii_whitespace()) {
                Some(at) => break Some(buffer[at]),
                None => {
                    let n = buffer.len();
                    reader.consume(n);
                }
            }
        };
        if first == Some(b'{') {
            return Released::load(path).map(Self::Released);
        }
        let bytes = std::fs::read(path).map_err(read)?;
        TrecSet::parse(path, &bytes).map(Self::Trec)
    }

    /// What identifies it.
    pub fn id(&self) -> &DataId {
        match self {
            Self::Trec(set) => set.id(),
            Self::Released(set) => set.id(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_told_apart_by_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let trec = dir.path().join("train_5500.label");
        std::fs::write(&trec, "HUM:ind Who killed Gandhi ?\n").unwrap();
        assert!(matches!(DataFile::load(&trec).unwrap(), DataFile::Trec(_)));
        let records = dir.path().join("synth.jsonl");
        std::fs::write(
            &records,
            "\n{\"context_len\": 1024, \"context_window_text\": \"t\", \"question\": \"q\", \"answer\": \"[1]\", \"answer_type\": \"ANSWER_TYPE.NUMERIC\"}\n",
        )
        .unwrap();
        let loaded = DataFile::load(&records).unwrap();
        assert!(matches!(loaded, DataFile::Released(_)));
        assert_eq!(loaded.id().digest.len(), 64);
        let missing = DataFile::load(&dir.path().join("none"))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("none"), "{missing}");
    }
}

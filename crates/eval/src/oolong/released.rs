//! The released OOLONG-synth files (`oolongbench/oolong-synth` on Hugging Face, one
//! record a line as JSON once exported): each record is one question over one context
//! window, read as published — `context_window_text`, `question`, `answer` (a Python
//! list literal such as `['entity']`, `[7]` or `[datetime.date(2023, 5, 7)]`),
//! `answer_type`, `context_len` (tokens) — and scored as OOLONG scores it.
//!
//! Files can be large (a window's text is repeated in each of its records): they are
//! scanned once, keeping where each record starts, and a record is read again when its
//! item is made.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::data::DataId;
use crate::error::EvalError;
use crate::framing::{Framing, Posed, OOLONG_PREAMBLE};
use crate::score::oolong::AnswerKind;
use crate::score::Expected;

/// A released record, the fields `eval` reads (the others are left alone).
#[derive(Debug, Deserialize)]
struct Record {
    context_len: u64,
    context_window_text: String,
    question: String,
    answer: serde_json::Value,
    answer_type: String,
}

/// Where one record is.
#[derive(Debug, Clone)]
struct Entry {
    file: usize,
    offset: u64,
    context_len: u64,
}

/// Released OOLONG files, scanned.
#[derive(Debug, Clone)]
pub struct Released {
    id: DataId,
    files: Vec<PathBuf>,
    entries: Vec<Entry>,
}

impl Released {
    /// Scans `path`: a `.jsonl` file, or a directory whose `.jsonl` files are read in
    /// name order. Every record must read (its answer and answer type included).
    pub fn load(path: &Path) -> Result<Self, EvalError> {
        let read = |source| EvalError::DataRead {
            path: path.to_owned(),
            source,
        };
        let files: Vec<PathBuf> = if path.is_dir() {
            let mut names: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(read)?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "jsonl"))
                .collect();
            names.sort();
            names
        } else {
            vec![path.to_owned()]
        };
        if files.is_empty() {
            return Err(EvalError::Data {
                path: path.to_owned(),
                line: 0,
                reason: "holds no .jsonl file of OOLONG records".to_owned(),
            });
        }
        let mut hasher = Sha256::new();
        let mut entries = Vec::new();
        for (f, file) in files.iter().enumerate() {
            let open = std::fs::File::open(file).map_err(|source| EvalError::DataRead {
                path: file.clone(),
                source,
            })?;
            let size = open.metadata().map(|m| m.len()).unwrap_or(0);
            if files.len() > 1 {
                let name = file
                    .file_name()
                    .map(|n| n.as_encoded_bytes().to_vec())
                    .unwrap_or_default();
                hasher.update(&name);
                hasher.update([0]);
                hasher.update(size.to_string().as_bytes());
                hasher.update([0]);
            }
            let mut reader = BufReader::new(open);
            let (mut offset, mut number) = (0_u64, 0_usize);
            let mut line = Vec::new();
            loop {
                line.clear();
                let n =
                    reader
                        .read_until(b'\n', &mut line)
                        .map_err(|source| EvalError::DataRead {
                            path: file.clone(),
                            source,
                        })?;
                if n == 0 {
                    break;
                }
                hasher.update(&line);
                number += 1;
                if !line.iter().all(u8::is_ascii_whitespace) {
                    let record = parse(file, number, &line)?;
                    entries.push(Entry {
                        file: f,
                        offset,
                        context_len: record.0,
                    });
                }
                offset += n as u64;
            }
        }
        let digest = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(Self {
            id: DataId {
                path: path.to_owned(),
                digest,
            },
            files,
            entries,
        })
    }

    /// What identifies the files: the path given and their digest.
    pub fn id(&self) -> &DataId {
        &self.id
    }

    /// How many records each `context_len` has.
    pub fn lengths(&self) -> BTreeMap<u64, usize> {
        let mut out = BTreeMap::new();
        for entry in &self.entries {
            *out.entry(entry.context_len).or_default() += 1;
        }
        out
    }

    /// Item `index` of context length `length`: the `index`-th record (in file order)
    /// whose `context_len` is `length`; its context and the rest of the item.
    pub(crate) fn item(&self, length: u64, index: u32) -> Result<(String, Posed), EvalError> {
        let have = self.lengths().get(&length).copied().unwrap_or(0);
        let entry = self
            .entries
            .iter()
            .filter(|e| e.context_len == length)
            .nth(index as usize)
            .ok_or_else(|| EvalError::ReleasedShort {
                path: self.id.path.clone(),
                length,
                have,
                lengths: self.describe_lengths(),
            })?;
        let file = &self.files[entry.file];
        let io = |source| EvalError::DataRead {
            path: file.clone(),
            source,
        };
        let mut open = std::fs::File::open(file).map_err(io)?;
        open.seek(SeekFrom::Start(entry.offset)).map_err(io)?;
        let mut line = Vec::new();
        BufReader::new(open)
            .read_until(b'\n', &mut line)
            .map_err(io)?;
        let (_, record, gold, kind) = parse(file, 0, &line)?;
        Ok((
            record.context_window_text,
            Posed {
                question: record.question,
                expected: Expected::Oolong { answer: gold, kind },
                framing: Framing::SystemContext {
                    preamble: OOLONG_PREAMBLE.to_owned(),
                },
            },
        ))
    }

    /// `context_len N (M records), …` for messages.
    pub fn describe_lengths(&self) -> String {
        self.lengths()
            .iter()
            .map(|(len, n)| format!("context_len {len} ({n} records)"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One line read as a record: its length, the record, its gold answer and kind.
fn parse(
    file: &Path,
    line: usize,
    bytes: &[u8],
) -> Result<(u64, Record, String, AnswerKind), EvalError> {
    let bad = |reason: String| EvalError::Data {
        path: file.to_owned(),
        line,
        reason,
    };
    let record: Record = serde_json::from_slice(bytes).map_err(|e| {
        bad(format!("not an OOLONG record (context_window_text, question, answer, answer_type, context_len): {e}"))
    })?;
    let kind = AnswerKind::from_answer_type(&record.answer_type)
        .ok_or_else(|| bad(format!("unknown answer_type `{}`", record.answer_type)))?;
    let gold = first_answer(&record.answer)
        .ok_or_else(|| bad(format!("cannot read the answer {}", record.answer)))?;
    let gold = match kind {
        AnswerKind::Date => crate::score::oolong::read_date(&gold)
            .map_or(gold, |d| d.format("%Y-%m-%d").to_string()),
        _ => gold,
    };
    Ok((record.context_len, record, gold, kind))
}

/// The first element of a released answer: a Python list literal in a string, or a
/// JSON list.
fn first_answer(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(text) => python_first(text),
        serde_json::Value::Array(items) => match items.first()? {
            serde_json::Value::String(text) => Some(text.clone()),
            other => Some(other.to_string()),
        },
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The first element of a Python list literal: a quoted string, a number, or
/// `datetime.date(Y, M, D)` (as `YYYY-MM-DD`).
fn python_first(text: &str) -> Option<String> {
    let text = text.trim();
    let inner = text.strip_prefix('[').unwrap_or(text);
    let inner = inner.strip_suffix(']').unwrap_or(inner).trim();
    if let Some(args) = inner.strip_prefix("datetime.date(") {
        let numbers: Vec<u32> = args
            .split(')')
            .next()?
            .split(',')
            .map(|n| n.trim().parse().ok())
            .collect::<Option<_>>()?;
        let [year, month, day] = numbers[..] else {
            return None;
        };
        let day = chrono::NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, month, day)?;
        return Some(day.format("%Y-%m-%d").to_string());
    }
    let mut chars = inner.chars();
    match chars.next()? {
        quote @ ('\'' | '"') => {
            let mut out = String::new();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => out.push(chars.next()?),
                    c if c == quote => return Some(out),
                    c => out.push(c),
                }
            }
            None
        }
        _ => Some(inner.split(',').next()?.trim().to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_answers_read_as_python_lists() {
        assert_eq!(python_first("['entity']").as_deref(), Some("entity"));
        assert_eq!(python_first("[\"it's\"]").as_deref(), Some("it's"));
        assert_eq!(python_first("['a', 'b']").as_deref(), Some("a"));
        assert_eq!(python_first("[12]").as_deref(), Some("12"));
        assert_eq!(
            python_first("[datetime.date(2023, 5, 7)]").as_deref(),
            Some("2023-05-07")
        );
        assert_eq!(python_first("['unclosed"), None);
        assert_eq!(first_answer(&serde_json::json!([3])).as_deref(), Some("3"));
        assert_eq!(
            first_answer(&serde_json::json!(["x"])).as_deref(),
            Some("x")
        );
    }

    #[test]
    fn a_released_file_is_scanned_and_read_by_length_and_index() {
        let dir = tempfile::tempdir().unwrap();
        let record = |len: u64, q: &str, answer: &str, kind: &str| {
            serde_json::json!({
                "id": 1, "context_window_id": 2, "dataset": "trec_coarse",
                "context_len": len, "context_window_text": format!("text of {q}"),
                "context_window_text_with_labels": "hidden", "question": q,
                "answer": answer, "answer_type": kind, "task_group": "counting",
                "task": "TASK_TYPE.MOST_FREQ", "input_subset": "False", "num_labels": 6,
            })
            .to_string()
        };
        let lines = [
            record(1024, "q1", "['entity']", "ANSWER_TYPE.LABEL"),
            record(2048, "q2", "[5]", "ANSWER_TYPE.NUMERIC"),
            String::new(),
            record(
                1024,
                "q3",
                "[datetime.date(2024, 1, 2)]",
                "ANSWER_TYPE.DATE",
            ),
        ];
        let path = dir.path().join("oolong-synth.jsonl");
        std::fs::write(&path, lines.join("\n")).unwrap();
        let released = Released::load(&path).unwrap();
        assert_eq!(released.lengths(), BTreeMap::from([(1024, 2), (2048, 1)]));
        let (context, posed) = released.item(1024, 1).unwrap();
        assert_eq!(context, "text of q3");
        assert_eq!(posed.question, "q3");
        assert_eq!(
            posed.expected,
            Expected::Oolong {
                answer: "2024-01-02".into(),
                kind: AnswerKind::Date
            }
        );
        let short = released.item(2048, 1).unwrap_err().to_string();
        assert!(short.contains("context_len 1024 (2 records)"), "{short}");
        // The same records through a directory.
        let via_dir = Released::load(dir.path()).unwrap();
        assert_eq!(via_dir.item(2048, 0).unwrap().1.question, "q2");
        // A record of another shape is refused with its line.
        std::fs::write(&path, "{\"question\": \"q\"}\n").unwrap();
        let error = Released::load(&path).unwrap_err().to_string();
        assert!(
            error.contains("line 1") && error.contains("not an OOLONG record"),
            "{error}"
        );
    }
}

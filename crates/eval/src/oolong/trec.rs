//! The TREC question-classification set (Li & Roth, 2002) that OOLONG's `trec_coarse`
//! is built from: lines `COARSE:fine question` (`train_5500.label`: 5 452 lines,
//! ISO-8859-1), read here into the questions of each coarse label, named as OOLONG
//! names them.

use std::path::Path;

use crate::data::DataId;
use crate::error::EvalError;

/// The six coarse labels: TREC's code and OOLONG's name (`TREC_Coarse.label_map`, in
/// its order).
pub const LABELS: [(&str, &str); 6] = [
    ("ABBR", "abbreviation"),
    ("ENTY", "entity"),
    ("DESC", "description and abstract concept"),
    ("HUM", "human being"),
    ("LOC", "location"),
    ("NUM", "numeric value"),
];

/// A TREC file, read: its questions per coarse label.
#[derive(Debug, Clone)]
pub struct TrecSet {
    id: DataId,
    /// The questions of each label of [`LABELS`], in file order.
    questions: [Vec<String>; 6],
}

impl TrecSet {
    /// Reads `bytes` (the file at `path`): one `COARSE:fine question` a line
    /// (ISO-8859-1; made ASCII); blank lines are skipped.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Self, EvalError> {
        let mut questions: [Vec<String>; 6] = Default::default();
        // ISO-8859-1: each byte is the code point of its value.
        let text: String = bytes.iter().map(|&b| char::from(b)).collect();
        let mut ascii = String::with_capacity(text.len());
        crate::haystack::to_ascii(&text, &mut ascii);
        for (n, line) in ascii.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let bad = |reason: String| EvalError::Data {
                path: path.to_owned(),
                line: n + 1,
                reason,
            };
            let (coarse, rest) = line
                .split_once(':')
                .ok_or_else(|| bad(format!("`{line}` is not `COARSE:fine question`")))?;
            let label = LABELS
                .iter()
                .position(|(code, _)| *code == coarse)
                .ok_or_else(|| {
                    bad(format!(
                        "`{coarse}` is not a TREC coarse label (ABBR, DESC, ENTY, HUM, LOC, NUM)"
                    ))
                })?;
            let question = rest
                .split_once(' ')
                .map(|(_fine, q)| q.trim())
                .filter(|q| !q.is_empty())
                .ok_or_else(|| bad(format!("`{line}` has no question after its labels")))?;
            questions[label].push(question.to_owned());
        }
        if questions.iter().all(Vec::is_empty) {
            return Err(EvalError::Data {
                path: path.to_owned(),
                line: 0,
                reason: "holds no question".to_owned(),
            });
        }
        Ok(Self {
            id: DataId::of(path, bytes),
            questions,
        })
    }

    /// What identifies the file: its path and digest.
    pub fn id(&self) -> &DataId {
        &self.id
    }

    /// The questions of label `label` (an index of [`LABELS`]).
    pub fn questions(&self, label: usize) -> &[String] {
        self.questions.get(label).map_or(&[], Vec::as_slice)
    }

    /// The mean length of a question, in characters.
    pub fn mean_question_chars(&self) -> f64 {
        let (count, chars) = self
            .questions
            .iter()
            .flatten()
            .fold((0_usize, 0_usize), |(n, c), q| (n + 1, c + q.len()));
        chars as f64 / count.max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_by_coarse_label_and_bad_ones_named() {
        let file = b"DESC:manner How did serfdom develop in and then leave Russia ?\n\nHUM:ind Who killed Gandhi ?\nLOC:city What is the capital of Caf\xe9 land ?\n";
        let set = TrecSet::parse(Path::new("t.label"), file).unwrap();
        assert_eq!(
            set.questions(2),
            ["How did serfdom develop in and then leave Russia ?"]
        );
        assert_eq!(set.questions(3), ["Who killed Gandhi ?"]);
        assert_eq!(set.questions(4), ["What is the capital of Cafe land ?"]);
        assert!(set.questions(0).is_empty());
        assert_eq!(set.id().digest.len(), 64);
        for (bad, says) in [
            (&b"HUM Who ?\n"[..], "line 1"),
            (
                b"HUM:ind Who ?\nXYZ:a b ?\n",
                "`XYZ` is not a TREC coarse label",
            ),
            (b"NUM:date\n", "has no question"),
            (b"\n\n", "holds no question"),
        ] {
            let error = TrecSet::parse(Path::new("t.label"), bad)
                .unwrap_err()
                .to_string();
            assert!(error.contains(says) && error.contains("t.label"), "{error}");
        }
    }
}

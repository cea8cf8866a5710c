//! The variables the step-by-step combinators leave in the store (`ctx_split`,
//! `ctx_filter`, `ctx_map`, `ctx_reduce`; docs/plans.md): a set of pieces is byte
//! ranges of one text file — the store's content-addressed text view of the input, or
//! the referenced file itself — never the text again, so cutting a 10 GB file costs a
//! list of offsets; a set of results is each mapped piece's answer.
//!
//! ```json
//! {"pieces_of": "context", "file": "/…/.rlm-data/views/3f…a1.txt", "split": {"by": "lines", "size": 100},
//!  "pieces": [{"index": 0, "start": 0, "end": 5120, "chars": 5120}, …]}
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::PlanError;
use crate::spec::Split;
use crate::split::Piece;

/// One piece of a set: where it lies in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PieceRef {
    /// Its place among the pieces the split cut (kept when a filter drops others).
    pub index: usize,
    /// First byte.
    pub start: u64,
    /// Byte after the last one.
    pub end: u64,
    /// Characters.
    pub chars: u64,
}

impl PieceRef {
    /// The piece as the splitter cut it.
    pub fn piece(&self) -> Piece {
        Piece {
            start: self.start,
            end: self.end,
            chars: self.chars,
        }
    }
}

/// A pieces variable: the pieces of one input, by reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PieceSet {
    /// The variable the pieces were cut from.
    pub pieces_of: String,
    /// The file the byte ranges point into.
    pub file: String,
    /// Its size when it was cut: a file of another size has changed, and its pieces
    /// no longer fit it.
    pub file_bytes: u64,
    /// How it was cut.
    pub split: Split,
    /// The filters applied since, in order (regex or yes/no question).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filtered: Vec<Value>,
    /// The pieces, in order.
    pub pieces: Vec<PieceRef>,
}

impl PieceSet {
    /// Reads a pieces variable's value; `key` names it in the error.
    pub fn from_value(key: &str, value: &Value) -> Result<Self, PlanError> {
        serde_json::from_value(value.clone()).map_err(|_| {
            PlanError::WrongInput(format!(
                "`{key}` is not a set of pieces: give the variable ctx_split or ctx_filter returned"
            ))
        })
    }
}

/// One mapped piece's result, as a results variable lists them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PieceResult {
    /// The piece's place among the pieces the split cut.
    pub index: usize,
    /// Its first byte.
    pub start: u64,
    /// The byte after its last one.
    pub end: u64,
    /// Its characters.
    pub chars: u64,
    /// What it became.
    pub result: String,
}

/// The texts to reduce from a results variable, or any JSON list: an item's `result`
/// when it has one (a `ctx_map` or `map_reduce` results variable), a string as is,
/// anything else as JSON.
pub fn texts_to_reduce(key: &str, value: &Value) -> Result<Vec<String>, PlanError> {
    let Value::Array(items) = value else {
        return Err(PlanError::WrongInput(format!(
            "`{key}` is not a list of results: give the variable ctx_map returned (or any JSON list)"
        )));
    };
    Ok(items
        .iter()
        .map(|item| match item.get("result").unwrap_or(item) {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::SplitBy;
    use serde_json::json;

    #[test]
    fn a_piece_set_round_trips_and_other_values_are_refused_by_name() {
        let set = PieceSet {
            pieces_of: "context".into(),
            file: "/tmp/view.txt".into(),
            file_bytes: 20,
            split: Split {
                by: SplitBy::Lines,
                size: Some(10),
                overlap: 0,
                pattern: None,
            },
            filtered: vec![json!({"regex": "x"})],
            pieces: vec![PieceRef {
                index: 3,
                start: 10,
                end: 20,
                chars: 10,
            }],
        };
        let value = serde_json::to_value(&set).unwrap();
        assert_eq!(PieceSet::from_value("p", &value).unwrap(), set);
        let error = PieceSet::from_value("notes", &json!("text")).unwrap_err();
        assert!(error.to_string().contains("`notes` is not a set of pieces"));
    }

    #[test]
    fn results_lists_and_plain_lists_reduce_alike() {
        let results =
            json!([{"index": 0, "start": 0, "end": 1, "chars": 1, "result": "3"}, {"result": 4}]);
        assert_eq!(texts_to_reduce("r", &results).unwrap(), ["3", "4"]);
        assert_eq!(
            texts_to_reduce("r", &json!(["a", 2, null])).unwrap(),
            ["a", "2", "null"]
        );
        assert!(texts_to_reduce("r", &json!({"a": 1})).is_err());
    }
}

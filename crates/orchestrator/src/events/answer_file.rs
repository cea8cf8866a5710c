//! Large answers are kept once, beside the trace, not in every event that mentions them.
//!
//! A run's answer appears in its `final` and `run_finished` events and in
//! `summary.json`; a 50 MB `FINAL_VAR` made a 100 MB `events.jsonl`. An answer longer
//! than [`ANSWER_INLINE_BYTES`] is written once to `answer.txt` in the run directory,
//! and the trace carries its first [`ANSWER_INLINE_BYTES`] followed by a note naming the
//! file. `runs show` (and everything built on `trace`) reads the whole answer from the
//! file when it is there.

use std::fs;
use std::path::Path;

/// The file holding a run's whole answer when it is too long to trace inline.
pub const ANSWER_FILE: &str = "answer.txt";

/// The longest answer kept inline in the trace, in bytes.
pub const ANSWER_INLINE_BYTES: usize = 64 * 1024;

/// The answer as the trace keeps it: itself when short; else its start and a note,
/// after writing it whole to `dir/answer.txt` (once: an existing file of the same
/// length is kept).
pub(crate) fn traced_answer(dir: &Path, answer: &str) -> String {
    if answer.len() <= ANSWER_INLINE_BYTES {
        return answer.to_owned();
    }
    let path = dir.join(ANSWER_FILE);
    let kept = fs::metadata(&path).is_ok_and(|meta| meta.len() == answer.len() as u64);
    let stored = kept || super::summary::write_private_atomically(&path, answer.as_bytes()).is_ok();
    let mut cut = ANSWER_INLINE_BYTES;
    while !answer.is_char_boundary(cut) {
        cut -= 1;
    }
    let whole = if stored {
        format!("the whole answer is in {}", path.display())
    } else {
        "the whole answer could not be written beside the trace".to_owned()
    };
    format!(
        "{}\n… [clipped: {} of {} bytes shown; {whole}]",
        &answer[..cut],
        cut,
        answer.len()
    )
}

/// The whole answer of the run in `dir`, when it was stored by reference.
pub fn stored_answer(dir: &Path) -> Option<String> {
    fs::read_to_string(dir.join(ANSWER_FILE)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_answer_stays_inline_and_a_long_one_goes_to_a_file_once() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(traced_answer(dir.path(), "42"), "42");
        assert!(stored_answer(dir.path()).is_none());
        let long = "é".repeat(ANSWER_INLINE_BYTES);
        let traced = traced_answer(dir.path(), &long);
        assert!(traced.len() < ANSWER_INLINE_BYTES + 200, "{}", traced.len());
        assert!(
            traced.contains("[clipped: 65536 of 131072 bytes shown"),
            "{traced}"
        );
        assert_eq!(stored_answer(dir.path()).as_deref(), Some(long.as_str()));
        assert_eq!(traced_answer(dir.path(), &long), traced);
    }
}

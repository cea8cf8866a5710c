//! What a run's blocks have done so far: each block's runs and last output, what was
//! refused or questioned, and what the code printed — what the checks of a turn read.

use std::collections::{HashMap, HashSet};

use crate::rlm::{pairing, prose_answer, selection, unprinted_answer};

/// What a run's blocks have done so far.
#[derive(Debug, Default)]
pub(in crate::rlm) struct RanBefore {
    /// Trimmed code → times run, last shaped output: the same code a third time is not
    /// run again ([`super::REPEAT_LIMIT`]).
    pub(super) blocks: HashMap<String, (u32, String)>,
    /// The shaped output of the block that ran last: what a reply in prose after it
    /// may be stating as the answer ([`prose_answer`]).
    pub(super) last_output: Option<String>,
    /// What the model was told cannot answer — the trimmed code of a block refused as
    /// only a value or a sentence, the trimmed text of prose stating what no output
    /// ended in: the same one sent again has the task's call run in its place
    /// ([`super::run_in_place`]).
    pub(super) refused_values: HashSet<String>,
    /// The one value the last block that ran without an error and printed anything
    /// ended its output with (`None` when that output ended in no single value): what
    /// a `FINAL` of a value no output showed is questioned with ([`unprinted_answer`]).
    pub(super) last_printed: Option<String>,
    /// The trimmed code of the last block that ran without an error and printed
    /// anything: what an answer of [`Self::last_printed`] was computed by.
    pub(super) last_printer: Option<String>,
    /// The output of every block that ran without an error: what an answer may have
    /// been read from (a traceback naming a word does not show it as a value).
    pub(super) error_free_outputs: Vec<String>,
    /// The answers questioned so far, trimmed: the same one sent again is taken.
    pub(super) questioned: HashSet<String>,
}

impl RanBefore {
    /// Nothing ran yet.
    pub(in crate::rlm) fn new() -> Self {
        Self::default()
    }

    /// The block `key` (its trimmed code) ran once more and printed `shaped`, with an
    /// error or not.
    pub(super) fn record(&mut self, key: String, shaped: String, failed: bool) {
        if !failed && !shaped.trim().is_empty() {
            self.last_printed = prose_answer::printed_value(&shaped).map(str::to_owned);
            self.last_printer = Some(key.clone());
            self.error_free_outputs.push(shaped.clone());
        }
        self.last_output = Some(shaped.clone());
        let entry = self.blocks.entry(key).or_insert((0, String::new()));
        *entry = (entry.0 + 1, shaped);
    }

    /// The one value the block `code` ended its last output with, when it ran before
    /// ([`prose_answer::printed_value`]: a number or a word, not a "nothing" value).
    pub(in crate::rlm) fn printed_by(&self, code: &str) -> Option<&str> {
        let (_, output) = self.blocks.get(code.trim())?;
        prose_answer::printed_value(output)
    }

    /// The value the code printed last, when `answer` is another single value that no
    /// output of a block that ran without an error showed
    /// ([`unprinted_answer::other_printed`]).
    pub(super) fn printed_instead(&self, answer: &str) -> Option<&str> {
        let printed = self.last_printed.as_deref()?;
        let outputs = self.error_free_outputs.iter().map(String::as_str);
        unprinted_answer::other_printed(answer, printed, outputs)
    }

    /// The first of `values` (what the task selects its records by) that the code
    /// which printed `answer` last does not name ([`selection::unnamed`]); `None` when
    /// `answer` is not the value the code printed last, or the code names them all.
    pub(super) fn unselected_by_printer<'a>(
        &self,
        answer: &str,
        values: &'a [String],
    ) -> Option<&'a str> {
        if self.last_printed.as_deref() != Some(answer) {
            return None;
        }
        selection::unnamed(self.last_printer.as_deref()?, values)
    }

    /// True when `answer` is the value the code printed last and that code pairs
    /// nothing ([`pairing::pairs_nothing`]).
    pub(super) fn unpaired_by_printer(&self, answer: &str) -> bool {
        self.last_printed.as_deref() == Some(answer)
            && self
                .last_printer
                .as_deref()
                .is_some_and(pairing::pairs_nothing)
    }
}

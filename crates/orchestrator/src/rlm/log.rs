//! What a run's blocks and calls have done so far — each one's runs and last output —
//! which the corrections read (a repeat, an error copied back, a value stated in
//! prose) and the forced answer reads (a block sent again stands for what it printed).

use std::collections::HashMap;

use super::prose_answer;

/// What a run's blocks and calls have done so far.
#[derive(Debug, Default)]
pub(crate) struct BlockLog {
    /// Trimmed code (or rendered call) → times run, last output as shown.
    runs: HashMap<String, (u32, String)>,
    /// Every output shown, in order.
    outputs: Vec<String>,
}

impl BlockLog {
    /// Nothing ran yet.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// `code` ran once more and showed `output`.
    pub(crate) fn record(&mut self, code: &str, output: &str) {
        let entry = self
            .runs
            .entry(code.trim().to_owned())
            .or_insert((0, String::new()));
        *entry = (entry.0 + 1, output.to_owned());
        self.outputs.push(output.to_owned());
    }

    /// How many times `code` ran, and the output it showed last.
    pub(crate) fn runs_of(&self, code: &str) -> Option<(u32, &str)> {
        self.runs
            .get(code.trim())
            .map(|(times, output)| (*times, output.as_str()))
    }

    /// Every output shown so far, oldest first.
    pub(crate) fn outputs(&self) -> impl Iterator<Item = &str> {
        self.outputs.iter().map(String::as_str)
    }

    /// The output the last block or call showed.
    pub(crate) fn last_output(&self) -> Option<&str> {
        self.outputs.last().map(String::as_str)
    }

    /// The one value `code` ended its last output with, when it ran before.
    pub(crate) fn printed_by(&self, code: &str) -> Option<&str> {
        prose_answer::printed_value(self.runs_of(code)?.1)
    }
}

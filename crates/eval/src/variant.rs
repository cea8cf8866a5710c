//! What, besides suite, length, index and seed, makes an item: the haystack its text
//! comes from, the distractor needles, the form of a record suite's item and the data
//! file a public benchmark's suite is built from ([`Options`] to generate with, the
//! [`Variant`] items and results record).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::data::DataId;
use crate::haystack::{Haystack, HaystackId};
use crate::oolong::{Released, TrecSet};

/// What, besides suite, length, index and seed, shaped the items of a run: the
/// haystack their text came from and the distractor needles asked for. Recorded in
/// each item and result, so results of different variants are never mixed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Variant {
    /// The haystack (`--haystack`): path and digest; none for generated filler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub haystack: Option<HaystackId>,
    /// Distractor needles per `sniah` and `multi-needle` context (`--distractors`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub distractors: u32,
    /// How a record suite's item is put (`--variant`): the question's wording and the
    /// records' format.
    #[serde(default, skip_serializing_if = "Form::is_default")]
    pub form: Form,
    /// The data file the item was built from (`--data`: `oolong/*`); none for the
    /// other suites.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataId>,
}

/// How an item of a record suite (`aggregate`, `pairs`) is put to the model: the same
/// records, drawn from the same seed, and the same question, worded or formatted
/// another way. Other suites have only the default form.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Form {
    /// `key=value` log lines and the suite's own question.
    #[default]
    Default,
    /// The same records and question, worded as a user might word it.
    Reworded,
    /// The records as JSON lines (one object a line), the suite's own question.
    Json,
    /// The records as CSV with a header line, the suite's own question.
    Csv,
}

impl Form {
    /// Every form, in table order.
    pub const ALL: [Form; 4] = [Self::Default, Self::Reworded, Self::Json, Self::Csv];

    /// The form's name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Reworded => "reworded",
            Self::Json => "json",
            Self::Csv => "csv",
        }
    }

    /// Whether this is the default form (what runs before forms recorded).
    pub fn is_default(&self) -> bool {
        *self == Self::Default
    }
}

impl fmt::Display for Form {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Form {
    type Err = crate::EvalError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let wanted = text.trim().to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|form| form.name() == wanted)
            .ok_or_else(|| crate::EvalError::UnknownForm(text.to_owned()))
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Variant {
    /// Generated filler and no distractors (what runs before haystacks recorded).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Whether `other` makes the same items: the same haystack and data digests (their
    /// paths may differ), the same distractors and form.
    pub fn same_items_as(&self, other: &Variant) -> bool {
        self.haystack.as_ref().map(|h| &h.digest) == other.haystack.as_ref().map(|h| &h.digest)
            && self.distractors == other.distractors
            && self.form == other.form
            && self.data.as_ref().map(|d| &d.digest) == other.data.as_ref().map(|d| &d.digest)
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.haystack {
            Some(h) => write!(f, "haystack {} (sha256 {})", h.path.display(), h.digest)?,
            None => f.write_str("generated filler (no --haystack)")?,
        }
        write!(f, " and {} distractors", self.distractors)?;
        if !self.form.is_default() {
            write!(f, ", {} form", self.form)?;
        }
        if let Some(data) = &self.data {
            write!(f, ", data {} (sha256 {})", data.path.display(), data.digest)?;
        }
        Ok(())
    }
}

/// How contexts are made beyond suite, length, index and seed: the text the needles
/// hide in and the distractors.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    /// Real text to hide the needles in and to count words over (`word-count` needs
    /// it); none for generated filler.
    pub haystack: Option<&'a Haystack>,
    /// Distractor needles per `sniah` and `multi-needle` context: the same sentence
    /// with a key one word or one digit away from an asked key, and another number.
    pub distractors: u32,
    /// The form of record suites' items (`--variant`).
    pub form: Form,
    /// The TREC file of `oolong/trec_coarse` (`--data`).
    pub trec: Option<&'a TrecSet>,
    /// The released records of `oolong/released` (`--data`).
    pub released: Option<&'a Released>,
}

impl Options<'_> {
    /// The variant these options make for suites that read no data file (for the
    /// others, `Suite::variant`).
    pub fn variant(&self) -> Variant {
        Variant {
            haystack: self.haystack.map(|h| h.id().clone()),
            distractors: self.distractors,
            form: self.form,
            data: None,
        }
    }
}

//! What, besides suite, length, index and seed, makes an item: the haystack its text
//! comes from and the distractor needles ([`Options`] to generate with, the
//! [`Variant`] items and results record).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::haystack::{Haystack, HaystackId};

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
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Variant {
    /// Generated filler and no distractors (what runs before haystacks recorded).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Whether `other` makes the same items: the same haystack digest (its path may
    /// differ) and the same distractors.
    pub fn same_items_as(&self, other: &Variant) -> bool {
        self.haystack.as_ref().map(|h| &h.digest) == other.haystack.as_ref().map(|h| &h.digest)
            && self.distractors == other.distractors
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.haystack {
            Some(h) => write!(f, "haystack {} (sha256 {})", h.path.display(), h.digest)?,
            None => f.write_str("generated filler (no --haystack)")?,
        }
        write!(f, " and {} distractors", self.distractors)
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
}

impl Options<'_> {
    /// The variant these options make, as items record it.
    pub fn variant(&self) -> Variant {
        Variant {
            haystack: self.haystack.map(|h| h.id().clone()),
            distractors: self.distractors,
        }
    }
}

//! OOLONG (Bertsch et al., 2025, arXiv 2511.02817; abertsch72/oolong): aggregation
//! over thousands of classified instances whose labels are not in the context.
//!
//! Two suites: `oolong/trec_coarse` builds OOLONG-synth's `trec_coarse` windows from a
//! TREC question-classification file the user gives (`--data train_5500.label`), as
//! OOLONG's construction code does, and asks one of its questions per item;
//! `oolong/released` reads the released OOLONG-synth records (`--data FILE.jsonl` or a
//! directory) as published. Both are scored as OOLONG scores, and put to the baseline in
//! OOLONG's framing (a system message holding the window, the question as the user's).

mod data_file;
mod question;
mod released;
mod tasks;
mod trec;
mod window;

pub use crate::score::oolong::{attempt_parse, score, AnswerKind};
pub use data_file::DataFile;
pub use question::{Ask, Question, Scope};
pub use released::Released;
pub use tasks::Group;
pub use trec::{TrecSet, LABELS};
pub use window::{describe, line_date, Row, Window};

use crate::framing::{Framing, Posed, OOLONG_PREAMBLE};
use crate::rng::Rng;
use crate::score::Expected;

/// The OOLONG suites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Set {
    /// `trec_coarse` windows built from a TREC file.
    TrecCoarse,
    /// The released OOLONG-synth records.
    Released,
}

impl Set {
    /// Both, in table order.
    pub const ALL: [Set; 2] = [Self::TrecCoarse, Self::Released];

    /// The name after `oolong/`.
    pub fn name(self) -> &'static str {
        match self {
            Self::TrecCoarse => "trec_coarse",
            Self::Released => "released",
        }
    }

    /// The suite's name in `eval`.
    pub fn suite_name(self) -> &'static str {
        match self {
            Self::TrecCoarse => "oolong/trec_coarse",
            Self::Released => "oolong/released",
        }
    }

    /// The file it is built from, for messages.
    pub fn needs(self) -> &'static str {
        match self {
            Self::TrecCoarse => "a TREC question-classification file (`COARSE:fine question` lines, as train_5500.label)",
            Self::Released => "the released OOLONG-synth records (a .jsonl file or a directory of them)",
        }
    }
}

/// The group of item `index`: counting, user and timeline in turn.
pub fn group_of(index: u32) -> Group {
    [Group::Counting, Group::User, Group::Timeline][index as usize % 3]
}

/// A `trec_coarse` item of about `length` characters: a window of `trec`'s questions
/// and one question of the group of `index` (a kind drawn evenly, then a question of
/// that kind; counting when the group has none).
pub(crate) fn trec_coarse(
    trec: &TrecSet,
    rng: &mut Rng,
    length: u64,
    index: u32,
) -> (String, Posed) {
    let window = Window::build(trec, rng, length);
    let question = tasks::pick(group_of(index), &window, rng)
        .or_else(|| tasks::pick(Group::Counting, &window, rng))
        .unwrap_or(Question {
            scope: Scope::All,
            ask: Ask::LeastCommon(window.labels.iter().map(|l| (*l).to_owned()).collect()),
        });
    let answer = question.answer(&window.rows).unwrap_or_default();
    let context = window.text(rng);
    (
        context,
        Posed {
            question: question.text(),
            expected: Expected::Oolong {
                answer,
                kind: question.kind(),
            },
            framing: Framing::SystemContext {
                preamble: OOLONG_PREAMBLE.to_owned(),
            },
        },
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::suite::{generate_with, Options, Suite};

    /// A small TREC file written for the tests: twenty questions of each label, worded
    /// so that a wh-word rule classifies them right (`oracle`'s rule).
    pub(crate) fn trec_file() -> String {
        let subjects = [
            "the lighthouse",
            "Lima",
            "the river Nile",
            "a comet",
            "the old mill",
            "Oslo",
            "the harbour",
            "a violin",
            "the glacier",
            "Quito",
            "the orchard",
            "a sextant",
            "the canal",
            "Accra",
            "the bridge",
            "a telescope",
            "the market",
            "Riga",
            "the tunnel",
            "a compass",
        ];
        let mut file = String::new();
        for (i, s) in subjects.iter().enumerate() {
            let short = format!("XQ{i}");
            file.push_str(&format!("ABBR:exp What does {short} stand for in {s} ?\n"));
            file.push_str(&format!("ENTY:other What colour is {s} painted ?\n"));
            file.push_str(&format!("DESC:reason Why is {s} so famous ?\n"));
            file.push_str(&format!("HUM:ind Who built {s} ?\n"));
            file.push_str(&format!("LOC:other Where is {s} found ?\n"));
            file.push_str(&format!("NUM:count How many people visit {s} ?\n"));
        }
        file
    }

    /// [`trec_file`], read.
    pub(crate) fn trec() -> TrecSet {
        TrecSet::parse(std::path::Path::new("test.label"), trec_file().as_bytes())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Each test question's label.
    fn labels_of() -> BTreeMap<String, String> {
        trec_file()
            .lines()
            .map(|l| {
                let (code, rest) = l.split_once(':').unwrap();
                let name = LABELS.iter().find(|(c, _)| *c == code).unwrap().1;
                (rest.split_once(' ').unwrap().1.to_owned(), name.to_owned())
            })
            .collect()
    }

    /// The rows of a window's text, labelled from the test file.
    pub(crate) fn rows_of(context: &str) -> Vec<Row> {
        let labels = labels_of();
        context
            .lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("Date: ")?;
                let (date, rest) = rest.split_once(" || User: ")?;
                let (user, text) = rest.split_once(" || Instance: ")?;
                Some(Row {
                    day: chrono::NaiveDate::parse_from_str(date, "%b %d, %Y").ok()?,
                    user: user.parse().ok()?,
                    label: labels[text].clone(),
                })
            })
            .collect()
    }

    fn make(length: u64, index: u32, seed: u64) -> (crate::suite::Item, String) {
        let trec = trec();
        let options = Options {
            trec: Some(&trec),
            ..Options::default()
        };
        let mut text = Vec::new();
        let item = generate_with(
            Suite::Oolong(Set::TrecCoarse),
            length,
            index,
            6,
            seed,
            &options,
            &mut text,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        (item, String::from_utf8(text).unwrap_or_default())
    }

    #[test]
    fn trec_coarse_items_hide_the_labels_and_are_answered_by_their_rows() {
        for index in 0..9 {
            let (item, context) = make(30_000, index, 3);
            assert!(context.is_ascii());
            let len = context.len() as u64;
            assert!((27_000..=31_000).contains(&len), "{len}");
            assert!(!context.contains("|| Label"));
            assert!(context.starts_with("The following lines contain "));
            assert!(context
                .trim_end()
                .ends_with("Calculate the exact answer given these datapoints."));
            let rows = rows_of(&context);
            assert!(rows.len() > 300, "{}", rows.len());
            assert!(context.contains(&format!("lines contain {} general-knowledge", rows.len())));
            let question =
                Question::parse(&item.question).unwrap_or_else(|| panic!("{}", item.question));
            let Expected::Oolong { answer, kind } = &item.expected else {
                panic!("{:?}", item.expected)
            };
            assert_eq!(
                question.answer(&rows).as_ref(),
                Some(answer),
                "{}",
                item.question
            );
            assert_eq!(*kind, question.kind());
            assert!(matches!(item.framing, Some(Framing::SystemContext { .. })));
            assert_eq!(item.variant.data.as_ref().map(|d| d.digest.len()), Some(64));
        }
        // The label distribution is skewed: the labels' counts are far from even.
        let (_, context) = make(60_000, 0, 5);
        let rows = rows_of(&context);
        let counts = super::question::ranked(rows.iter().map(|r| r.label.clone()));
        let (top, last) = (counts[0].1, counts[counts.len() - 1].1);
        assert!(top > 2 * last && top * 6 > rows.len(), "{counts:?}");
    }

    /// Pinned: changing these changes the benchmark's items.
    #[test]
    fn the_same_seed_gives_the_same_window() {
        use sha2::{Digest, Sha256};
        let (a, text_a) = make(20_000, 1, 7);
        let (b, text_b) = make(20_000, 1, 7);
        assert_eq!((&a, &text_a), (&b, &text_b));
        assert_ne!(text_a, make(20_000, 1, 8).1);
        let digest: String = Sha256::digest(text_a.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            digest, "ffb1ba94339f6d18a100cde7a92bd4611a61c804056e8d2a97d3234c4d7e937d",
            "{}",
            a.question
        );
        let error = generate_with(
            Suite::Oolong(Set::TrecCoarse),
            4096,
            0,
            1,
            1,
            &Options::default(),
            &mut Vec::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("oolong/trec_coarse") && error.contains("--data"),
            "{error}"
        );
    }
}

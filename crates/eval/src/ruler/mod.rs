//! RULER's eleven synthetic tasks (NVIDIA/RULER, `scripts/synthetic.yaml`), generated
//! from the benchmark's published definitions: each task's configuration (haystack,
//! key and value types, numbers of keys, values and queries; variable tracking's chains
//! and hops; the word tasks' frequencies), its template and answer prefix
//! (`scripts/data/synthetic/constants.py`) and its metric
//! (`scripts/eval/synthetic/constants.py`).
//!
//! RULER sizes its inputs in tokens; `eval` sizes a context in characters, and where a
//! RULER generator reads a token count this crate reads [`CHARS_PER_TOKEN`] characters
//! per token (RULER's 4k tokens ≈ 14k characters). The context is the text RULER puts in
//! its template's `{context}`; the baseline is shown RULER's whole input (few-shot
//! example, template, answer prefix) around it, and the other arms the template's words
//! without the context as their question. Draws come from the crate's seeded [`Rng`], so
//! a seed gives the same bytes on every machine (not RULER's own bytes: its generators
//! use Python's and numpy's generators).

mod freq;
mod niah;
mod template;
mod vt;
mod words;

pub use crate::score::ruler::{string_match_all, string_match_part, Metric};
pub use template::split_input;

use crate::framing::Posed;
use crate::haystack::Haystack;
use crate::rng::Rng;
use crate::score::Expected;

/// Characters per token where RULER counts tokens (its lengths, its few-shot example's
/// 500 tokens, the vocabulary of `fwe`): 3.5, about what Llama and Qwen tokenizers give
/// on English prose.
pub const CHARS_PER_TOKEN: f64 = 3.5;

/// Characters standing for `tokens` tokens.
pub(crate) fn chars_of_tokens(tokens: u64) -> u64 {
    (tokens as f64 * CHARS_PER_TOKEN) as u64
}

/// Tokens that `chars` characters stand for.
pub(crate) fn tokens_of_chars(chars: u64) -> u64 {
    (chars as f64 / CHARS_PER_TOKEN) as u64
}

/// One of RULER's eleven synthetic tasks (its `synthetic.yaml` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Task {
    /// One needle (words → a number) in repeated noise sentences.
    NiahSingle1,
    /// One needle (words → a number) in essays.
    NiahSingle2,
    /// One needle (words → a UUID) in essays.
    NiahSingle3,
    /// Four needles in essays, one asked.
    NiahMultikey1,
    /// One asked needle among needle-shaped lines (words → numbers).
    NiahMultikey2,
    /// One asked needle among needle-shaped lines (UUIDs → UUIDs).
    NiahMultikey3,
    /// One key with four values in essays, all asked.
    NiahMultivalue,
    /// Four keys in essays, all asked.
    NiahMultiquery,
    /// Variable tracking: one chain of four hops in noise.
    Vt,
    /// Common words extraction: the ten words that appear most often.
    Cwe,
    /// Frequent words extraction: the three most frequent coded words (zeta law).
    Fwe,
}

impl Task {
    /// Every task, in RULER's order.
    pub const ALL: [Task; 11] = [
        Self::NiahSingle1,
        Self::NiahSingle2,
        Self::NiahSingle3,
        Self::NiahMultikey1,
        Self::NiahMultikey2,
        Self::NiahMultikey3,
        Self::NiahMultivalue,
        Self::NiahMultiquery,
        Self::Vt,
        Self::Cwe,
        Self::Fwe,
    ];

    /// RULER's name of the task (`niah_single_1`, …, `vt`, `cwe`, `fwe`).
    pub fn name(self) -> &'static str {
        match self {
            Self::NiahSingle1 => "niah_single_1",
            Self::NiahSingle2 => "niah_single_2",
            Self::NiahSingle3 => "niah_single_3",
            Self::NiahMultikey1 => "niah_multikey_1",
            Self::NiahMultikey2 => "niah_multikey_2",
            Self::NiahMultikey3 => "niah_multikey_3",
            Self::NiahMultivalue => "niah_multivalue",
            Self::NiahMultiquery => "niah_multiquery",
            Self::Vt => "vt",
            Self::Cwe => "cwe",
            Self::Fwe => "fwe",
        }
    }

    /// The suite's name in `eval`: `ruler/` and the task's.
    pub fn suite_name(self) -> &'static str {
        match self {
            Self::NiahSingle1 => "ruler/niah_single_1",
            Self::NiahSingle2 => "ruler/niah_single_2",
            Self::NiahSingle3 => "ruler/niah_single_3",
            Self::NiahMultikey1 => "ruler/niah_multikey_1",
            Self::NiahMultikey2 => "ruler/niah_multikey_2",
            Self::NiahMultikey3 => "ruler/niah_multikey_3",
            Self::NiahMultivalue => "ruler/niah_multivalue",
            Self::NiahMultiquery => "ruler/niah_multiquery",
            Self::Vt => "ruler/vt",
            Self::Cwe => "ruler/cwe",
            Self::Fwe => "ruler/fwe",
        }
    }

    /// The task's configuration, as `synthetic.yaml` gives it.
    pub fn config(self) -> Config {
        use niah::{Haystack::*, Kind::*};
        let niah = |haystack, key, value, keys, values, queries| {
            Config::Niah(niah::Config {
                haystack,
                key,
                value,
                keys,
                values,
                queries,
            })
        };
        match self {
            Self::NiahSingle1 => niah(Noise, Words, Numbers, 1, 1, 1),
            Self::NiahSingle2 => niah(Essay, Words, Numbers, 1, 1, 1),
            Self::NiahSingle3 => niah(Essay, Words, Uuids, 1, 1, 1),
            Self::NiahMultikey1 => niah(Essay, Words, Numbers, 4, 1, 1),
            Self::NiahMultikey2 => niah(Needle, Words, Numbers, 1, 1, 1),
            Self::NiahMultikey3 => niah(Needle, Uuids, Uuids, 1, 1, 1),
            Self::NiahMultivalue => niah(Essay, Words, Numbers, 1, 4, 1),
            Self::NiahMultiquery => niah(Essay, Words, Numbers, 1, 1, 4),
            Self::Vt => Config::Vt { chains: 1, hops: 4 },
            Self::Cwe => Config::Cwe {
                freq_cw: 30,
                freq_ucw: 3,
                num_cw: 10,
            },
            Self::Fwe => Config::Fwe { alpha: 2.0 },
        }
    }

    /// Whether its haystack is RULER's essays (a `--haystack` is needed).
    pub fn needs_essay(self) -> bool {
        matches!(self.config(), Config::Niah(c) if c.haystack == niah::Haystack::Essay)
    }

    /// The metric RULER scores the task by: `string_match_all` for every synthetic
    /// task (`string_match_part` is its QA tasks' metric).
    pub fn metric(self) -> Metric {
        Metric::All
    }
}

/// A task's configuration (`synthetic.yaml`'s `args`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Config {
    /// Needle in a haystack.
    Niah(niah::Config),
    /// Variable tracking.
    Vt {
        /// Chains of assignments.
        chains: usize,
        /// Assignments after the first of each chain.
        hops: usize,
    },
    /// Common words extraction.
    Cwe {
        /// Repeats of each common word.
        freq_cw: usize,
        /// Repeats of each uncommon word.
        freq_ucw: usize,
        /// Common words (the answer).
        num_cw: usize,
    },
    /// Frequent words extraction.
    Fwe {
        /// The zeta distribution's exponent.
        alpha: f64,
    },
}

/// The context of `task` of about `length` characters (returned), and the rest of its
/// item; `haystack` is the essay text of the essay tasks.
pub(crate) fn generate(
    task: Task,
    rng: &mut Rng,
    haystack: Option<&Haystack>,
    length: u64,
) -> Result<(String, Posed), crate::EvalError> {
    let length = usize::try_from(length).unwrap_or(usize::MAX);
    let (context, parts, refs) = match task.config() {
        Config::Niah(config) => niah::generate(&config, rng, haystack, length)
            .ok_or(crate::EvalError::EssayRequired(task.suite_name()))?,
        Config::Vt { chains, hops } => vt::generate(chains, hops, rng, length),
        Config::Cwe {
            freq_cw,
            freq_ucw,
            num_cw,
        } => freq::common_words(freq_cw, freq_ucw, num_cw, rng, length),
        Config::Fwe { alpha } => freq::frequent_words(alpha, rng, length),
    };
    Ok((
        context,
        Posed {
            question: parts.question(),
            expected: Expected::Ruler {
                refs,
                metric: task.metric(),
            },
            framing: parts.framing(),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::{generate_with, Item, Options, Suite};

    fn make(task: Task, length: u64, index: u32, seed: u64) -> (Item, String) {
        let hay = crate::suite::tests::fixture();
        let options = Options {
            haystack: Some(&hay),
            ..Options::default()
        };
        let mut text = Vec::new();
        let item = generate_with(
            Suite::Ruler(task),
            length,
            index,
            3,
            seed,
            &options,
            &mut text,
        )
        .unwrap_or_else(|e| panic!("{task:?}: {e}"));
        (item, String::from_utf8(text).unwrap_or_default())
    }

    #[test]
    fn every_task_fills_its_length_and_holds_its_gold_strings() {
        for task in Task::ALL {
            for length in [2_048, 16_384, 60_000] {
                let (item, context) = make(task, length, 1, 2);
                assert!(context.is_ascii(), "{task:?}");
                let len = context.len() as u64;
                assert!(
                    len <= length + 100 && len + 400 >= length,
                    "{task:?} {length}: {len}"
                );
                let Expected::Ruler { refs, metric } = &item.expected else {
                    panic!("{:?}", item.expected)
                };
                assert_eq!(*metric, Metric::All);
                for gold in refs {
                    assert!(context.contains(gold.as_str()), "{task:?}: {gold}");
                }
                let wanted = match task {
                    Task::NiahMultivalue | Task::NiahMultiquery => 4,
                    Task::Vt => 5,
                    Task::Cwe => 10,
                    Task::Fwe => 3,
                    _ => 1,
                };
                assert_eq!(refs.len(), wanted, "{task:?}");
                // The baseline's input is RULER's: read back, it gives this question and
                // this context.
                let Some(crate::framing::Framing::Around { before, after, .. }) = &item.framing
                else {
                    panic!("{task:?}")
                };
                let input = format!("{before}{context}{after}");
                let (question, read) = split_input(&input).unwrap_or_else(|| panic!("{task:?}"));
                assert_eq!(question, item.question, "{task:?}");
                assert_eq!(read, context, "{task:?}");
                assert_eq!(crate::score::score(&item.expected, &refs.join(" ")), 1.0);
            }
        }
    }

    #[test]
    fn needles_are_where_their_task_puts_them() {
        let count = |text: &str| text.matches("One of the special magic").count();
        // Four keys, one asked, in essays.
        let (item, context) = make(Task::NiahMultikey1, 30_000, 0, 4);
        assert_eq!(count(&context), 4);
        assert!(item
            .question
            .contains("What is the special magic number for "));
        assert!(!context.contains('\n'), "essays are joined by spaces");
        // A key of four values.
        let (item, context) = make(Task::NiahMultivalue, 30_000, 0, 4);
        assert_eq!(count(&context), 4);
        assert!(item
            .question
            .starts_with("Some special magic numbers are hidden"));
        // Four keys asked: `a, b, c, and d`.
        let (item, _) = make(Task::NiahMultiquery, 30_000, 0, 4);
        assert_eq!(item.question.matches(", ").count(), 3);
        assert!(item.question.contains(", and "));
        // Noise: the asked needle among RULER's noise lines.
        let (_, context) = make(Task::NiahSingle1, 10_000, 0, 4);
        assert_eq!(count(&context), 1);
        assert!(context
            .lines()
            .filter(|l| !l.starts_with("One of"))
            .all(|l| l == niah::NOISE));
        // Needles among needles: every line is one, the asked one's key once.
        let (item, context) = make(Task::NiahMultikey3, 10_000, 0, 4);
        assert!(context
            .lines()
            .all(|l| l.starts_with("One of the special magic uuids for ")));
        let key = item
            .question
            .split(" for ")
            .nth(1)
            .unwrap()
            .split(" mentioned")
            .next()
            .unwrap();
        assert_eq!(context.matches(&format!("for {key} is:")).count(), 1);
    }

    #[test]
    fn essay_tasks_need_a_haystack() {
        let error = generate_with(
            Suite::Ruler(Task::NiahSingle2),
            8_192,
            0,
            1,
            1,
            &Options::default(),
            &mut Vec::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("ruler/niah_single_2") && error.contains("--haystack"),
            "{error}"
        );
        assert!(generate_with(
            Suite::Ruler(Task::NiahSingle1),
            8_192,
            0,
            1,
            1,
            &Options::default(),
            &mut Vec::new()
        )
        .is_ok());
    }

    /// Pinned: the SHA-256 of each task's context at 16k characters, seed 1, item 0,
    /// over the fixture haystack. Changing these changes the benchmark's items.
    #[test]
    fn the_same_seed_gives_the_same_contexts() {
        use sha2::{Digest, Sha256};
        let mut got = Vec::new();
        for task in Task::ALL {
            let (a, text) = make(task, 16_384, 0, 1);
            let (b, again) = make(task, 16_384, 0, 1);
            assert_eq!((&a, &text), (&b, &again), "{task:?}");
            assert_ne!(text, make(task, 16_384, 0, 2).1, "{task:?}: another seed");
            let digest: String = Sha256::digest(text.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            got.push(format!("{} {}", task.name(), &digest[..16]));
        }
        let pinned = [
            "niah_single_1 524005930ba97fae",
            "niah_single_2 804cdee9d055fd24",
            "niah_single_3 7561a0a0155765e6",
            "niah_multikey_1 83e5824cb12cf8cd",
            "niah_multikey_2 3ec92620719e0e3d",
            "niah_multikey_3 42b60653b805372e",
            "niah_multivalue 321efed4fc54639f",
            "niah_multiquery 61461a2987e42d6e",
            "vt 826d922444ec4780",
            "cwe e9aeb9a1d4a341f9",
            "fwe f9d131395c4c67ec",
        ];
        assert_eq!(got, pinned);
    }
}

//! Long-context benchmark suites for rlm, generated locally and scored automatically.
//!
//! The project's five suites, after the paper's benchmarks: a single needle at a chosen
//! depth ([`Suite::Sniah`], S-NIAH style), several needles that must all be found
//! ([`Suite::MultiNeedle`]), aggregation over thousands of labelled records
//! ([`Suite::Aggregate`], OOLONG style: a count, the most frequent label, a sum),
//! pairs of records that satisfy a condition ([`Suite::Pairs`], quadratic work), and
//! word counts over real text ([`Suite::WordCount`]). And the field's benchmarks by
//! their published definitions: RULER's eleven synthetic tasks ([`ruler`],
//! `ruler/<task>`) and OOLONG ([`oolong`]: `oolong/trec_coarse` built from a TREC file,
//! `oolong/released` read from the released records). Every item is generated from a
//! seed (the same seed gives the same bytes on every machine), has an exact answer and
//! a scorer (`score`). The needles can hide in real prose (a `Haystack`, e.g. the
//! corpora `scripts/corpora.sh` fetches) among distractor needles.
//!
//! The crate holds no runner: `rlm-orchestrate eval` runs the items (an RLM arm and a
//! baseline arm), and [`oracle`] is the scripted model `mock-llm --oracle` uses to prove
//! the pipeline offline.

pub mod chart;
pub mod data;
pub mod error;
pub mod framing;
pub mod haystack;
pub mod oolong;
pub mod oracle;
pub mod regular_file;
pub mod report;
pub mod rng;
pub mod ruler;
pub mod score;
pub mod stats;
pub mod suite;
pub mod tally;
pub mod text;
pub mod variant;

pub use data::DataId;
pub use error::EvalError;
pub use framing::Framing;
pub use haystack::{Haystack, HaystackId};
pub use oolong::DataFile;
pub use report::{ItemResult, SummaryRow};
pub use score::{score, Expected};
pub use suite::{generate_with, parse_length, Item, Options, Suite, Variant};

//! The arguments of `eval`: which suites, lengths and arms to score, and every flag
//! of a run for the model and the loop.

use std::path::PathBuf;

use super::RunOptions;

/// `eval` options: what to run, and every flag of `run` for the model and the loop.
#[derive(Debug, clap::Args)]
#[command(args_override_self = true)]
pub struct EvalArgs {
    /// Suites to run (comma-separated): sniah, multi-needle, aggregate, pairs,
    /// word-count (needs --haystack); RULER's ruler/niah_single_1..3,
    /// ruler/niah_multikey_1..3, ruler/niah_multivalue, ruler/niah_multiquery, ruler/vt,
    /// ruler/cwe, ruler/fwe (the essay ones need --haystack); oolong/trec_coarse and
    /// oolong/released (need --data). docs/benchmarks.md.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "sniah,multi-needle,aggregate,pairs",
        help_heading = "Evaluation"
    )]
    pub suite: Vec<String>,

    /// Context lengths in characters (comma-separated; k = 1024, m = 1024²); for
    /// oolong/released, the records' published context_len (tokens).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "8k,64k,1m",
        help_heading = "Evaluation"
    )]
    pub lengths: Vec<String>,

    /// Items per suite and length (sniah spreads their needles over 10-90 % depth).
    #[arg(
        long,
        default_value_t = 3,
        value_name = "N",
        help_heading = "Evaluation"
    )]
    pub items: u32,

    /// Seed of the generated items (the same seed gives the same items everywhere).
    #[arg(
        long,
        default_value_t = 1,
        value_name = "N",
        help_heading = "Evaluation",
        hide_short_help = true
    )]
    pub seed: u64,

    /// The baseline's window: it sees the first this many characters of the context,
    /// fewer when the model's window (--context-window, or found) holds less.
    #[arg(
        long,
        default_value = "96k",
        value_name = "CHARS",
        help_heading = "Evaluation",
        hide_short_help = true
    )]
    pub baseline_window: String,

    /// Items run at once (each RLM arm is a run of its own).
    #[arg(
        long,
        default_value_t = 2,
        value_name = "N",
        help_heading = "Evaluation",
        hide_short_help = true
    )]
    pub parallel: usize,

    /// Arms to run (comma-separated): rlm, baseline and the names given with --arm
    /// [default: all of them].
    #[arg(long, value_delimiter = ',', help_heading = "Evaluation")]
    pub arms: Vec<String>,

    /// An external arm, NAME='COMMAND' (repeatable): a command answering each item,
    /// split like a shell would, with {context_file}, {question}, {question_file},
    /// {output_file}, {model}, {base_url} and {api_key_env} replaced inside its words.
    /// Its answer is {output_file} if written, else its stdout. A bare
    /// `--arm rlms` is the official RLM library (scripts/arms/setup-rlms.sh installs it)
    /// with the model, server and --max-iterations of the rlm arm.
    #[arg(
        long = "arm",
        value_name = "NAME=COMMAND",
        help_heading = "Evaluation",
        hide_short_help = true
    )]
    pub arm: Vec<String>,

    /// Bound on one answer of an external arm, in seconds; past it the item fails.
    #[arg(
        long,
        default_value_t = 3600,
        value_name = "S",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Evaluation", hide_short_help = true
    )]
    pub arm_timeout: u64,

    /// Real text for the contexts: a .txt file or a directory of .txt files (read in
    /// name order). sniah and multi-needle hide their needles in it; word-count needs
    /// it. scripts/corpora.sh fetches corpora.
    #[arg(
        long,
        value_name = "PATH",
        help_heading = "Evaluation",
        hide_short_help = true
    )]
    pub haystack: Option<PathBuf>,

    /// A data file a suite is built from (repeatable): a TREC question-classification
    /// file for oolong/trec_coarse (`COARSE:fine question` lines, as train_5500.label),
    /// released OOLONG-synth records for oolong/released (a .jsonl file or a directory
    /// of them). docs/benchmarks.md says where to get them.
    #[arg(
        long,
        value_name = "PATH",
        help_heading = "Evaluation",
        hide_short_help = true
    )]
    pub data: Vec<PathBuf>,

    /// Distractor needles per sniah and multi-needle context: the needle's sentence
    /// with a key one word or one digit away from an asked key, and another number.
    #[arg(
        long,
        default_value_t = 0,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(0..=100),
        help_heading = "Evaluation", hide_short_help = true
    )]
    pub distractors: u32,

    /// The form of the record suites' items (aggregate, pairs): default, reworded (the
    /// same records, the question worded another way), json (the records as JSON
    /// lines) or csv (with a header line). Items and results record it.
    #[arg(
        long,
        default_value = "default",
        value_name = "FORM",
        help_heading = "Evaluation",
        hide_short_help = true
    )]
    pub variant: String,

    /// Go on with OUT/results.json: items already scored are skipped.
    #[arg(long, help_heading = "Evaluation")]
    pub resume: bool,

    /// Where the contexts, results.json, table.md and accuracy.svg go.
    #[arg(
        long,
        default_value = "eval-out",
        value_name = "DIR",
        help_heading = "Evaluation"
    )]
    pub out: PathBuf,

    /// The flags shared with `run` (model, environment, budgets…).
    #[command(flatten)]
    pub options: RunOptions,
}

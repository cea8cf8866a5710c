//! What `eval` is asked to run, checked before anything runs (every bad flag is exit 2
//! with what to do), and the items' contexts, generated once into `OUT/contexts/`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rlm_eval::oolong::{Released, Set, TrecSet};
use rlm_eval::report::write_atomically;
use rlm_eval::suite::{format_length, generate_with};
use rlm_eval::{DataFile, EvalError, Haystack, Options, Suite};
use rlm_process::CancellationToken;

use super::arm;
use crate::cli::EvalArgs;
use crate::exit::bad_input;

/// What the command line asked for, checked.
pub(super) struct Plan {
    pub suites: Vec<Suite>,
    pub lengths: Vec<u64>,
    pub arms: Vec<String>,
    /// The external arms (`--arm`), whether selected or not.
    pub externals: Vec<arm::ExternalArm>,
    pub window: usize,
    /// The real text of `--haystack`, loaded.
    pub haystack: Option<Haystack>,
    /// `--distractors`.
    pub distractors: u32,
    /// `--variant`.
    pub form: rlm_eval::suite::Form,
    /// The TREC file of `--data`, read.
    pub trec: Option<TrecSet>,
    /// The released OOLONG records of `--data`, scanned.
    pub released: Option<Released>,
}

impl Plan {
    /// How the contexts are made beyond suite, length, index and seed.
    pub fn options(&self) -> Options<'_> {
        Options {
            haystack: self.haystack.as_ref(),
            distractors: self.distractors,
            form: self.form,
            trec: self.trec.as_ref(),
            released: self.released.as_ref(),
        }
    }
}

/// One item of the plan, its context generated.
#[derive(Clone)]
pub(super) struct Prepared {
    pub item: rlm_eval::Item,
    pub context: PathBuf,
}

/// Checks the evaluation flags.
pub(super) fn plan(args: &EvalArgs) -> anyhow::Result<Plan> {
    let options = &args.options;
    if !options.context.is_empty() || options.context_dir.is_some() || options.context_var.is_some()
    {
        return Err(bad_input(
            "eval generates its contexts: drop --context, --context-dir and --context-var",
        ));
    }
    let suites = args
        .suite
        .iter()
        .map(|s| s.parse::<Suite>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad_input)?;
    let lengths = args
        .lengths
        .iter()
        .map(|l| rlm_eval::parse_length(l))
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad_input)?;
    let window = rlm_eval::parse_length(&args.baseline_window).map_err(|_| {
        bad_input(format!(
            "--baseline-window {}: use a number of characters, e.g. 96k",
            args.baseline_window
        ))
    })?;
    let form: rlm_eval::suite::Form = args.variant.parse().map_err(bad_input)?;
    if !form.is_default() {
        if let Some(suite) = suites
            .iter()
            .find(|s| !matches!(s, Suite::Aggregate | Suite::Pairs))
        {
            return Err(bad_input(format!(
                "--variant {form} applies to the record suites aggregate and pairs, not to {suite}: run {suite} without --variant"
            )));
        }
    }
    let (arms, externals) = arm::select(args)?;
    if args.items == 0 || suites.is_empty() || lengths.is_empty() || arms.is_empty() {
        return Err(bad_input(
            "nothing to run: give at least one suite, length, arm and item",
        ));
    }
    let haystack = match &args.haystack {
        Some(path) => Some(Haystack::load(path, options.max_context_bytes).map_err(bad_input)?),
        None => match suites.iter().find(|s| s.needs_haystack()) {
            Some(suite) => return Err(bad_input(suite.haystack_required())),
            None => None,
        },
    };
    let (trec, released) = data(args, &suites, &lengths)?;
    Ok(Plan {
        suites,
        lengths,
        arms,
        externals,
        window: usize::try_from(window).unwrap_or(usize::MAX),
        haystack,
        distractors: args.distractors,
        form,
        trec,
        released,
    })
}

/// The `--data` files the suites need, read: each suite that needs one has it, and
/// released records hold enough items at each length.
fn data(
    args: &EvalArgs,
    suites: &[Suite],
    lengths: &[u64],
) -> anyhow::Result<(Option<TrecSet>, Option<Released>)> {
    let (mut trec, mut released) = (None, None);
    for path in &args.data {
        match DataFile::load(path).map_err(bad_input)? {
            DataFile::Trec(set) => trec = trec.or(Some(set)),
            DataFile::Released(set) => released = released.or(Some(set)),
        }
    }
    for set in suites.iter().filter_map(|s| s.data_needed()) {
        let present = match set {
            Set::TrecCoarse => trec.is_some(),
            Set::Released => released.is_some(),
        };
        if !present {
            return Err(bad_input(EvalError::DataRequired {
                suite: set.suite_name(),
                needs: set.needs(),
            }));
        }
    }
    if let Some(records) = released
        .as_ref()
        .filter(|_| suites.contains(&Suite::Oolong(Set::Released)))
    {
        let counts = records.lengths();
        for &length in lengths {
            let have = counts.get(&length).copied().unwrap_or(0);
            if have < args.items as usize {
                return Err(bad_input(EvalError::ReleasedShort {
                    path: records.id().path.clone(),
                    length,
                    have,
                    lengths: records.describe_lengths(),
                }));
            }
        }
    }
    Ok((trec, released))
}

/// What tells the contexts of one suite's variant apart in their file names: the
/// haystack's and data's digests, the distractors, the form.
fn suffix_of(variant: &rlm_eval::Variant) -> String {
    let mut suffix = String::new();
    if let Some(haystack) = &variant.haystack {
        suffix.push_str("-hay");
        suffix.extend(haystack.digest.chars().take(12));
    }
    if variant.distractors > 0 {
        suffix.push_str(&format!("-d{}", variant.distractors));
    }
    if !variant.form.is_default() {
        suffix.push_str(&format!("-{}", variant.form));
    }
    if let Some(data) = &variant.data {
        suffix.push_str("-data");
        suffix.extend(data.digest.chars().take(12));
    }
    suffix
}

/// Generates every item's context (once: a context already in `OUT/contexts/` with
/// its item is reused).
pub(super) fn prepare_items(
    plan: &Plan,
    args: &EvalArgs,
    cancel: &CancellationToken,
) -> anyhow::Result<Vec<Prepared>> {
    let mut prepared = Vec::new();
    for &suite in &plan.suites {
        let variant = suite.variant(&plan.options());
        // Contexts of another haystack, distractors, form or data live under other names.
        let suffix = suffix_of(&variant);
        for &length in &plan.lengths {
            for index in 0..args.items {
                if cancel.is_cancelled() {
                    return Ok(prepared);
                }
                let name = format!(
                    "{}-{}-seed{}-{index}{suffix}",
                    suite.file_name(),
                    format_length(length),
                    args.seed
                );
                let context = args.out.join("contexts").join(format!("{name}.txt"));
                let meta = args.out.join("contexts").join(format!("{name}.json"));
                let known = std::fs::read(&meta)
                    .ok()
                    .and_then(|bytes| serde_json::from_slice::<rlm_eval::Item>(&bytes).ok())
                    .filter(|item| item.variant.same_items_as(&variant) && context.exists());
                let item = match known {
                    // The context is reused; its item is derived again, so answers
                    // are scored by today's rules (see `rescore`).
                    Some(known) => {
                        let item = generate_with(
                            suite,
                            length,
                            index,
                            args.items,
                            args.seed,
                            &plan.options(),
                            &mut std::io::sink(),
                        )?;
                        if item != known {
                            write_atomically(&meta, &serde_json::to_vec_pretty(&item)?)?;
                        }
                        item
                    }
                    None => {
                        let item =
                            write_context(suite, length, index, args, &plan.options(), &context)?;
                        let json = serde_json::to_vec_pretty(&item)?;
                        write_atomically(&meta, &json)?;
                        item
                    }
                };
                prepared.push(Prepared { item, context });
            }
        }
    }
    Ok(prepared)
}

/// Writes one context through a temp file (a generation interrupted leaves nothing).
fn write_context(
    suite: Suite,
    length: u64,
    index: u32,
    args: &EvalArgs,
    options: &Options<'_>,
    path: &Path,
) -> anyhow::Result<rlm_eval::Item> {
    let tmp = path.with_extension("tmp");
    let file = std::fs::File::create(&tmp)
        .with_context(|| format!("cannot write the context {}", tmp.display()))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let item = generate_with(
        suite, length, index, args.items, args.seed, options, &mut out,
    )
    .with_context(|| format!("cannot write the context {}", tmp.display()))?;
    out.flush()
        .with_context(|| format!("cannot write the context {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(item)
}

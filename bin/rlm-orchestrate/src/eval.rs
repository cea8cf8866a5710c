//! `rlm-orchestrate eval`: the suites of `rlm-eval`, each item answered by two arms —
//! the RLM (a normal run with its own trace) and the baseline (one direct call to the
//! same model with the context cut to `--baseline-window` characters, or to what fits
//! the model's window when that is less; see [`baseline`]) — scored, and
//! summed up in a table, `results.json` and an accuracy-vs-length chart.
//!
//! Contexts are generated once into `OUT/contexts/` (the item's question and answer
//! beside each); the table is also written as `OUT/summary.json`. Every scored item is written to `OUT/results.json` as soon as it is
//! done, so Ctrl-C keeps what was done and `--resume` goes on from there. With
//! `--haystack` (real text) and `--distractors`, each item and result records the
//! haystack's digest and the distractors, and `--resume` refuses results of another.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::stream::{self, StreamExt};
use indicatif::{ProgressBar, ProgressStyle};
use rlm_eval::report::{markdown_table, read_results, summarise, write_atomically, write_results};
use rlm_eval::suite::format_length;
use rlm_eval::{score, ItemResult};
use rlm_orchestrator::host::Model;
use rlm_orchestrator::launch;
use rlm_orchestrator::provider::ChatRequest;
use rlm_orchestrator::run::RunError;
use rlm_orchestrator::settings::RunSettings;
use rlm_process::CancellationToken;

use crate::cli::{EvalArgs, GlobalArgs};
use crate::exit::{annotate, bad_input, ExitStatus};

mod arm;
mod baseline;
mod plan;
mod rlms;

use plan::{plan, prepare_items, Prepared};

/// The arm that runs the RLM.
const RLM_ARM: &str = "rlm";
/// The arm that calls the model directly.
const BASELINE_ARM: &str = "baseline";

/// Runs `eval`.
pub fn run(global: &GlobalArgs, mut args: EvalArgs) -> anyhow::Result<()> {
    let settings = crate::settings::run_settings(global, &args.options);
    rlms::expand(&mut args.arm, &settings, &args.out)?;
    let plan = plan(&args)?;
    std::fs::create_dir_all(args.out.join("contexts"))
        .with_context(|| format!("cannot create the --out directory {}", args.out.display()))?;
    let results_path = args.out.join("results.json");
    let earlier = if args.resume {
        read_results(&results_path).map_err(bad_input)?
    } else if results_path.exists() {
        return Err(bad_input(format!(
            "{} already holds results: pass --resume to go on with them, or choose another --out",
            results_path.display()
        )));
    } else {
        Vec::new()
    };
    let options = plan.options();
    if let Some((other, variant)) = earlier
        .iter()
        .map(|r| (r, r.suite.variant(&options)))
        .find(|(r, variant)| !r.variant.same_items_as(variant))
    {
        return Err(bad_input(format!(
            "{} holds results made with {}, but this run uses {}: pass the same --haystack, --distractors, --variant and --data to --resume them, or choose another --out",
            results_path.display(),
            other.variant,
            variant
        )));
    }
    if let Some(haystack) = &plan.haystack {
        for skipped in haystack.skipped() {
            crate::live::write_stderr(&format!(
                "warning: --haystack {}: skipped {skipped}",
                haystack.id().path.display()
            ));
        }
        if !global.quiet {
            crate::live::write_stderr(&format!(
                "haystack {}: {} files, {} bytes, sha256 {}",
                haystack.id().path.display(),
                haystack.files(),
                haystack.bytes(),
                haystack.id().digest
            ));
        }
    }

    let cancel = CancellationToken::new();
    let runtime =
        crate::runtime::build_with_graceful_stop(&cancel, "cannot install signal handlers")?;
    let program = std::env::current_exe()
        .context("cannot find the rlm-orchestrate executable to start runs")?;
    // The baseline's model: the run's root model, built once.
    let baseline_model = {
        let _runtime = runtime.enter();
        launch::prepare(&settings, None, Some(program.clone()), cancel.clone())
            .map_err(crate::run::launch_error)?
            .root
    };

    // An answer that failed (the model unreachable, a run error) is not scored: it is
    // asked again on --resume.
    let mut results: Vec<ItemResult> = earlier.into_iter().filter(|r| r.error.is_none()).collect();
    let items = prepare_items(&plan, &args, &cancel)?;
    let items_now: Vec<rlm_eval::Item> = items.iter().map(|p| p.item.clone()).collect();
    let rescored = rlm_eval::report::rescore(&mut results, &items_now);
    if rescored > 0 {
        write_results(&results_path, &results)?;
        if !global.quiet {
            crate::live::write_stderr(&format!(
                "{rescored} earlier answers scored again: their items are scored by a stricter rule now"
            ));
        }
    }
    let done: std::collections::HashSet<_> = results.iter().map(ItemResult::key).collect();
    let jobs: Vec<(Prepared, String)> = items
        .iter()
        .flat_map(|p| plan.arms.iter().map(move |arm| (p.clone(), arm.clone())))
        .filter(|(p, arm)| {
            let i = &p.item;
            !done.contains(&(i.suite, i.length, i.index, i.seed, arm.clone()))
        })
        .collect();
    let total = jobs.len();
    let progress = progress_bar(total as u64, global.quiet);
    let mut answered = 0_usize;
    let mut failures: Vec<String> = Vec::new();
    let runner = Runner {
        settings: &settings,
        program: &program,
        baseline_model: &baseline_model,
        window: plan.window,
        cancel: &cancel,
        externals: &plan.externals,
        arm_runner: arm::runner(&settings, &args, &cancel)?,
    };
    runtime.block_on(async {
        stream::iter(jobs)
            .map(|(prepared, arm)| runner.answer(prepared, arm))
            .buffer_unordered(args.parallel.max(1))
            .for_each(|result| {
                if let Some(result) = result {
                    answered += 1;
                    progress.inc(1);
                    let what = format!(
                        "{} {} #{} {}",
                        result.suite,
                        format_length(result.length),
                        result.index,
                        result.arm
                    );
                    match &result.error {
                        Some(error) => {
                            let line = format!("error: {what}: {error}");
                            progress.suspend(|| crate::live::write_stderr(&line));
                            failures.push(line);
                        }
                        None => {
                            if let Some(why) = &result.failed {
                                // Scored (0) and counted, not an error of the eval.
                                let line = format!("failed: {what}: {why} (scored 0; its stderr tail is in results.json)");
                                progress.suspend(|| crate::live::write_stderr(&line));
                            }
                            progress.set_message(format!("{what}: {:.0} %", result.score * 100.0))
                        }
                    }
                    results.push(result);
                    if let Err(error) = write_results(&results_path, &results) {
                        progress.suspend(|| tracing::error!(%error, "results not saved"));
                    }
                }
                async {}
            })
            .await;
    });
    progress.finish_and_clear();
    drop(runtime);
    let finished = finish(&args.out, &results, plan.window as u64)?;
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{finished}");
    if cancel.is_cancelled() {
        let missing = total - answered;
        return Err(annotate(
            anyhow::anyhow!(
                "interrupted: {missing} of {total} answers were not scored; what was scored is in {} (--resume goes on)",
                results_path.display()
            ),
            Some(ExitStatus::Cancelled),
            None,
        ));
    }
    if let Some(first) = failures.first() {
        return Err(annotate(
            anyhow::anyhow!(
                "{} of {answered} answers failed and were not scored (the first: {}); fix the cause and pass --resume to ask them again",
                failures.len(),
                first.trim_start_matches("error: ")
            ),
            Some(ExitStatus::Failure),
            None,
        ));
    }
    Ok(())
}

/// A progress bar on stderr (hidden when it is not a terminal or with --quiet).
fn progress_bar(total: u64, quiet: bool) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} answers · last: {msg} · eta {eta}",
    ) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// What every answer needs.
struct Runner<'a> {
    settings: &'a RunSettings,
    program: &'a Path,
    baseline_model: &'a Model,
    window: usize,
    cancel: &'a CancellationToken,
    /// The external arms (`--arm`).
    externals: &'a [arm::ExternalArm],
    /// How they run.
    arm_runner: arm::ArmRunner<'a>,
}

impl Runner<'_> {
    /// The item answered by `arm`, scored; `None` when cancelled before it finished
    /// (it is not recorded, so `--resume` runs it again).
    async fn answer(&self, prepared: Prepared, arm: String) -> Option<ItemResult> {
        if self.cancel.is_cancelled() {
            return None;
        }
        let item = &prepared.item;
        let started = Instant::now();
        let outcome = match self.externals.iter().find(|e| e.name == arm) {
            Some(external) => self.arm_runner.answer(external, &prepared).await?,
            None if arm == RLM_ARM => self.rlm(&prepared).await?,
            None => self.baseline(&prepared).await?,
        };
        let (answer, error) = match outcome {
            Ok(answer) => (answer, None),
            Err(error) => (Answer::default(), Some(error.to_string())),
        };
        Some(ItemResult {
            suite: item.suite,
            length: item.length,
            index: item.index,
            seed: item.seed,
            arm,
            question: item.question.clone(),
            score: score(&item.expected, &answer.text),
            expected: item.expected.clone(),
            got: answer.text,
            tokens: answer.usage.map(|u| u.total()),
            input_tokens: answer.usage.map(|u| u.prompt_tokens),
            output_tokens: answer.usage.map(|u| u.completion_tokens),
            forced: answer.forced,
            failed: answer.failed,
            stderr_tail: answer.stderr_tail,
            context_chars: answer.context_chars,
            cost_usd: answer.cost_usd,
            seconds: started.elapsed().as_secs_f64(),
            run_id: answer.run_id,
            error,
            variant: item.variant.clone(),
        })
    }

    /// A normal run over the item's context.
    async fn rlm(&self, prepared: &Prepared) -> Option<Result<Answer, ArmError>> {
        let mut settings = self.settings.clone();
        settings.context.files = vec![prepared.context.clone()];
        let config = match launch::prepare(
            &settings,
            None,
            Some(self.program.to_owned()),
            self.cancel.clone(),
        ) {
            Ok(config) => config,
            Err(error) => return Some(Err(ArmError::Failed(Box::new(error)))),
        };
        match rlm_orchestrator::run::run(config, &prepared.item.question, Vec::new()).await {
            Ok(report) => Some(Ok(Answer {
                text: report.answer,
                usage: Some(report.totals.usage),
                cost_usd: report.totals.cost_usd,
                run_id: Some(report.run_id.to_string()),
                forced: report.forced,
                ..Answer::default()
            })),
            Err(RunError::Cancelled { .. }) => None,
            Err(error) => Some(arm_failure(error)),
        }
    }

    /// One direct call with the first `window` characters of the context, or as many
    /// as fit the model's window.
    async fn baseline(&self, prepared: &Prepared) -> Option<Result<Answer, ArmError>> {
        let context = match baseline::read_prefix(&prepared.context, self.window) {
            Ok(context) => context,
            Err(source) => {
                return Some(Err(ArmError::ReadContext {
                    path: prepared.context.clone(),
                    source,
                }))
            }
        };
        let model = self.baseline_model;
        let question = &prepared.item.question;
        // The call, or `None` once the run is cancelled.
        let ask = |request: ChatRequest| async move {
            tokio::select! {
                completion = model.provider.complete(&request, None) => Some((request, completion)),
                () = self.cancel.cancelled() => None,
            }
        };
        let framing = prepared.item.framing.as_ref();
        let mut fitted = baseline::fit(model, &context, question, framing, None).await;
        let (mut request, mut completion) = ask(fitted.request).await?;
        // A server that refuses the prompt as too long names its window and the tokens it
        // counted (the estimate was off: text denser than any calibrated, a tokenizer
        // count that timed out on a busy server, a wrong --context-window): fitted again
        // within what that count says fits, and asked again, a bounded number of times.
        for _ in 0..baseline::MAX_REFITS {
            let Err(error) = &completion else { break };
            if model
                .window
                .learn_from_refusal(error, &request)
                .await
                .is_none()
            {
                break;
            }
            let budget = model.window.prompt_budget().await;
            let max_chars = baseline::refit_chars(error, fitted.context_chars, budget);
            fitted = baseline::fit(model, &context, question, framing, max_chars).await;
            (request, completion) = ask(fitted.request).await?;
        }
        Some(match completion {
            Ok(completion) => {
                // Reported, else the window's estimate (as a run records it).
                let usage = model.window.usage_of(&request, &completion);
                Ok(Answer {
                    usage: Some(usage),
                    cost_usd: model.price.map(|p| p.cost_usd(&usage)),
                    text: completion.text,
                    context_chars: Some(fitted.context_chars),
                    ..Answer::default()
                })
            }
            Err(error) => arm_failure(error),
        })
    }
}

/// What a failed RLM run or baseline call means for the item. When the model could
/// not be reached at all (its server is down), the item says nothing about the arm:
/// it is not scored, and `--resume` asks it again. Any other failure — the server
/// answered with an error or a broken answer (a request past its window, say), or the
/// run failed — is the arm's own, as an external arm's failure is: scored 0 and
/// counted as failed, so no arm skips the items it cannot do.
fn arm_failure(error: impl std::error::Error + Send + Sync + 'static) -> Result<Answer, ArmError> {
    if model_unreachable(&error) {
        return Err(ArmError::Failed(Box::new(error)));
    }
    Ok(Answer {
        failed: Some(error.to_string()),
        ..Answer::default()
    })
}

/// True when `error`, or one of its causes, is a model endpoint that could not be
/// reached.
fn model_unreachable(error: &(dyn std::error::Error + 'static)) -> bool {
    use rlm_orchestrator::provider::ProviderError;
    use rlm_orchestrator::rlm::LoopError;
    let mut current = Some(error);
    while let Some(error) = current {
        let unreachable = matches!(
            error.downcast_ref::<ProviderError>(),
            Some(ProviderError::Unreachable { .. })
        ) || matches!(
            error.downcast_ref::<LoopError>(),
            Some(LoopError::Provider(ProviderError::Unreachable { .. }))
        );
        if unreachable {
            return true;
        }
        current = error.source();
    }
    false
}

/// What an arm answered.
#[derive(Default)]
struct Answer {
    text: String,
    /// Tokens, when the arm reported them.
    usage: Option<rlm_orchestrator::provider::Usage>,
    cost_usd: Option<f64>,
    run_id: Option<String>,
    /// The arm was made to answer (out of iterations).
    forced: bool,
    /// Why the arm failed at the item (scored 0, counted as failed).
    failed: Option<String>,
    /// The tail of a failed arm's stderr.
    stderr_tail: Option<String>,
    /// Characters of the context the arm was shown, for an arm shown a prefix.
    context_chars: Option<u64>,
}

/// Why an arm has no answer. Its message is the item's `error` in `results.json` and
/// on the terminal; such an item is not scored, and `--resume` asks it again.
#[derive(Debug)]
enum ArmError {
    /// The run could not start or failed, or the model call failed: the library's
    /// own message (without its causes).
    Failed(Box<dyn std::error::Error + Send + Sync>),
    /// The baseline could not read the item's context.
    ReadContext {
        path: PathBuf,
        source: std::io::Error,
    },
    /// An external arm's command could not be started.
    Start {
        arm: String,
        command: String,
        message: String,
    },
    /// An external arm's question or answer file could not be written or read.
    ArmFiles {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl std::fmt::Display for ArmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Failed(error) => error.fmt(f),
            Self::ReadContext { path, source } => {
                write!(f, "cannot read {}: {source}", path.display())
            }
            Self::Start {
                arm,
                command,
                message,
            } => write!(
                f,
                "cannot start arm {arm} (`{command}`): {message}; check the program of --arm {arm} (it runs with PATH and HOME of this shell)"
            ),
            Self::ArmFiles { path, source } => write!(
                f,
                "cannot write or read the external arm's file {}: {source}; check the --out directory",
                path.display()
            ),
        }
    }
}

/// Writes `table.md` and `accuracy.svg` for `results`; returns the table.
fn finish(out: &Path, results: &[ItemResult], window: u64) -> anyhow::Result<String> {
    let rows = summarise(results);
    let table = markdown_table(&rows);
    write_atomically(&out.join("table.md"), table.as_bytes())?;
    // The table's rows as JSON (per cell: accuracy and its interval, tokens and seconds
    // per correct answer, forced, failed), beside results.json's items.
    write_atomically(
        &out.join("summary.json"),
        &serde_json::to_vec_pretty(&rows)?,
    )?;
    if !rows.is_empty() {
        rlm_eval::chart::write_chart(
            &out.join("accuracy.svg"),
            &rows,
            "rlm-orchestrate eval: score by context length",
            Some(window),
        )?;
    }
    Ok(format!(
        "{table}\nresults: {}  summary: {}  table: {}  chart: {}",
        out.join("results.json").display(),
        out.join("summary.json").display(),
        out.join("table.md").display(),
        out.join("accuracy.svg").display()
    ))
}

//! `rlm-orchestrate run`: turns flags into a run configuration, runs it on a tokio
//! runtime, and prints the answer (or one JSON object with `--json`).
//!
//! Everything that can be checked before a model is asked is checked here or while
//! the context loads; such failures exit 2 and leave the store as it was.

use std::io::{self, IsTerminal, Read, Write};
use std::path::Path;

use anyhow::Context as _;
use rlm_orchestrator::agents::{ChildSpec, Lineage};
use rlm_orchestrator::context::{ContextError, STDIN_PATH};
use rlm_orchestrator::launch::{self, LaunchError};
use rlm_orchestrator::provider::{ProviderError, ProviderKind};
use rlm_orchestrator::run::{run as run_query, RunConfig, RunError, RunReport};
use rlm_process::CancellationToken;

use crate::cli::{GlobalArgs, RunArgs, RunOptions};
use crate::exit::{annotate, bad_input, ExitStatus};

/// Runs `run`: a task given by the user, or (`--child-spec`) the nested run a parent
/// described in a spec file.
pub fn run(global: &GlobalArgs, args: RunArgs) -> anyhow::Result<()> {
    let cancel = CancellationToken::new();
    let lineage = Lineage::from_env().map_err(bad_input)?;
    let (config, task) = match &args.child_spec {
        Some(path) => child_config(path, lineage.clone(), cancel.clone())?,
        None => {
            check_stdin_once(&args)?;
            let task = read_task(args.task.as_deref())?;
            (
                prepare(global, &args, lineage.clone(), cancel.clone())?,
                task,
            )
        }
    };
    let data_dir = config.data_dir.clone();
    let progress = crate::live::Progress::start(args.events, global.quiet, &data_dir);
    let listeners = progress.listeners();
    // Installed before the run starts, so a signal during the context load is ours
    // (it stops the load and its partial file is removed), never the default death.
    let runtime = crate::runtime::build_with_graceful_stop(
        &cancel,
        "cannot install signal handlers; Ctrl-C will kill rlm-orchestrate without cleanup",
    )?;
    // The run goes on a worker thread, beside the I/O it waits for, instead of the
    // main thread: each model answer and kernel reply then wakes the thread that
    // polls it rather than crossing to another (BENCHMARKS.md, per-step figures).
    let run = runtime.spawn(async move { run_query(config, &task, listeners).await });
    let outcome = match runtime
        .block_on(run)
        .map_err(tokio::task::JoinError::try_into_panic)
    {
        Ok(outcome) => outcome,
        Err(Ok(panic)) => std::panic::resume_unwind(panic),
        Err(Err(_cancelled)) => anyhow::bail!("the run was cancelled by the runtime shutting down"),
    };
    progress.finish(); // the live view leaves the terminal before the answer is printed
    if let Some(lineage) = &lineage {
        launch::publish_result(&data_dir, lineage, &outcome);
    }
    let report = outcome.map_err(run_error)?;
    if args.events && !args.json {
        return Ok(()); // stdout is JSON lines; the answer is in the `final` event
    }
    print_report(&report, args.json)
}

/// Checks the flags of `run` / `repl` and builds the run's configuration; `lineage` is
/// where this process stands when a parent started it, `cancel` the token Ctrl-C /
/// SIGTERM will cancel.
pub(crate) fn prepare(
    global: &GlobalArgs,
    args: &RunOptions,
    lineage: Option<Lineage>,
    cancel: CancellationToken,
) -> anyhow::Result<RunConfig> {
    let settings = crate::settings::run_settings(global, args);
    let program = std::env::current_exe()
        .context("cannot find the rlm-orchestrate executable to start sub-runs")?;
    launch::prepare(&settings, lineage, Some(program), cancel).map_err(launch_error)
}

/// The configuration and task of a nested run, from the spec file its parent wrote.
fn child_config(
    path: &Path,
    lineage: Option<Lineage>,
    cancel: CancellationToken,
) -> anyhow::Result<(RunConfig, String)> {
    if lineage.as_ref().is_none_or(|l| l.result_key.is_none()) {
        return Err(bad_input(
            "--child-spec is for nested runs started by rlm-orchestrate itself: RLM_AGENT_ID and RLM_RESULT_KEY must be set",
        ));
    }
    let spec = ChildSpec::read(path).map_err(bad_input)?;
    let mut settings = spec.settings;
    settings.context.var = spec.context_var;
    let program = std::env::current_exe()
        .context("cannot find the rlm-orchestrate executable to start sub-runs")?;
    let config =
        launch::prepare(&settings, lineage, Some(program), cancel).map_err(launch_error)?;
    Ok((config, spec.query))
}

/// A setup failure: exit 2 when the user's input is at fault, with a hint for a
/// missing API key.
pub(crate) fn launch_error(error: LaunchError) -> anyhow::Error {
    let hint = match &error {
        LaunchError::Model {
            kind,
            source: ProviderError::MissingKey { .. },
            ..
        } => Some(match kind {
            ProviderKind::OpenAi => "for a local OpenAI-compatible server pass --base-url http://127.0.0.1:PORT/v1 (no key needed); `rlm-orchestrate config show` lists the key variable of each model",
            ProviderKind::Anthropic | ProviderKind::Cli => "`rlm-orchestrate config show` lists the key variable of each model (root and sub)",
        }.to_owned()),
        LaunchError::Model { .. }
        | LaunchError::Setting(_)
        | LaunchError::Schema { .. }
        | LaunchError::SystemPrompt { .. }
        | LaunchError::AgentCommand(_)
        | LaunchError::NoSrun
        | LaunchError::DataDir { .. } => None,
    };
    let status = error.is_bad_input().then_some(ExitStatus::BadInput);
    annotate(anyhow::Error::new(error), status, hint)
}

/// `--context -` reads the context from stdin, which then cannot also carry the task,
/// and can be read only once.
fn check_stdin_once(args: &RunArgs) -> anyhow::Result<()> {
    let from_stdin = args
        .options
        .context
        .iter()
        .filter(|p| p.as_os_str() == STDIN_PATH)
        .count();
    if from_stdin > 1 {
        return Err(bad_input(
            "--context - is given more than once; stdin can be read only once",
        ));
    }
    if from_stdin == 1 && args.task.as_deref().is_none_or(|t| t == "-") {
        return Err(bad_input(
            "--context - reads the context from stdin, so the task cannot come from stdin too: pass the task as an argument",
        ));
    }
    Ok(())
}

/// The longest task: a task says what to do, the context is what to do it with.
pub(crate) const MAX_TASK_BYTES: usize = 1 << 20;

/// Why a task past [`MAX_TASK_BYTES`] is refused, and what to do instead.
pub(crate) const TASK_TOO_LONG: &str = "the task is longer than 1 MiB: a task is not a context; pass the text as the context instead (`--context -` reads it from stdin, `--context FILE` from a file) and keep the task to what to do with it";

fn read_task(task: Option<&str>) -> anyhow::Result<String> {
    let task = match task {
        Some(task) if task != "-" => task.to_owned(),
        _ => {
            if io::stdin().is_terminal() {
                return Err(bad_input(
                    "no task given: pass it as an argument or pipe it on stdin",
                ));
            }
            read_bounded(io::stdin().lock(), "stdin")?
        }
    };
    checked_task(&task)
}

/// Reads `reader` to its end, but never more than one byte past [`MAX_TASK_BYTES`]:
/// an endless stdin (`yes | rlm-orchestrate run`) is refused at the bound, not held.
pub(crate) fn read_bounded(reader: impl Read, what: &str) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_TASK_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("failed to read the task from {what}"))?;
    if bytes.len() > MAX_TASK_BYTES {
        return Err(bad_input(TASK_TOO_LONG));
    }
    String::from_utf8(bytes)
        .map_err(|e| bad_input(format!("the task on {what} is not valid UTF-8 ({e})")))
}

/// The task, trimmed; an empty one, or one past [`MAX_TASK_BYTES`], is bad input
/// (every front door: arguments, stdin, a `repl` line, MCP's `rlm_run`).
pub(crate) fn checked_task(task: &str) -> anyhow::Result<String> {
    if task.len() > MAX_TASK_BYTES {
        return Err(bad_input(TASK_TOO_LONG));
    }
    let task = task.trim().to_owned();
    if task.is_empty() {
        return Err(bad_input(
            "the task is empty: say what to do with the context",
        ));
    }
    Ok(task)
}

pub(crate) fn run_error(error: RunError) -> anyhow::Error {
    match error {
        RunError::BadInput(e @ ContextError::Cancelled { .. }) => {
            annotate(anyhow::Error::new(e), Some(ExitStatus::Cancelled), None)
        }
        RunError::BadInput(e) => annotate(anyhow::Error::new(e), Some(ExitStatus::BadInput), None),
        RunError::Cancelled { .. } => {
            annotate(anyhow::Error::new(error), Some(ExitStatus::Cancelled), None)
        }
        RunError::Store(_)
        | RunError::Trace(_)
        | RunError::Env(_)
        | RunError::Panicked { .. }
        | RunError::Loop { .. } => anyhow::Error::new(error),
    }
}

/// Prints the answer, or with `json` the whole [`RunReport`] as one line (exact JSON,
/// in which control characters are `\u` escapes anyway). On a terminal the answer's
/// own escape sequences are shown escaped, never obeyed; into a pipe or a file it is
/// written exactly as the model gave it.
/// Known secrets (API keys rlm read) are scrubbed from the answer either way.
pub(crate) fn print_report(report: &RunReport, json: bool) -> anyhow::Result<()> {
    let mut report = report.clone();
    report.answer = rlm_process::redact_secrets(&report.answer).into_owned();
    let report = &report;
    let terminal = io::stdout().is_terminal();
    let mut out = io::stdout().lock();
    let written = if json {
        let line = serde_json::to_string(report).context("failed to encode the report")?;
        writeln!(out, "{line}")
    } else if terminal {
        writeln!(out, "{}", crate::output::terminal_text(&report.answer))
    } else {
        writeln!(out, "{}", report.answer)
    };
    match written.and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(e).context("failed to write the answer")
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::status_of;

    /// Issue 22, item 2: an endless reader ends at the bound (this test would not end
    /// otherwise), and every front door's check refuses past it with exit 2.
    #[test]
    fn a_task_is_bounded_at_one_mib() {
        let endless = read_bounded(io::repeat(b'y'), "stdin").unwrap_err();
        assert_eq!(status_of(&endless), ExitStatus::BadInput);
        assert!(endless.to_string().contains("--context -"), "{endless}");
        let long = checked_task(&"x".repeat(MAX_TASK_BYTES + 1)).unwrap_err();
        assert_eq!(status_of(&long), ExitStatus::BadInput);
        assert_eq!(
            checked_task(&"x".repeat(MAX_TASK_BYTES)).unwrap().len(),
            MAX_TASK_BYTES
        );
        assert_eq!(
            read_bounded(&b"  what is in it?\n"[..], "stdin").unwrap(),
            "  what is in it?\n"
        );
    }
}

//! `rlm-orchestrate runs`: the traces runs leave behind, for people.
//!
//! `runs list` is the table of past and running runs; `runs show RUN` tells one run's
//! story step by step, with the runs of its sub-agents indented beneath the step that
//! started them; `runs show RUN --html FILE` renders the same as one self-contained
//! page. Reading is [`rlm_orchestrator::trace`]'s job; this module only formats. A
//! torn or missing file never stops the command: it is reported as a warning and the
//! rest is shown.

mod html;
mod leftovers;
mod prune;
mod text;

use std::collections::HashSet;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use rlm_context_store::{Store, StoreOptions, VARIABLES_DIR};
use rlm_orchestrator::format;
use rlm_orchestrator::trace::{
    attach_agent_results, list_runs, load_trace, RunListing, RunSummary, RunTrace, TraceProblem,
    TraceReadError,
};

pub use leftovers::reap_at_start;

use crate::cli::runs::{ListArgs, RunsArgs, RunsCommand, ShowArgs};
use crate::cli::GlobalArgs;
use crate::exit::{annotate, ExitStatus};
use crate::output::{self, PipeAware};

/// Characters of the task and of the answer shown in a `runs list` row.
const LIST_PREVIEW_CHARS: usize = 40;

/// Bytes of an external agent's result shown by `runs show`.
const RESULT_PREVIEW_BYTES: usize = 2000;

/// Bytes of an external agent's result kept in the HTML page.
const HTML_RESULT_PREVIEW_BYTES: usize = 16 * 1024;

/// Runs a `runs` sub-command.
pub fn run(global: &GlobalArgs, args: RunsArgs) -> Result<()> {
    let mut out = PipeAware::new(BufWriter::new(io::stdout().lock()));
    let result = run_to(global, args, &mut out)
        .and_then(|()| out.flush().context("failed to write to stdout"));
    if out.is_closed() {
        tracing::debug!("stdout closed early");
        return Ok(());
    }
    result
}

/// Runs a `runs` sub-command, writing what it prints to `out` (the MCP server's
/// `runs_*` tools use this).
pub fn run_to(global: &GlobalArgs, args: RunsArgs, out: &mut dyn Write) -> Result<()> {
    match args.command {
        RunsCommand::List(a) => list(global, &a, out),
        RunsCommand::Show(a) => show(global, &a, out),
        RunsCommand::Prune(a) => prune::prune(global, &a, out),
    }
}

// ----- runs list -----

fn list(global: &GlobalArgs, args: &ListArgs, out: &mut dyn Write) -> Result<()> {
    let listing = list_runs(&global.data_dir)?;
    warn_all(global, &listing.problems);
    let mut top = listing.top_level();
    if let Some(limit) = args.limit {
        top.truncate(limit);
    }
    let rows: Vec<(usize, &RunSummary)> = if args.all {
        top.iter()
            .flat_map(|run| with_descendants(&listing, run, 0))
            .collect()
    } else {
        top.iter().map(|run| (0, *run)).collect()
    };
    if args.json {
        let runs: Vec<&RunSummary> = rows.iter().map(|(_, run)| *run).collect();
        serde_json::to_writer_pretty(&mut *out, &runs).context("failed to write to stdout")?;
        writeln!(out)?;
        return Ok(());
    }
    if rows.is_empty() {
        if !global.quiet {
            output::warning(format_args!("no runs in {}", listing.runs_dir.display()));
        }
        return Ok(());
    }
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|(depth, run)| {
            vec![
                format!("{}{}", "  ".repeat(*depth), run.run_id),
                run.started_ms
                    .map_or_else(|| "-".to_owned(), format::utc_time),
                run.status.to_string(),
                run.iterations.to_string(),
                run.totals.sub_agents.to_string(),
                run.totals.usage.total().to_string(),
                cost(run.totals.cost_usd),
                preview(run.task.as_deref().unwrap_or("-"), LIST_PREVIEW_CHARS),
                preview(run.answer.as_deref().unwrap_or("-"), LIST_PREVIEW_CHARS),
            ]
        })
        .collect();
    output::write_table(
        out,
        &[
            "RUN",
            "STARTED (UTC)",
            "STATUS",
            "ITER",
            "SUB",
            "TOKENS",
            "COST",
            "TASK",
            "ANSWER",
        ],
        &table,
    )?;
    Ok(())
}

/// `run` and, beneath it, the runs whose parent it is (oldest first), with depths.
fn with_descendants<'a>(
    listing: &'a RunListing,
    run: &'a RunSummary,
    depth: usize,
) -> Vec<(usize, &'a RunSummary)> {
    let mut rows = vec![(depth, run)];
    if depth > 64 {
        return rows;
    }
    let mut children: Vec<&RunSummary> = listing
        .runs
        .iter()
        .filter(|r| r.parent_id.is_some() && r.parent_id == run.agent_id && r.run_id != run.run_id)
        .collect();
    children.reverse();
    for child in children {
        rows.extend(with_descendants(listing, child, depth + 1));
    }
    rows
}

// ----- runs show -----

fn show(global: &GlobalArgs, args: &ShowArgs, out: &mut dyn Write) -> Result<()> {
    let listing = list_runs(&global.data_dir)?;
    let run = listing.find(&args.run).map_err(|e| not_found(e, global))?;
    let mut trace = load_trace(&listing, run);
    let max_result = if args.html.is_some() {
        HTML_RESULT_PREVIEW_BYTES
    } else {
        RESULT_PREVIEW_BYTES
    };
    if let Some(store) = open_store(&global.data_dir) {
        attach_agent_results(&mut trace, &store, max_result);
    }
    warn_trace(global, &listing, &trace);
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &trace).context("failed to write to stdout")?;
        writeln!(out)?;
        return Ok(());
    }
    if let Some(path) = &args.html {
        let page = html::render(&trace);
        return write_html(path, &page, out);
    }
    text::render(&trace, args.full, out)?;
    Ok(())
}

/// Writes the page to `path` (`-`: stdout) and tells where.
fn write_html(path: &Path, page: &str, out: &mut dyn Write) -> Result<()> {
    if path == Path::new("-") {
        out.write_all(page.as_bytes())?;
        return Ok(());
    }
    fs::write(path, page).with_context(|| format!("failed to write {}", path.display()))?;
    let shown = fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    writeln!(
        out,
        "wrote {} ({})",
        shown.display(),
        format::human_bytes(page.len() as u64)
    )?;
    Ok(())
}

/// The exit status and hint of a run that was not found or not unique.
fn not_found(error: TraceReadError, global: &GlobalArgs) -> anyhow::Error {
    let (status, hint) = match &error {
        TraceReadError::NotFound { .. } => (
            ExitStatus::Missing,
            format!(
                "list the runs of {} with `rlm-orchestrate runs list --all`",
                global.data_dir.display()
            ),
        ),
        TraceReadError::Ambiguous { .. } => (
            ExitStatus::BadInput,
            "give more characters of the run id".to_owned(),
        ),
        TraceReadError::ReadDir { .. } => (ExitStatus::Failure, String::new()),
    };
    let hint = (!hint.is_empty()).then_some(hint);
    annotate(error.into(), Some(status), hint)
}

/// The store, to preview sub-agents' results; `None` (no previews) if it has no
/// variables or cannot be opened. Nothing is created in the data directory.
fn open_store(data_dir: &Path) -> Option<Store> {
    if !data_dir.join(VARIABLES_DIR).is_dir() {
        return None;
    }
    match Store::open_with(data_dir, StoreOptions::default()) {
        Ok(store) => Some(store),
        Err(e) => {
            tracing::warn!("no sub-agent results: {e}");
            None
        }
    }
}

// ----- warnings -----

fn warn_all(global: &GlobalArgs, problems: &[TraceProblem]) {
    if global.quiet {
        return;
    }
    for problem in problems {
        output::warning(format_args!("{problem}"));
    }
}

/// Warns about the files of the shown runs, each problem once.
fn warn_trace(global: &GlobalArgs, listing: &RunListing, trace: &RunTrace) {
    let runs = trace.walk();
    let dirs: HashSet<&Path> = runs.iter().map(|r| r.summary.dir.as_path()).collect();
    let mut seen = HashSet::new();
    let problems = listing
        .problems
        .iter()
        .chain(runs.iter().flat_map(|r| r.problems.iter()))
        .filter(|p| p.path.parent().is_some_and(|d| dirs.contains(d)))
        .filter(|p| seen.insert((p.path.clone(), p.line)))
        .cloned()
        .collect::<Vec<_>>();
    warn_all(global, &problems);
}

// ----- formatting shared by the views -----

/// A compaction in words: which steps were cut and which replaced by their records,
/// the estimated tokens before and after against the prompt's budget, and where the
/// full text is.
fn compaction_summary(record: &rlm_orchestrator::events::CompactionRecord) -> String {
    let mut done = Vec::new();
    if record.cut_chars > 0 {
        let steps = match record.cut_steps.as_slice() {
            [] => String::new(),
            steps => format!(" of {}", step_list(steps)),
        };
        done.push(format!(
            "{} characters cut from long messages{steps}",
            record.cut_chars
        ));
    }
    if !record.steps.is_empty() {
        done.push(format!(
            "{} replaced by their records",
            step_list(&record.steps)
        ));
    }
    if done.is_empty() {
        done.push("nothing changed".to_owned());
    }
    let mut text = format!(
        "{} to fit the model's window: about {} → {} prompt tokens (budget {})",
        done.join("; "),
        record.tokens_before,
        record.tokens_after,
        record.budget
    );
    if let Some(variable) = &record.variable {
        text.push_str(&format!("; full text in `{variable}`"));
    }
    text
}

/// `step 3`, `steps 2–6`: the first and last of a list of iterations.
fn step_list(steps: &[u32]) -> String {
    let first = steps.iter().min();
    let last = steps.iter().max();
    match (first, last) {
        (Some(first), Some(last)) if first == last => format!("step {first}"),
        (Some(first), Some(last)) => format!("steps {first}–{last}"),
        _ => "no step".to_owned(),
    }
}

/// One moment of a plan on one line: priced (the figures), a leaf (its bytes, time
/// and result, indented under the plan), refused, done.
fn plan_line(record: &rlm_orchestrator::events::PlanRecord) -> String {
    use rlm_orchestrator::events::PlanStage;
    let id = &record.plan_id;
    match &record.stage {
        PlanStage::Priced {
            spec,
            pieces,
            kept,
            calls,
            prompt_tokens,
        } => {
            // A map written as a step (`ctx_map`) has no reduction yet.
            let reduce = spec
                .get("reduce")
                .filter(|reduce| !reduce.is_null())
                .map_or(String::new(), |reduce| {
                    format!(" · reduce {}", format::one_line(&reduce.to_string(), 40))
                });
            format!(
                "plan {id}: {pieces} pieces, {kept} kept, {calls} calls, about {prompt_tokens} prompt tokens · map {}{reduce}",
                format::one_line(&spec["map"].to_string(), 80),
            )
        }
        PlanStage::Refused { reason } => format!("plan {id} refused: {reason}"),
        PlanStage::Leaf {
            index,
            start,
            end,
            duration_ms,
            result,
            failed,
        } => format!(
            "  leaf {index} · bytes {start}–{end} · {duration_ms} ms {} {}",
            if *failed { "✗" } else { "→" },
            format::one_line(result, 100)
        ),
        PlanStage::Done {
            answer,
            results,
            duration_ms,
        } => format!(
            "plan {id} → {} ({duration_ms} ms; each piece's result in `{results}`)",
            format::one_line(answer, 120)
        ),
    }
}

/// Where a final answer came from, in words: `final_var`, `submit, forced`, `forced`…
fn answer_label(record: &rlm_orchestrator::events::FinalRecord) -> String {
    use rlm_orchestrator::events::AnswerSource;
    match (record.source, record.forced) {
        (AnswerSource::Forced, _) => "forced".to_owned(),
        (source, true) => format!("{source}, forced"),
        (source, false) => source.to_string(),
    }
}

fn cost(cost_usd: Option<f64>) -> String {
    match cost_usd {
        Some(c) if c >= 0.01 => format!("${c:.2}"),
        Some(c) => format!("${c:.4}"),
        None => "-".to_owned(),
    }
}

/// `288 ms`, `3.1 s`, `2 min 05 s`.
fn duration(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms} ms"),
        1000..=59_999 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {:02} s", ms / 60_000, ms / 1000 % 60),
    }
}

/// `1 iteration`, `2 iterations`.
fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Thousands separated by a thin space: `12 345`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('\u{2009}');
        }
        out.push(c);
    }
    out
}

/// The first `max` characters of `text` on one line, control characters escaped.
fn preview(text: &str, max: usize) -> String {
    let flat = format::flatten_whitespace(text);
    // The ellipsis counts: a cut preview is `max` characters in all.
    let shown = if flat.chars().count() > max {
        format::clip(&flat, max.saturating_sub(1))
    } else {
        flat
    };
    output::escape_controls(&shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(cost(None), "-");
        assert_eq!(cost(Some(0.001234)), "$0.0012");
        assert_eq!(cost(Some(1.5)), "$1.50");
        assert_eq!(duration(288), "288 ms");
        assert_eq!(duration(3_140), "3.1 s");
        assert_eq!(duration(125_000), "2 min 05 s");
        assert_eq!(thousands(7), "7");
        assert_eq!(thousands(7008), "7\u{2009}008");
        assert_eq!(thousands(1_234_567), "1\u{2009}234\u{2009}567");
    }

    #[test]
    fn previews_are_one_short_line() {
        assert_eq!(preview("a\n b\tc", 10), "a b c");
        assert_eq!(preview("abcdefghij", 5), "abcd…");
        assert_eq!(preview("x\u{1b}[31m", 10), "x\\u{1b}[31m");
    }
}

//! `rlm-orchestrate runs prune`: removes what ended runs left in the store.
//!
//! A run copies its context into the store (variables `run-<id>-context…`, and a
//! `repl` session its later `run-<n>-slot-…` contexts, all in scope `session:<id>`,
//! `<id>` being the session's first run) so its REPL, tools and sub-agents can read
//! it by path. Nothing removed those copies: a store used daily grew by its contexts'
//! size every run. `prune` removes the variables of sessions that are over — no live
//! orchestrator, nothing written for `--older-than` — and, with `--traces`, the trace
//! directories of such runs. Results, cache entries and the user's own variables are
//! left alone. First it ends what runs killed together with their watchdog left
//! running ([`super::leftovers`]).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use rlm_context_store::{ListFilter, Store, StoreError, StoreOptions, VariableRef};
use rlm_orchestrator::format;
use rlm_orchestrator::trace::{list_runs, RunSummary};

use crate::cli::runs::PruneArgs;
use crate::cli::GlobalArgs;

/// Scope prefix of the variables a session (a run and, in `repl`, its later queries)
/// loads its contexts into.
const SESSION_SCOPE_PREFIX: &str = "session:";

/// Runs `runs prune`.
pub fn prune(global: &GlobalArgs, args: &PruneArgs, out: &mut dyn Write) -> Result<()> {
    let data_dir = &global.data_dir;
    if !data_dir.exists() {
        writeln!(
            out,
            "nothing to prune: {} does not exist",
            data_dir.display()
        )?;
        return Ok(());
    }
    // Dead runs' processes, cgroups and temporary directories go whatever their age.
    super::leftovers::reap_all(data_dir, args.dry_run, out)?;
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let cutoff_ms = now_ms.saturating_sub(args.older_than.as_millis() as u64);
    let listing = list_runs(data_dir)?;
    let runs: BTreeMap<&str, &RunSummary> = listing
        .runs
        .iter()
        .map(|run| (run.run_id.as_str(), run))
        .collect();
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };

    let store = Store::open_with(data_dir, StoreOptions::default())
        .with_context(|| format!("failed to open the context store in {}", data_dir.display()))?;
    let mut sessions: BTreeMap<String, Vec<VariableRef>> = BTreeMap::new();
    for reference in store.list(&ListFilter::default()) {
        if let Some(id) = reference.scope.strip_prefix(SESSION_SCOPE_PREFIX) {
            sessions.entry(id.to_owned()).or_default().push(reference);
        }
    }
    let (mut variables, mut bytes) = (0usize, 0u64);
    for (id, refs) in &sessions {
        let newest = refs.iter().map(|r| r.created_at).max().unwrap_or(0);
        let run = runs.get(id.as_str()).copied();
        if newest > cutoff_ms || run.is_some_and(|run| in_use(run, cutoff_ms)) {
            continue;
        }
        let size: u64 = refs.iter().map(|r| r.size_bytes).sum();
        for reference in refs {
            if !args.dry_run {
                match store.delete(&reference.key) {
                    Ok(()) | Err(StoreError::NotFound { .. }) => {}
                    Err(e) => {
                        return Err(e).with_context(|| {
                            format!("failed to remove variable {:?}", reference.key)
                        })
                    }
                }
            }
        }
        variables += refs.len();
        bytes += size;
        let plural = if refs.len() == 1 { "" } else { "s" };
        writeln!(
            out,
            "{verb} {} context variable{plural} ({}) of run {id}",
            refs.len(),
            format::human_bytes(size)
        )?;
    }

    let mut traces = 0usize;
    if args.traces {
        for run in &listing.runs {
            if in_use(run, cutoff_ms) || newest_mtime_ms(&run.dir) > cutoff_ms {
                continue;
            }
            if !args.dry_run {
                remove_trace(&run.dir)?;
            }
            traces += 1;
            writeln!(out, "{verb} the trace of run {}", run.run_id)?;
        }
    }
    let plural = if variables == 1 { "" } else { "s" };
    let mut summary = format!(
        "{verb} {variables} context variable{plural} ({})",
        format::human_bytes(bytes)
    );
    if args.traces {
        let plural = if traces == 1 { "" } else { "s" };
        summary.push_str(&format!(" and {traces} trace{plural}"));
    }
    writeln!(out, "{summary}")?;
    Ok(())
}

/// True while `run` (or the session it started) may still use what it stored: it
/// has not ended and its orchestrator lives, its orchestrator process still runs (a
/// `repl` session outlives its first query), or its trace changed recently.
fn in_use(run: &RunSummary, cutoff_ms: u64) -> bool {
    run.is_running()
        || run.pid.is_some_and(orchestrator_alive)
        || newest_mtime_ms(&run.dir) > cutoff_ms
}

/// Whether `pid` is a live `rlm-orchestrate` (a recycled pid of another program is not).
fn orchestrator_alive(pid: u32) -> bool {
    let cmdline = PathBuf::from("/proc").join(pid.to_string()).join("cmdline");
    fs::read(cmdline).is_ok_and(|bytes| {
        let program = bytes.split(|b| *b == 0).next().unwrap_or_default();
        let name = program.rsplit(|b| *b == b'/').next().unwrap_or_default();
        name.starts_with(b"rlm-orchestrate")
    })
}

/// The newest modification time of the files directly in `dir`, in ms since the epoch
/// (0 when there are none).
fn newest_mtime_ms(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|e| e.metadata().ok()?.modified().ok())
        .filter_map(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as u64)
        .max()
        .unwrap_or(0)
}

/// Deletes a run's trace directory.
fn remove_trace(dir: &Path) -> Result<()> {
    fs::remove_dir_all(dir)
        .with_context(|| format!("failed to remove the trace directory {}", dir.display()))
}

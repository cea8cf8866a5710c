//! Ending what dead runs left behind (issue 49, item 11): a run `kill -9`ed together
//! with its watchdog leaves its daemons, its cgroup and its kernels' temporary
//! directories, and only its live record under `<data-dir>/live/` says where. `runs
//! prune` reaps every such run; each run tree's root reaps a few as it starts. What is
//! dead and what may be touched is `rlm_process::reap_dead_runs`'s to decide.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use rlm_process::{reap_dead_runs, ReapOptions, ReapedRun};

/// Dead runs a starting run reaps at most (the rest wait for the next start or prune).
const AT_START: usize = 4;

/// At the start of a run tree: reaps up to [`AT_START`] dead runs of `data_dir`,
/// saying what it ended. Never fails the run.
pub fn reap_at_start(data_dir: &Path) {
    let options = ReapOptions {
        limit: Some(AT_START),
        dry_run: false,
    };
    match reap_dead_runs(data_dir, options) {
        Ok(reaped) => {
            for run in reaped.runs.iter().filter(|run| run.left_anything()) {
                tracing::warn!("{}", describe(run, "ended"));
            }
            for refused in &reaped.refused {
                tracing::debug!(%refused, "live-run record not used");
            }
        }
        Err(error) => tracing::debug!(%error, "dead runs not looked for"),
    }
}

/// For `runs prune`: reaps every dead run (or, with `dry_run`, says what it would),
/// one line for each that had left something, and warns about records it refused.
/// Returns how many it found.
pub fn reap_all(data_dir: &Path, dry_run: bool, out: &mut dyn Write) -> Result<usize> {
    let options = ReapOptions {
        limit: None,
        dry_run,
    };
    let reaped = reap_dead_runs(data_dir, options)
        .with_context(|| format!("failed to look for dead runs in {}", data_dir.display()))?;
    for refused in &reaped.refused {
        tracing::warn!("{refused}");
    }
    let verb = if dry_run { "would end" } else { "ended" };
    for run in reaped.runs.iter().filter(|run| run.left_anything()) {
        writeln!(out, "{}", describe(run, verb))?;
    }
    Ok(reaped.runs.len())
}

/// One line about a reaped run: `ended 4 processes, the cgroup and 1 temporary
/// directory of the dead run 123.t456 (pid 123, killed with its watchdog)`.
fn describe(run: &ReapedRun, verb: &str) -> String {
    let plural = |n: usize, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    let mut parts = vec![plural(run.processes, "process", "processes")];
    if run.cgroup.is_some() {
        parts.push("the cgroup".to_owned());
    }
    parts.push(plural(
        run.temp_dirs.len(),
        "temporary directory",
        "temporary directories",
    ));
    let last = parts.pop().unwrap_or_default();
    let what = if parts.is_empty() {
        last
    } else {
        format!("{} and {last}", parts.join(", "))
    };
    format!(
        "{verb} {what} of the dead run {} (pid {}, killed with its watchdog)",
        run.cookie, run.owner_pid
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reaped_run_reads_as_one_line() {
        let mut run = ReapedRun {
            cookie: "12.t34".into(),
            owner_pid: 12,
            processes: 4,
            cgroup: Some("/sys/fs/cgroup/rlm-12.t34".into()),
            temp_dirs: vec!["/tmp/rlm-kernel-a".into()],
        };
        assert_eq!(
            describe(&run, "ended"),
            "ended 4 processes, the cgroup and 1 temporary directory of the dead run 12.t34 (pid 12, killed with its watchdog)"
        );
        run.cgroup = None;
        run.processes = 1;
        run.temp_dirs.clear();
        assert_eq!(
            describe(&run, "would end"),
            "would end 1 process and 0 temporary directories of the dead run 12.t34 (pid 12, killed with its watchdog)"
        );
    }
}

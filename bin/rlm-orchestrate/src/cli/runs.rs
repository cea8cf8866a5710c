//! The arguments of `runs` and its sub-commands (list, show, prune), and the parsing
//! of a `--older-than` age.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::InvalidValue;

/// `runs`: one of its sub-commands.
#[derive(Debug, Args)]
pub struct RunsArgs {
    /// What to do with the runs.
    #[command(subcommand)]
    pub command: RunsCommand,
}

/// The `runs` sub-commands.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs, newest first: id, start, status, iterations, sub-agents, tokens,
    /// cost, task and answer.
    #[command(after_help = "\
Examples:
  rlm-orchestrate runs list
  rlm-orchestrate runs list --all          # nested runs too, beneath their parents
  rlm-orchestrate runs list --json | jq -r '.[0].run_id'

Only top-level runs are listed unless --all is given. A run without summary.json is
still going (status running) or ended without one (status unknown, e.g. killed); its
numbers are added up from its events. Unreadable trace lines are skipped with a warning.")]
    List(ListArgs),

    /// Show a run's trace: each step's model text, code and output, model calls,
    /// sub-agents and, indented beneath them, their own runs.
    #[command(after_help = "\
Examples:
  rlm-orchestrate runs show 20261122-094312-3fa9c1
  rlm-orchestrate runs show 20261122-0943          # any unique prefix of a run id
  rlm-orchestrate runs show 20261122-0943 --full   # every line of every output
  rlm-orchestrate runs show 20261122-0943 --json | jq '.steps | length'
  rlm-orchestrate runs show 20261122-0943 --html run.html
  rlm-orchestrate runs show 20261122-0943 --html - > run.html

--html writes one self-contained page (inline CSS and JavaScript, no network requests;
readable with JavaScript off): a header with the task, status, answer, tokens and cost,
the tree of runs and sub-agents, and every step, collapsible.
Exits 4 when no run matches, 2 when the prefix matches several.")]
    Show(ShowArgs),

    /// Remove what ended runs left behind: the copies of their contexts in the store
    /// (scope `session:<run-id>`) and, with --traces, their trace directories; first,
    /// end what runs killed together with their watchdog left running.
    #[command(after_help = "\
Examples:
  rlm-orchestrate runs prune                      # sessions over for a week
  rlm-orchestrate runs prune --older-than 1d --dry-run
  rlm-orchestrate runs prune --older-than 0 --traces

A session is over when its orchestrator is gone and nothing was written for
--older-than (default 7d): neither its trace nor its context variables. Sub-agent
results, cache entries (scope cache) and variables you set yourself are kept; remove
those with `vars rm` or `vars clear`.

A run `kill -9`ed together with its watchdog leaves its processes, its cgroup and its
kernels' temporary directories; its record in <data-dir>/live/ says where. Whatever
--older-than says, prune ends and removes them (--dry-run: says what it would); each
new run also does so for a few such runs as it starts.")]
    Prune(PruneArgs),
}

/// `runs list` options.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Include nested runs (sub_rlm children), each beneath its parent.
    #[arg(long)]
    pub all: bool,

    /// Print a JSON array of run summaries.
    #[arg(long)]
    pub json: bool,

    /// Show at most N top-level runs.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

/// `runs show` options.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The run id, or a unique prefix of one (see `runs list`).
    pub run: String,

    /// Print the whole trace as one JSON object (nested runs included).
    #[arg(long, conflicts_with = "html")]
    pub json: bool,

    /// Write a self-contained HTML page of the trace to FILE (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Print texts, code and outputs in full instead of their first lines.
    #[arg(long)]
    pub full: bool,
}

/// `runs prune` options.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Only what has not changed for this long: `30m`, `12h`, `7d`, `90s`, or `0`
    /// for everything that is over.
    #[arg(long, value_name = "AGE", default_value = "7d", value_parser = parse_age)]
    pub older_than: Duration,

    /// Also delete the trace directories (`runs/<run-id>/`) of ended runs that old.
    #[arg(long)]
    pub traces: bool,

    /// Say what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Parses `90s`, `30m`, `12h`, `7d` or a bare number of seconds.
fn parse_age(text: &str) -> Result<Duration, InvalidValue> {
    let text = text.trim();
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let seconds: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(InvalidValue::new(format!(
                "unknown unit {unit:?}: use s, m, h or d (e.g. 7d)"
            )))
        }
    };
    let count: u64 = digits.parse().map_err(|_| {
        InvalidValue::new(format!(
            "{text:?} is not an age: use e.g. 90s, 30m, 12h or 7d"
        ))
    })?;
    count
        .checked_mul(seconds)
        .map(Duration::from_secs)
        .ok_or_else(|| InvalidValue::new(format!("{text:?} is too long an age")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse_with_units() {
        assert_eq!(parse_age("0"), Ok(Duration::ZERO));
        assert_eq!(parse_age("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_age("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_age("12h"), Ok(Duration::from_secs(43_200)));
        assert_eq!(parse_age("7d"), Ok(Duration::from_secs(604_800)));
        assert!(parse_age("7w").is_err());
        assert!(parse_age("-1d").is_err());
        assert!(parse_age("").is_err());
    }
}

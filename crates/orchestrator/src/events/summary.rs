//! `summary.json`: what a run reports about itself when it ends, written and read by
//! the one type [`RunSummaryFile`].
//!
//! The file carries a `formatVersion`. Version 1 is this layout; files written before
//! the field existed (the same fields, no version) read as version 0. A reader meeting a
//! newer version still reads the fields it knows and ignores the others.

use rlm_context_store::private_fs::write_private_atomic;
use rlm_context_store::Durability;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{RunStatus, TraceError};
use crate::ids::{AgentId, RunId};
use rlm_protocol::RunTotals;

/// Name of the summary in a run directory.
pub const SUMMARY_FILE: &str = "summary.json";

/// The version of `summary.json` this build writes.
pub const SUMMARY_FORMAT_VERSION: u32 = 1;

/// `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummaryFile {
    /// Layout version ([`SUMMARY_FORMAT_VERSION`]; 0 for files written before it).
    #[serde(rename = "formatVersion", default)]
    pub format_version: u32,
    /// The run.
    pub run_id: RunId,
    /// The run's process.
    pub agent_id: AgentId,
    /// The process that started it, for nested runs.
    pub parent_id: Option<AgentId>,
    /// 0 for a root run.
    pub depth: u32,
    /// How it ended.
    pub status: RunStatus,
    /// The answer, when it has one.
    pub answer: Option<String>,
    /// Why it failed or was cancelled.
    pub error: Option<String>,
    /// Iterations used.
    pub iterations: u32,
    /// Model calls, sub-agents, tokens and cost, descendants included (top-level
    /// fields on the wire).
    #[serde(flatten)]
    pub totals: RunTotals,
    /// Wall time.
    pub duration_ms: u64,
    /// Set when some of the run's events could not be written (a full disk): how
    /// many, and why. Readers then take the run's state as unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_incomplete: Option<String>,
}

impl RunSummaryFile {
    /// Writes `<dir>/summary.json` atomically (a private temp file, then a rename), so
    /// a reader never sees half a summary.
    pub fn write(&self, dir: &Path) -> Result<(), TraceError> {
        let path = dir.join(SUMMARY_FILE);
        let written = serde_json::to_vec_pretty(self)
            .map_err(io::Error::other)
            .and_then(|text| write_private_atomically(&path, &text));
        written.map_err(|source| TraceError::new("write", path, source))
    }

    /// Parses the text of a `summary.json`.
    pub fn parse(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// Writes `bytes` to `path` through a private (0600) temp file beside it and a rename,
/// so a reader never sees half of it: the run directory's summary and answer. Not
/// fsynced: a trace is a record of the run, rewritten at its end.
pub(crate) fn write_private_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_private_atomic(path, bytes, Durability::Bulk).map_err(|e| e.source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlm_protocol::Usage;
    use std::fs;

    fn sample() -> RunSummaryFile {
        RunSummaryFile {
            format_version: SUMMARY_FORMAT_VERSION,
            run_id: RunId::from("20261122-094312-3fa9c1"),
            agent_id: AgentId::parse("root-20261122-094312-3fa9c1").unwrap(),
            parent_id: None,
            depth: 0,
            status: RunStatus::Forced,
            answer: Some("42".into()),
            error: None,
            iterations: 3,
            totals: RunTotals {
                llm_calls: 5,
                sub_agents: 1,
                usage: Usage {
                    prompt_tokens: 120,
                    completion_tokens: 30,
                },
                cost_usd: Some(0.25),
            },
            duration_ms: 812,
            trace_incomplete: None,
        }
    }

    #[test]
    fn the_file_round_trips_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        sample().write(dir.path()).unwrap();
        let path = dir.path().join(SUMMARY_FILE);
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"formatVersion\": 1"), "{text}");
        assert_eq!(RunSummaryFile::parse(&text).unwrap(), sample());
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        insta::assert_snapshot!(text);
    }

    /// A summary as the version before `formatVersion` wrote it still reads.
    #[test]
    fn a_summary_written_before_format_versions_reads() {
        let old = r#"{
  "agent_id": "root-13003",
  "answer": "billing: 512 errors",
  "cost_usd": null,
  "depth": 0,
  "duration_ms": 1841,
  "error": null,
  "iterations": 4,
  "llm_calls": 4,
  "parent_id": null,
  "run_id": "20261122-094312-3fa9c1",
  "status": "answered",
  "sub_agents": 4,
  "usage": {"completion_tokens": 210, "prompt_tokens": 5120}
}"#;
        let file = RunSummaryFile::parse(old).unwrap();
        assert_eq!(file.format_version, 0);
        assert_eq!(file.status, RunStatus::Answered);
        assert_eq!(file.totals.usage.total(), 5330);
        assert_eq!(file.agent_id.as_str(), "root-13003");
    }
}

//! Identifiers of runs and agents, as types.
//!
//! A run id names a trace directory (`runs/<run-id>/`); an agent id names a process of
//! the tree (a run's own process, a nested run, an external agent) and appears in
//! variable scopes (`agent:<id>`), result keys (`sub-result-<id>`), file names
//! (`agents/<id>/prompt.txt`) and the `RLM_AGENT_ID` / `RLM_PARENT_ID` of children.
//! Keeping them apart in the type system means a run id can never be passed where an
//! agent id belongs.
//!
//! Both are strings on disk and on the wire (`#[serde(transparent)]`), so traces and
//! variables written by other versions read back unchanged.

use std::borrow::Borrow;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::format::UtcTime;
use crate::time::now_ms;

/// Longest agent id (it is part of file names and variable keys).
const MAX_AGENT_ID_CHARS: usize = 128;

/// Prefix of the agent id of a root run: `root-<run id>`.
const ROOT_AGENT_PREFIX: &str = "root-";

/// The id of one run: its UTC start time (so ids sort by start) and a random suffix,
/// e.g. `20261122-094312-3fa9c1`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(String);

impl RunId {
    /// A fresh run id for a run starting now.
    pub fn generate() -> Self {
        let t = UtcTime::from_ms(now_ms());
        let suffix = &uuid::Uuid::new_v4().simple().to_string()[..6];
        Self(format!(
            "{:04}{:02}{:02}-{:02}{:02}{:02}-{suffix}",
            t.year, t.month, t.day, t.hour, t.minute, t.second
        ))
    }

    /// The id as written in a trace (any string read back from disk is kept as is).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<String> for RunId {
    /// Wraps an id read from a trace or given by a user (`runs show ID`).
    fn from(id: String) -> Self {
        Self(id)
    }
}

impl From<&str> for RunId {
    fn from(id: &str) -> Self {
        Self(id.to_owned())
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for RunId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for RunId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// The id of a process of the tree: 1–128 characters of `[A-Za-z0-9._-]`, not
/// starting with `.`, so it is safe in file names and variable keys.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AgentId(String);

/// An agent id that cannot be used in a file name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid agent id {id:?}: use 1-128 characters from [A-Za-z0-9._-], not starting with '.'")]
pub struct InvalidAgentId {
    /// The rejected id.
    pub id: String,
}

impl AgentId {
    /// A fresh id for a sub-agent: 12 random hex digits.
    pub fn generate() -> Self {
        let mut id = uuid::Uuid::new_v4().simple().to_string();
        id.truncate(12);
        Self(id)
    }

    /// The agent id of a root run (one not started by another process of the tree):
    /// `root-<run id>`, unique across runs, unlike a process id.
    pub fn root(run_id: &RunId) -> Self {
        Self(format!("{ROOT_AGENT_PREFIX}{run_id}"))
    }

    /// Checks an id given from outside (`RLM_AGENT_ID`, a trace, a test).
    pub fn parse(id: &str) -> Result<Self, InvalidAgentId> {
        let valid = !id.is_empty()
            && id.len() <= MAX_AGENT_ID_CHARS
            && !id.starts_with('.')
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if valid {
            Ok(Self(id.to_owned()))
        } else {
            Err(InvalidAgentId { id: id.to_owned() })
        }
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The scope of variables this agent writes and of its sub-agents' results:
    /// `agent:<id>`.
    pub fn scope(&self) -> String {
        format!("agent:{}", self.0)
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for AgentId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for AgentId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_ids_must_be_file_name_safe() {
        for good in [
            "a1",
            "0f3e9c2b7a1d",
            "x.y_z-1",
            "root-20261122-094312-3fa9c1",
        ] {
            assert!(AgentId::parse(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "a/b",
            "a b",
            "é",
            &"x".repeat(129),
        ] {
            assert!(AgentId::parse(bad).is_err(), "{bad}");
        }
        let id = AgentId::generate();
        assert_eq!(id.as_str().len(), 12);
        assert!(AgentId::parse(id.as_str()).is_ok());
        assert_ne!(id, AgentId::generate());
    }

    #[test]
    fn a_root_is_named_by_its_run_not_its_pid() {
        let run = RunId::generate();
        let root = AgentId::root(&run);
        assert_eq!(root.as_str(), format!("root-{run}"));
        assert!(AgentId::parse(root.as_str()).is_ok());
        assert_eq!(root.scope(), format!("agent:root-{run}"));
        assert_ne!(AgentId::root(&RunId::generate()), root);
    }

    #[test]
    fn run_ids_sort_by_start_and_serialise_as_strings() {
        let id = RunId::generate();
        assert_eq!(id.as_str().len(), "20261122-094312-3fa9c1".len());
        assert_eq!(
            serde_json::to_string(&id).unwrap(),
            format!("\"{}\"", id.as_str())
        );
        let back: RunId = serde_json::from_str("\"20251122-093959-3fa9c1\"").unwrap();
        assert_eq!(back.as_str(), "20251122-093959-3fa9c1");
    }
}

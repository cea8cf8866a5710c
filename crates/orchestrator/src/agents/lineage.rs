//! Where a process stands in the tree of runs, and the environment variables that
//! tell a child about it — declared once, for nested runs and external agents alike.
//!
//! A parent gives every child its data directory, its agent id, its parent's id, its
//! depth and the variable its answer goes to ([`EnvVars`]). A nested `rlm-orchestrate
//! run` reads them back with [`Lineage::from_env`]; an external agent uses them to
//! store its answer (`rlm-orchestrate vars set "$RLM_RESULT_KEY" …`). Besides these,
//! a child inherits only [`rlm_process::inherited_environment`] and the names the user
//! allowed: never an API key unless configured.

use std::ffi::OsString;
use std::path::Path;

use crate::ids::{AgentId, InvalidAgentId};

pub use rlm_protocol::EnvVars;

/// Prefix of the variable holding a sub-agent's answer: `sub-result-<agent id>`.
pub const RESULT_KEY_PREFIX: &str = "sub-result-";

/// The key of an agent's result variable: `sub-result-<agent_id>`.
pub fn result_key(agent_id: &AgentId) -> String {
    format!("{RESULT_KEY_PREFIX}{agent_id}")
}

/// A process's place in the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineage {
    /// This process's agent id.
    pub agent_id: AgentId,
    /// The agent id of the run that started it; `None` for a root run.
    pub parent_id: Option<AgentId>,
    /// 0 for a root run.
    pub depth: u32,
    /// Where this process's answer goes (`sub-result-<agent id>`), when a parent waits
    /// for it.
    pub result_key: Option<String>,
}

/// `RLM_*` lineage variables that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineageError {
    /// `RLM_AGENT_ID` or `RLM_PARENT_ID` is not a valid agent id.
    #[error("failed to read {variable}: {source}; unset it unless a parent run set it")]
    AgentId {
        /// The variable.
        variable: &'static str,
        /// Why the id is invalid.
        #[source]
        source: InvalidAgentId,
    },
    /// `RLM_DEPTH` is not a number.
    #[error("failed to read RLM_DEPTH={value:?}: it must be a whole number ≥ 0; unset it unless a parent run set it")]
    Depth {
        /// What it holds.
        value: String,
    },
}

impl Lineage {
    /// The lineage of a root run whose agent id is `agent_id`.
    pub fn root(agent_id: AgentId) -> Self {
        Self {
            agent_id,
            parent_id: None,
            depth: 0,
            result_key: None,
        }
    }

    /// The lineage a parent gave this process through [`EnvVars`], or `None` when
    /// `RLM_AGENT_ID` is not set (a run started by a user).
    pub fn from_env() -> Result<Option<Self>, LineageError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`Lineage::from_env`] over any lookup (tests).
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, LineageError> {
        let Some(agent_id) = lookup(EnvVars::RLM_AGENT_ID) else {
            return Ok(None);
        };
        let id = |variable: &'static str, value: &str| {
            AgentId::parse(value).map_err(|source| LineageError::AgentId { variable, source })
        };
        let agent_id = id(EnvVars::RLM_AGENT_ID, &agent_id)?;
        let parent_id = lookup(EnvVars::RLM_PARENT_ID)
            .map(|value| id(EnvVars::RLM_PARENT_ID, &value))
            .transpose()?;
        let depth = match lookup(EnvVars::RLM_DEPTH) {
            None => 0,
            Some(value) => value
                .trim()
                .parse()
                .map_err(|_| LineageError::Depth { value })?,
        };
        Ok(Some(Self {
            agent_id,
            parent_id,
            depth,
            result_key: lookup(EnvVars::RLM_RESULT_KEY).filter(|key| !key.is_empty()),
        }))
    }

    /// The lineage of a child `child_id` started by this process: one level deeper,
    /// answering into `sub-result-<child_id>`.
    pub fn child(&self, child_id: AgentId) -> Self {
        Self {
            result_key: Some(result_key(&child_id)),
            parent_id: Some(self.agent_id.clone()),
            depth: self.depth + 1,
            agent_id: child_id,
        }
    }

    /// The [`EnvVars`] describing this lineage to the process it belongs to, over the
    /// store in `data_dir` (absolute).
    pub fn env_vars(&self, data_dir: &Path) -> Vec<(OsString, OsString)> {
        let mut vars = vec![
            (
                EnvVars::RLM_DATA_DIR.into(),
                data_dir.as_os_str().to_owned(),
            ),
            (EnvVars::RLM_AGENT_ID.into(), self.agent_id.as_str().into()),
            (EnvVars::RLM_DEPTH.into(), self.depth.to_string().into()),
        ];
        if let Some(parent) = &self.parent_id {
            vars.push((EnvVars::RLM_PARENT_ID.into(), parent.as_str().into()));
        }
        if let Some(key) = &self.result_key {
            vars.push((EnvVars::RLM_RESULT_KEY.into(), key.into()));
        }
        vars
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn a_child_reads_back_what_its_parent_wrote() {
        let root = Lineage::root(AgentId::parse("root-x").unwrap());
        let child = root.child(AgentId::parse("c1").unwrap());
        assert_eq!(child.depth, 1);
        assert_eq!(child.result_key.as_deref(), Some("sub-result-c1"));
        let vars: Vec<(String, String)> = child
            .env_vars(Path::new("/data"))
            .into_iter()
            .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
            .collect();
        let pairs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert!(pairs.contains(&("RLM_DATA_DIR", "/data")));
        let back = Lineage::from_lookup(lookup(&pairs)).unwrap().unwrap();
        assert_eq!(back, child);
    }

    #[test]
    fn no_agent_id_is_a_root_and_bad_values_are_named() {
        assert_eq!(Lineage::from_lookup(lookup(&[])).unwrap(), None);
        let bad_id = Lineage::from_lookup(lookup(&[("RLM_AGENT_ID", "a/b")])).unwrap_err();
        assert!(bad_id.to_string().contains("RLM_AGENT_ID"), "{bad_id}");
        let bad_depth =
            Lineage::from_lookup(lookup(&[("RLM_AGENT_ID", "a"), ("RLM_DEPTH", "two")]))
                .unwrap_err();
        assert!(
            bad_depth.to_string().contains("RLM_DEPTH=\"two\""),
            "{bad_depth}"
        );
    }
}

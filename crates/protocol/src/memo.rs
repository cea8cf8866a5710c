//! The memoised sub-call record: which kind of sub-call an answer kept in the store's
//! `cache` scope answers (`--no-cache` turns the memo off).

use serde::{Deserialize, Serialize};

/// A sub-call whose answer can be memoised in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CachedCall {
    /// `llm_query` (and `summarize`, `sub_rlm` at max depth: plain sub-model calls).
    LlmQuery,
    /// A nested run.
    SubRlm,
    /// An external agent.
    SpawnAgent,
}

impl CachedCall {
    /// The call as written in traces and cache entries.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LlmQuery => "llm_query",
            Self::SubRlm => "sub_rlm",
            Self::SpawnAgent => "spawn_agent",
        }
    }
}

impl std::fmt::Display for CachedCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

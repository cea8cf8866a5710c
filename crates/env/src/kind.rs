//! Which environment a run uses (`--env`): the one word the command line, the trace
//! and the prompts share.

use serde::{Deserialize, Serialize};

/// Which environment runs the model's code (`--env`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnvKind {
    /// A persistent `python3` kernel (`rlm-env-python`).
    #[default]
    Python,
    /// Embedded JavaScript (QuickJS) with no file system or network (`rlm-env-js`).
    Js,
    /// No code: bounded micro-tools called through tool calling (`rlm-env-tools`).
    Tools,
    /// No code: each step is one typed combinator plan (`ctx_map_reduce`), run by the
    /// orchestrator (`rlm-env-tools`, docs/plans.md).
    Plan,
}

impl EnvKind {
    /// The name used on the command line and in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Python => "python",
            Self::Js => "js",
            Self::Tools => "tools",
            Self::Plan => "plan",
        }
    }
}

impl std::fmt::Display for EnvKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

//! The environment variables a parent sets for a child process (a nested run, an
//! external agent, a REPL kernel), each named and documented once.

/// The environment variables a parent sets for a child, each documented once.
pub struct EnvVars;

impl EnvVars {
    /// Absolute path of the data directory (the store): where the child reads its
    /// context variables and writes its result, e.g. with `rlm-orchestrate vars …`.
    pub const RLM_DATA_DIR: &'static str = "RLM_DATA_DIR";
    /// The child's own agent id (`[A-Za-z0-9._-]`, at most 128 characters).
    pub const RLM_AGENT_ID: &'static str = "RLM_AGENT_ID";
    /// The agent id of the run that started the child; the child's result is stored
    /// in scope `agent:<parent id>`.
    pub const RLM_PARENT_ID: &'static str = "RLM_PARENT_ID";
    /// The child's depth in the tree (the root run is 0).
    pub const RLM_DEPTH: &'static str = "RLM_DEPTH";
    /// The variable the child's answer goes to: `sub-result-<agent id>`. A nested run
    /// that finds it set writes its result there when it ends.
    pub const RLM_RESULT_KEY: &'static str = "RLM_RESULT_KEY";
    /// Absolute path of that variable's file, for agents that write it by hand.
    pub const RLM_RESULT_FILE: &'static str = "RLM_RESULT_FILE";
    /// Absolute path of the `rlm-orchestrate` executable, for agents whose shell does
    /// not keep our `PATH` (`"$RLM_BIN" vars get KEY --lines 1:100`).
    pub const RLM_BIN: &'static str = "RLM_BIN";

    /// Every variable of this list, for filters and documentation.
    pub const ALL: [&'static str; 7] = [
        Self::RLM_DATA_DIR,
        Self::RLM_AGENT_ID,
        Self::RLM_PARENT_ID,
        Self::RLM_DEPTH,
        Self::RLM_RESULT_KEY,
        Self::RLM_RESULT_FILE,
        Self::RLM_BIN,
    ];
}

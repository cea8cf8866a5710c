//! Sub-agents that are external programs: `claude -p`, `codex exec`, `llm -m …`, a
//! shell script — anything started from the `--agent-cmd` template.
//!
//! An agent is given a task and *references* to context variables (file paths in the
//! data directory), never the data itself, so its prompt stays a few hundred bytes
//! whatever the context's size ([`agent_prompt`]). It runs as a supervised child
//! process ([`rlm_process::run_supervised`]): its own process group, a cleared
//! environment with the `RLM_*` variables and only the names the user allowed, capped
//! output, a timeout, cancellation, and no process left behind. Its answer is the
//! variable `sub-result-<id>` if it stored one, else its stdout; failures become an
//! error object. Either way `sub-result-<id>` exists in the store afterwards
//! ([`run_external_agent`]).

mod command;
mod external;
mod outcome;
mod prompt;

pub use command::{AgentCommand, Substitutions, MAX_ARG_BYTES};
pub use external::{
    agent_environment, inherited_environment, new_agent_id, result_key, run_external_agent,
    validate_agent_id, AgentOutcome, ExternalAgentSpec, AGENTS_DIR, PROMPT_FILE_NAME,
};
pub use outcome::OUTPUT_TRUNCATED_MARKER;
pub use prompt::{agent_prompt, ref_line, AgentRef, CONTEXT_HEADING, HOW_TO_ANSWER_HEADING};

/// Prefix of the variable holding an agent's answer: `sub-result-<agent id>`.
pub const RESULT_KEY_PREFIX: &str = "sub-result-";

/// Environment variables an agent is given (besides the inherited basics and the
/// names passed with `--agent-env`).
pub mod env_vars {
    /// Absolute path of the data directory (for `rlm-orchestrate vars …`).
    pub const DATA_DIR: &str = "RLM_DATA_DIR";
    /// The agent's id.
    pub const AGENT_ID: &str = "RLM_AGENT_ID";
    /// The id of the run or agent that started it.
    pub const PARENT_ID: &str = "RLM_PARENT_ID";
    /// The agent's depth in the tree of runs.
    pub const DEPTH: &str = "RLM_DEPTH";
    /// The variable to store the answer in: `sub-result-<id>`.
    pub const RESULT_KEY: &str = "RLM_RESULT_KEY";
    /// Absolute path of that variable's file (for agents writing it by hand).
    pub const RESULT_FILE: &str = "RLM_RESULT_FILE";

    /// Variables copied from the orchestrator's environment when set.
    pub const INHERITED: &[&str] = &[
        "PATH", "HOME", "USER", "LOGNAME", "LANG", "TERM", "TMPDIR", "SHELL",
    ];
    /// Prefixes of variables copied from the orchestrator's environment.
    pub const INHERITED_PREFIXES: &[&str] = &["LC_", "XDG_"];
}

/// Why an agent command could not be used (a configuration error, before any agent
/// runs). Problems while an agent runs are not errors: they are in its outcome.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The template is empty or only whitespace.
    #[error("failed to parse the agent command: it is empty")]
    EmptyTemplate,
    /// The template is not valid shell-words syntax (e.g. an unclosed quote).
    #[error("failed to parse the agent command `{template}`: {source}")]
    Split {
        /// The template.
        template: String,
        /// What the splitter reported.
        #[source]
        source: shell_words::ParseError,
    },
    /// The program (first word) contains a placeholder.
    #[error("failed to parse the agent command `{template}`: the program (first word) cannot contain a placeholder; put {{prompt}}, {{prompt_file}}, {{result_file}} or {{agent_id}} in the arguments")]
    PlaceholderProgram {
        /// The template.
        template: String,
    },
    /// An agent id that cannot be used in a file name.
    #[error(
        "invalid agent id {id:?}: use 1-128 characters from [A-Za-z0-9._-], not starting with '.'"
    )]
    InvalidAgentId {
        /// The id.
        id: String,
    },
}

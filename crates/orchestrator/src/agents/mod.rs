//! Sub-agents: child processes that get references, not data.
//!
//! Two kinds share one lineage ([`Lineage`], [`EnvVars`]) and one answer channel (the
//! variable `sub-result-<id>`): nested `rlm-orchestrate run`s ([`run_child`], for
//! `sub_rlm`) and external programs — `claude -p`, `codex exec`, `llm`, a shell
//! script — started from a preset (`--agent claude`, [`AgentPreset`]) or the
//! `--agent-cmd` template ([`run_external_agent`]).
//!
//! An external agent is given a task and *references* to context variables (file paths in the
//! data directory), never the data itself, so its prompt stays a few hundred bytes
//! whatever the context's size ([`agent_prompt`]). It runs as a supervised child
//! process ([`rlm_process::run_supervised`]): its own process group, a cleared
//! environment with the `RLM_*` variables and only the names the user allowed, capped
//! output, a timeout, cancellation, and no process left behind. Its answer is the
//! variable `sub-result-<id>` if it stored one, else its stdout; failures become an
//! error object. Either way `sub-result-<id>` exists in the store afterwards
//! ([`run_external_agent`]).

mod command;
mod confine;
mod external;
mod lineage;
mod nested;
mod outcome;
mod prepare_error;
mod preset;
mod prompt;
mod stored_result;

pub use command::{render_value, AgentCommand, Substitutions, MAX_ARG_BYTES};
pub use confine::AgentSandbox;
pub use external::{
    agent_environment, run_external_agent, AgentOutcome, ExternalAgentSpec, AGENTS_DIR,
    PROMPT_FILE_NAME,
};
pub use lineage::{result_key, EnvVars, Lineage, LineageError, RESULT_KEY_PREFIX};
pub use nested::{
    child_totals, publish, run_child, ChildOutcome, ChildRequest, ChildSpec, ChildSpecError,
    SubRlmLauncher, CHILD_SPEC_FILE, CHILD_SPEC_FORMAT_VERSION,
};
pub use outcome::OUTPUT_TRUNCATED_MARKER;
pub use preset::{built_in_names, AgentPreset, AgentProgram, PresetError, CUSTOM_PRESET_NAME};
pub use prompt::{
    agent_prompt, ref_line, AgentRef, AnswerChannel, CONTEXT_HEADING, HOW_TO_ANSWER_HEADING,
};

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
}

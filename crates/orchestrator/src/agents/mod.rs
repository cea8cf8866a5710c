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

mod confine;
mod external;
mod lineage;
mod nested;
mod outcome;
mod prepare_error;
mod prompt;
mod stored_result;

pub use crate::agent_cli::{
    built_in_names, render_value, AgentCommand, AgentError, AgentPreset, AgentProgram, PresetError,
    Substitutions, CUSTOM_PRESET_NAME, MAX_ARG_BYTES,
};
pub use confine::AgentSandbox;
pub use external::{
    agent_environment, run_external_agent, Abandonment, AgentOutcome, ExternalAgentSpec,
    AGENTS_DIR, PROMPT_FILE_NAME,
};
pub use lineage::{result_key, EnvVars, Lineage, LineageError, RESULT_KEY_PREFIX};
pub use nested::{
    child_totals, publish, run_child, ChildOutcome, ChildRequest, ChildSpec, ChildSpecError,
    SubRlmLauncher, CHILD_SPEC_FILE, CHILD_SPEC_FORMAT_VERSION,
};
pub use outcome::OUTPUT_TRUNCATED_MARKER;
pub use prompt::{
    agent_prompt, ref_line, AgentRef, AnswerChannel, CONTEXT_HEADING, HOW_TO_ANSWER_HEADING,
};

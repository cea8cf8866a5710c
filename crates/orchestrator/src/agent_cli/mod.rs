//! Agent CLIs as data: the command template language (`--agent-cmd`, [`AgentCommand`])
//! and the presets built on it (`--agent claude|codex|llm`, [`AgentPreset`]).
//!
//! A leaf of the crate: the run settings hold a preset and the sub-agent machinery
//! ([`crate::agents`]) runs it, so neither may be needed here.

mod command;
mod preset;

pub use command::{render_value, split_word, AgentCommand, Substitutions, MAX_ARG_BYTES};
pub use preset::{
    built_in_names, AgentPreset, AgentProgram, PresetError, ProgramOptions, CUSTOM_PRESET_NAME,
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

//! What the loop of one query is told by its run: iterations, output bounds, depth,
//! the prompt's features, the tool protocol, and the correction rules to ask.

use std::sync::Arc;

use crate::corrections::Corrections;
use crate::env::tools::ToolProtocol;

/// Settings of the loop.
#[derive(Clone)]
pub struct LoopSettings {
    /// `--max-iterations`.
    pub max_iterations: u32,
    /// `--max-output-chars`.
    pub max_output_chars: usize,
    /// `--redact-ratio`.
    pub redact_ratio: f64,
    /// `--state-vars`.
    pub state_vars: usize,
    /// This run's depth.
    pub depth: u32,
    /// `--max-depth`.
    pub max_depth: u32,
    /// `--sub-context-chars` (mentioned in the system prompt).
    pub sub_context_chars: usize,
    /// `--output-schema`: SUBMIT payloads must validate.
    pub output_schema: Option<Arc<jsonschema::Validator>>,
    /// `--system-prompt`: replaces the built-in system prompt.
    pub system_prompt: Option<Arc<str>>,
    /// An external agent command is configured (the prompt advertises `spawn_agent`).
    pub agents: bool,
    /// How tool calls travel when the environment offers tools (`--tool-protocol`).
    pub tool_protocol: ToolProtocol,
    /// `--corrections`: the rules asked at the loop's hook points.
    pub corrections: Corrections,
}

impl std::fmt::Debug for LoopSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopSettings")
            .field("max_iterations", &self.max_iterations)
            .field("depth", &self.depth)
            .field("max_depth", &self.max_depth)
            .field("tool_protocol", &self.tool_protocol)
            .field("corrections", &self.corrections.to_list())
            .finish_non_exhaustive()
    }
}

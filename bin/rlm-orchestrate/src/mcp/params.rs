//! The arguments of each MCP tool, as the client sends them: strict (an argument the
//! tool does not take is an error, not ignored), each documented, since the doc
//! comments are the tools' input schemas that clients and models read.

use rmcp::schemars;
use serde::Deserialize;

/// `rlm_run`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunParams {
    /// The question or task about the context.
    pub task: String,
    /// Files to use as the context (absolute paths, or relative to the server's working
    /// directory); several make a list. Read where they are, never copied into a prompt.
    /// Each must lie, links followed, under a directory the server serves (--mcp-root;
    /// default its working directory).
    #[serde(default)]
    pub context_paths: Vec<String>,
    /// Context given inline as text (stored in the data directory, then used like a file).
    #[serde(default)]
    pub context: Option<String>,
    /// The root model's name (default: the server's --model).
    #[serde(default)]
    pub model: Option<String>,
    /// openai, anthropic or cli (default: the server's --provider).
    #[serde(default)]
    pub provider: Option<String>,
    /// The model server's base URL, e.g. http://127.0.0.1:8080/v1: only one the server
    /// was started with or allows (--mcp-allow-base-url), since requests carry its key.
    #[serde(default)]
    pub base_url: Option<String>,
    /// The sub-model for llm_query and nested runs.
    #[serde(default)]
    pub sub_model: Option<String>,
    /// Where the model's code runs: python, js or tools.
    #[serde(default)]
    pub env: Option<String>,
    /// Most iterations of the root loop.
    #[serde(default)]
    pub max_iterations: Option<u32>,
    /// Most levels of nested runs.
    #[serde(default)]
    pub max_depth: Option<u32>,
    /// Most model calls across the whole tree.
    #[serde(default)]
    pub max_llm_calls: Option<u64>,
    /// Most tokens across the whole tree.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Most dollars across the whole tree (needs prices).
    #[serde(default)]
    pub max_cost_usd: Option<f64>,
    /// Most seconds for the whole run.
    #[serde(default)]
    pub max_time: Option<u64>,
}

/// `vars_list`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VarsListParams {
    /// Only variables of this scope (global, agent:<id>, session:<id>, cache).
    #[serde(default)]
    pub scope: Option<String>,
}

/// `vars_get`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyParams {
    /// The variable's key.
    pub key: String,
}

/// `vars_set`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VarsSetParams {
    /// The variable's key.
    pub key: String,
    /// The value: text, or JSON text with json=true.
    pub value: String,
    /// Parse `value` as JSON.
    #[serde(default)]
    pub json: bool,
    /// Scope (default: global).
    #[serde(default)]
    pub scope: Option<String>,
}

/// `runs_list`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunsListParams {
    /// At most this many of the latest runs.
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `runs_show`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunsShowParams {
    /// The run id, or a unique prefix of one.
    pub run_id: String,
}

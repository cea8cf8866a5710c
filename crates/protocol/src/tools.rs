//! Tools as the model calls them: what a tool box offers ([`ToolSpec`]) and what the
//! model asked for ([`ToolCall`]). Providers put them on the wire in each API's shape;
//! environments serve them.

use serde::{Deserialize, Serialize};

/// A tool the model may call through the provider's native tool calling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Its name (`ctx_grep`).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// Its arguments, as a JSON Schema object.
    pub parameters: serde_json::Value,
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The id the provider gave it (tool results name it).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model wrote them: JSON text, not checked here (a model may
    /// write invalid JSON; the tool reports that to it).
    pub arguments: String,
}

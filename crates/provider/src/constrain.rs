//! Replies constrained by the server (`--constrain`): which structured-output forms a
//! server takes, learned from what it says about itself or from what a hosted API
//! documents, and which of them a request uses.
//!
//! Small local models get the reply's form wrong more than anything else: a fence the
//! loop does not read, a call written as text, JSON with a missing brace. The servers
//! they run on can make such a reply impossible: llama.cpp's and llama-cpp-python's take
//! a GBNF `grammar`, vLLM a `guided_grammar`; they and OpenAI take a JSON schema as
//! `response_format`; OpenAI takes strict function tools. This module holds the three
//! steps of using that, each a pure function with a table of tests:
//!
//! 1. [`Support`]: what a server takes, read from its own words (llama.cpp's `/props`,
//!    the request schema of its OpenAPI listing, `/v1/models`' `owned_by`), or from a
//!    hosted API's documentation ([`documented`]), never guessed: a server that says
//!    nothing gets no constraint field.
//! 2. [`ConstrainMode`]: what the user asked (`auto`, `off`, `json`, `grammar`).
//! 3. [`Constraint`]: the fields a request carries, from both ([`resolve`]).

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{ProviderConfig, ProviderKind};

pub use crate::config::ConstrainMode;

/// The request field a server reads a GBNF grammar from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrammarField {
    /// `grammar`: llama.cpp's server, llama-cpp-python's.
    Grammar,
    /// `guided_grammar`: vLLM.
    GuidedGrammar,
}

impl GrammarField {
    /// The field's name in the request body.
    pub fn name(self) -> &'static str {
        match self {
            Self::Grammar => "grammar",
            Self::GuidedGrammar => "guided_grammar",
        }
    }
}

/// How a server takes a JSON schema for the reply (`response_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemaForm {
    /// `{"type": "json_schema", "json_schema": {"name", "schema"}}`: OpenAI, vLLM,
    /// llama.cpp's server.
    JsonSchema,
    /// `{"type": "json_object", "schema": …}`: llama-cpp-python (whose server refuses
    /// `json_schema`).
    JsonObject,
}

/// What a server takes to constrain a reply, as it said or as its API documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Support {
    /// Where it reads a GBNF grammar, if it takes one.
    #[serde(default)]
    pub grammar: Option<GrammarField>,
    /// How it takes a JSON schema for the reply, if it does.
    #[serde(default)]
    pub json_schema: Option<SchemaForm>,
    /// It holds function calls to their schema (`"strict": true`, OpenAI).
    #[serde(default)]
    pub strict_tools: bool,
    /// It calls tools natively (Anthropic's `tool_use`): replies under tools are
    /// calls already, with nothing more to send.
    #[serde(default)]
    pub tools: bool,
}

impl Support {
    /// True when the server takes nothing that constrains a reply.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

impl fmt::Display for Support {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(field) = self.grammar {
            parts.push(format!("GBNF grammar (`{}`)", field.name()));
        }
        match self.json_schema {
            Some(SchemaForm::JsonSchema) => parts.push("JSON schema (`json_schema`)".into()),
            Some(SchemaForm::JsonObject) => {
                parts.push("JSON schema (`json_object` with `schema`)".into());
            }
            None => {}
        }
        if self.strict_tools {
            parts.push("strict tools".into());
        } else if self.tools {
            parts.push("native tools".into());
        }
        if parts.is_empty() {
            f.write_str("nothing")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// What a hosted API documents it supports, known from its base URL without asking:
/// OpenAI's own endpoint (strict tools and `json_schema`), Anthropic's Messages API
/// (native tools). `None` for any other endpoint: it must say so itself.
pub fn documented(config: &ProviderConfig) -> Option<Support> {
    match config.kind {
        ProviderKind::Anthropic => Some(Support {
            tools: true,
            ..Support::default()
        }),
        ProviderKind::OpenAi => {
            let host = config
                .base_url
                .as_deref()
                .map_or(Some("api.openai.com".to_owned()), host_of);
            (host.as_deref() == Some("api.openai.com")).then_some(Support {
                json_schema: Some(SchemaForm::JsonSchema),
                strict_tools: true,
                tools: true,
                ..Support::default()
            })
        }
        ProviderKind::Cli => None,
    }
}

/// The lower-cased host of `url`, if it has one.
fn host_of(url: &str) -> Option<String> {
    reqwest::Url::parse(url)
        .ok()?
        .host_str()
        .map(str::to_ascii_lowercase)
}

/// What llama.cpp's `/props` says: llama.cpp's server (its
/// `default_generation_settings`) takes `grammar` and `response_format` `json_schema`.
pub fn in_props(props: &Value) -> Option<Support> {
    props
        .get("default_generation_settings")
        .is_some_and(Value::is_object)
        .then_some(Support {
            grammar: Some(GrammarField::Grammar),
            json_schema: Some(SchemaForm::JsonSchema),
            ..Support::default()
        })
}

/// What a `/v1/models` listing says: entries `owned_by: "llamacpp"` are llama.cpp's
/// server (which takes `grammar` and `json_schema`).
pub fn in_models(listing: &Value) -> Option<Support> {
    let llama_cpp = listing
        .get("data")
        .and_then(Value::as_array)
        .is_some_and(|entries| {
            entries
                .iter()
                .any(|e| e.get("owned_by").and_then(Value::as_str) == Some("llamacpp"))
        });
    llama_cpp.then_some(Support {
        grammar: Some(GrammarField::Grammar),
        json_schema: Some(SchemaForm::JsonSchema),
        ..Support::default()
    })
}

/// What a FastAPI OpenAPI listing says of its chat-completion request: the fields
/// its request schema has (`grammar`, vLLM's `guided_grammar`) and the `type`s its
/// `response_format` admits (`json_schema`; llama-cpp-python's `json_object` with a
/// `schema`). `None` when the listing describes no such request.
pub fn in_listing(listing: &Value) -> Option<Support> {
    let schemas = listing.pointer("/components/schemas")?.as_object()?;
    let request = ["CreateChatCompletionRequest", "ChatCompletionRequest"]
        .iter()
        .find_map(|name| schemas.get(*name))?;
    let fields = request.get("properties")?.as_object()?;
    let grammar = if fields.contains_key("grammar") {
        Some(GrammarField::Grammar)
    } else if fields.contains_key("guided_grammar") {
        Some(GrammarField::GuidedGrammar)
    } else {
        None
    };
    let format_types = fields
        .get("response_format")
        .map(|field| format_types(field, schemas))
        .unwrap_or_default();
    let json_schema = if format_types.iter().any(|t| t == "json_schema") {
        Some(SchemaForm::JsonSchema)
    } else if format_types.iter().any(|t| t == "json_object+schema") {
        Some(SchemaForm::JsonObject)
    } else {
        None
    };
    let support = Support {
        grammar,
        json_schema,
        ..Support::default()
    };
    (!support.is_empty()).then_some(support)
}

/// The `type`s a `response_format` schema admits, followed through `$ref`s and
/// `anyOf`/`oneOf` (a bounded walk): each enum value or const of its `type` property,
/// and `json_object+schema` where an object with a `schema` property admits
/// `json_object`.
fn format_types(field: &Value, schemas: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![field];
    let mut visited = 0;
    while let Some(node) = pending.pop() {
        visited += 1;
        if visited > 64 {
            break;
        }
        if let Some(name) = node
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
        {
            pending.extend(schemas.get(name));
        }
        for key in ["anyOf", "oneOf", "allOf"] {
            if let Some(list) = node.get(key).and_then(Value::as_array) {
                pending.extend(list);
            }
        }
        let Some(properties) = node.get("properties").and_then(Value::as_object) else {
            continue;
        };
        let Some(kind) = properties.get("type") else {
            continue;
        };
        let mut types: Vec<String> = kind
            .get("enum")
            .and_then(Value::as_array)
            .map(|values| {
                values
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        types.extend(kind.get("const").and_then(Value::as_str).map(str::to_owned));
        if properties.contains_key("schema") && types.iter().any(|t| t == "json_object") {
            types.push("json_object+schema".into());
        }
        found.extend(types);
    }
    found
}

/// The constraint fields one request carries: resolved from a [`ConstrainMode`] and a
/// server's [`Support`] by [`resolve`], then obeyed by the request builder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Constraint {
    /// A code reply's grammar goes in this field (`None`: not sent).
    pub grammar: Option<GrammarField>,
    /// A JSON reply's schema goes as `response_format` in this form (`None`: not
    /// sent; as a grammar made from the schema where [`Constraint::grammar`] names a
    /// field and the schema converts).
    pub json_schema: Option<SchemaForm>,
    /// Tools whose schemas are strict-compatible go with `"strict": true`.
    pub strict_tools: bool,
}

impl Constraint {
    /// True when offered tools are also held to `response_format` (the schema of one
    /// call, [`one_call_schema`]): on the one server that takes a schema as
    /// `json_object` with `schema`, llama-cpp-python, whose chat templates render the
    /// tools into the prompt and return the model's call as JSON text in `content`,
    /// not as `tool_calls`. Without it that text is unconstrained (a brace too many, a
    /// tool that does not exist). Servers that call tools themselves (OpenAI's strict
    /// tools, vLLM's and llama.cpp's tool parsers) get the tools as offered.
    pub fn sends_call_schema(&self) -> bool {
        self.json_schema == Some(SchemaForm::JsonObject) && !self.strict_tools
    }
}

/// The schema of one call of one of `tools` as a model writes it in text,
/// `{"name": …, "arguments": {…}}` (`only`: the one tool a request requires).
pub fn one_call_schema(tools: &[crate::ToolSpec], only: Option<&str>) -> Value {
    let calls: Vec<Value> = tools
        .iter()
        .filter(|tool| only.is_none_or(|name| tool.name == name))
        .map(|tool| {
            serde_json::json!({
                "type": "object",
                "properties": {
                    "name": {"const": tool.name},
                    "arguments": tool.parameters,
                },
                "required": ["name", "arguments"],
            })
        })
        .collect();
    serde_json::json!({ "oneOf": calls })
}

/// The constraint a request carries under `mode` for a server that takes `support`
/// (`None`: it said nothing). `auto` sends exactly what the server takes; `json` and
/// `grammar` send their form whatever it said, in the server's own spelling where it
/// gave one; `off` sends nothing. A server that takes grammars and no schema gets a
/// JSON reply's schema as a grammar made from it (`json_schema: None` beside a
/// grammar field: the request's builder converts it).
pub fn resolve(mode: ConstrainMode, support: Option<&Support>) -> Constraint {
    let grammar_only = support.is_some_and(|s| s.grammar.is_some() && s.json_schema.is_none());
    let support = support.copied().unwrap_or_default();
    match mode {
        ConstrainMode::Off => Constraint::default(),
        ConstrainMode::Auto => Constraint {
            grammar: support.grammar,
            json_schema: support.json_schema,
            strict_tools: support.strict_tools,
        },
        ConstrainMode::Json => Constraint {
            grammar: None,
            json_schema: Some(support.json_schema.unwrap_or(SchemaForm::JsonSchema)),
            strict_tools: support.strict_tools,
        },
        ConstrainMode::Grammar => Constraint {
            grammar: Some(support.grammar.unwrap_or(GrammarField::Grammar)),
            json_schema: (!grammar_only)
                .then_some(support.json_schema.unwrap_or(SchemaForm::JsonSchema)),
            strict_tools: support.strict_tools,
        },
    }
}

/// True when `schema` meets OpenAI's strict mode: every object lists all its
/// properties as `required` and sets `additionalProperties: false`, all the way down.
/// A tool of any other schema goes without `strict` (the API refuses it otherwise).
pub fn strict_compatible(schema: &Value) -> bool {
    let mut pending = vec![schema];
    while let Some(node) = pending.pop() {
        let Some(object) = node.as_object() else {
            continue;
        };
        if let Some(properties) = object.get("properties").and_then(Value::as_object) {
            let required: Vec<&str> = object
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let closed = object.get("additionalProperties") == Some(&Value::Bool(false));
            if !closed || properties.keys().any(|k| !required.contains(&k.as_str())) {
                return false;
            }
            pending.extend(properties.values());
        } else if object.get("type").and_then(Value::as_str) == Some("object") {
            // An object of no listed properties is open: strict refuses it.
            return false;
        }
        pending.extend(object.get("items"));
        for key in ["anyOf", "oneOf", "allOf"] {
            if let Some(list) = object.get(key).and_then(Value::as_array) {
                pending.extend(list);
            }
        }
    }
    true
}

#[cfg(test)]
mod tests;

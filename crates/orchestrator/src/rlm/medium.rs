//! What the model works through — code in a REPL, or the environment's tools — and
//! what each medium sends with a request.

use crate::env::tools::ToolProtocol;
use crate::env::{CodeRepl, EnvMut, Environment, ToolBox};
use crate::host::Model;
use crate::prompt::Access;
use crate::provider::ToolSpec;

use super::caller::Offer;
use super::correction::Form;

/// What the model works through: code in a REPL, or the environment's tools.
pub(super) enum Medium<'e> {
    /// Fenced code blocks, run in order in the REPL.
    Code(&'e mut dyn CodeRepl),
    /// Tool calls, sent natively (`specs` go with every request) or written as text.
    Tools {
        tools: &'e mut dyn ToolBox,
        specs: Vec<ToolSpec>,
        protocol: ToolProtocol,
        /// Calls written as text: the schema of one reply, sent as `response_format`.
        reply_schema: Option<serde_json::Value>,
    },
}

impl<'e> Medium<'e> {
    /// The medium of `env`, with the tool protocol configured.
    pub(super) fn of(env: EnvMut<'e>, protocol: ToolProtocol) -> Self {
        match env {
            EnvMut::Code(repl) => Self::Code(repl),
            EnvMut::Tools(tools) => Self::Tools {
                specs: tools.tools(),
                reply_schema: (protocol == ToolProtocol::Text)
                    .then(|| tools.response_schema())
                    .flatten(),
                tools,
                protocol,
            },
        }
    }

    /// The environment's lifecycle.
    pub(super) fn env(&self) -> &dyn Environment {
        match self {
            Self::Code(repl) => &**repl,
            Self::Tools { tools, .. } => &**tools,
        }
    }

    /// The medium as the corrections see it.
    pub(super) fn form(&self) -> Form<'static> {
        match self {
            Self::Code(repl) => Form::Code {
                language: repl.fence_tags().first().copied().unwrap_or("repl"),
            },
            Self::Tools { .. } => Form::Tools,
        }
    }

    /// True when tool calls are written as text.
    pub(super) fn text_protocol(&self) -> bool {
        matches!(
            self,
            Self::Tools {
                protocol: ToolProtocol::Text,
                ..
            }
        )
    }

    /// The schema a reply must follow, where the environment gives one (calls written
    /// as text under `--env plan`).
    pub(super) fn reply_schema(&self) -> Option<&serde_json::Value> {
        match self {
            Self::Tools { reply_schema, .. } => reply_schema.as_ref(),
            Self::Code(_) => None,
        }
    }

    /// The tools sent with each request (none when calls are written as text).
    pub(super) fn native_specs(&self) -> &[ToolSpec] {
        match self {
            Self::Tools {
                specs,
                protocol: ToolProtocol::Native,
                ..
            } => specs,
            Self::Tools { .. } | Self::Code(_) => &[],
        }
    }

    /// How the model reaches the context, as its first message says.
    pub(super) fn access(&self) -> Access {
        match self {
            Self::Code(_) => Access::Code,
            Self::Tools { .. } => Access::Tools,
        }
    }

    /// What every root request offers: the native tools, the schema of a reply, and
    /// for code the grammar of the loop's reply protocol (sent where `--constrain`
    /// finds the server takes one).
    pub(super) fn offer(&self) -> Offer<'_> {
        Offer {
            specs: self.native_specs(),
            required: None,
            reply_schema: self.reply_schema(),
            grammar: matches!(self, Self::Code(_)).then_some(crate::grammar::REPL_REPLY_GBNF),
        }
    }

    /// The schema of a call written as text (the text protocol only): what the
    /// constraint holds such a reply to.
    pub(super) fn text_call_schema(&self) -> Option<&serde_json::Value> {
        self.reply_schema().filter(|_| self.text_protocol())
    }
}

/// True when calls written as text will be held to `schema` (the server takes it as a
/// schema, or as a grammar made from it): the prompt then asks for one keyed call a
/// reply. Waits for discovery as the first request would (a bounded wait). A free
/// function, not a method: the loop's future must not hold the medium across the wait.
pub(super) async fn constrains_text_calls(
    model: &Model,
    schema: Option<&serde_json::Value>,
) -> bool {
    let Some(schema) = schema else {
        return false;
    };
    let constraint = model.window.constraint().await;
    constraint.json_schema.is_some()
        || (constraint.grammar.is_some() && crate::grammar::schema_to_gbnf(schema).is_ok())
}

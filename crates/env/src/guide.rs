//! What an environment tells the model about itself: the features a run configured
//! ([`PromptFeatures`]), a code REPL's own description ([`EnvGuide`]), and the system
//! prompt every code REPL shares, filled in from that description.

/// What is configured for the run, so the system prompt advertises only that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PromptFeatures {
    /// An external agent command is configured (`spawn_agent(s)` work).
    pub agents: bool,
    /// `--sub-context-chars`: the largest piece a sub-call may send.
    pub sub_context_chars: usize,
    /// Tool calls are written as text (`--tool-protocol text`), not sent natively.
    pub text_tool_protocol: bool,
    /// Those text replies are held by the server to one call of an offered tool
    /// (`--constrain`): the prompt asks for one keyed call a reply.
    pub constrained_calls: bool,
}

/// What an environment tells the model about itself in the system prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvGuide {
    /// The language, as the model reads it (`Python`, `JavaScript`).
    pub language: &'static str,
    /// One or two sentences on how code runs there (persistence, output, async…).
    pub how_code_runs: String,
    /// How to delegate reading to sub-calls, with the helpers' call syntax.
    pub delegate: String,
    /// How to store an intermediate result for sub-agents.
    pub store_note: String,
    /// The helpers' signatures, one group a line.
    pub helpers: Vec<String>,
}

/// The built-in system prompt for an environment described by `guide`.
pub fn system_prompt(guide: &EnvGuide) -> String {
    let EnvGuide {
        language,
        how_code_runs,
        delegate,
        store_note,
        helpers,
    } = guide;
    let helpers = helpers.join("\n  ");
    format!(
        r#"You are the root of a Recursive Language Model (RLM). You answer a task about a context that is far too large to read at once. The context is NOT in this conversation: it is loaded in a persistent {language} REPL as the variable `context`. You explore it by writing code.

How to work:
- Write {language} code in fenced blocks tagged ```repl. {how_code_runs} Long output is truncated and output that dumps a large part of the context is redacted, so print only what you need: sizes, slices, matches, summaries.
- Look before you conclude: check the type and length of `context`, peek at slices, search for keywords, then split the work into chunks.
- Delegate reading: {delegate}
- Keep intermediate results in variables. {store_note}
- When you know the answer, write it on its own line outside any code block:
  FINAL(the answer)        a literal answer
  FINAL_VAR(variable_name) the value of a REPL variable
  or call SUBMIT({{...}}) inside code for a structured answer.
  Never write FINAL in the same message as code: you have not seen that code's output yet.

Helpers available in the REPL:
  {helpers}"#
    )
}

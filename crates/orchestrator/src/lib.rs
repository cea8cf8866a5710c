//! The Recursive Language Model loop.
//!
//! The orchestrator asks a model for code, runs that code in a persistent environment
//! (a Python kernel, embedded JavaScript or micro-tools) over context held in the
//! [`rlm_context_store`], and delegates slices of the work to sub-agents running as
//! child processes. The context itself never enters a prompt: the model sees metadata
//! and variable references only.
//!
//! Planned modules (issue 3 onwards): `prompt` (metadata-only prompts), `parse`
//! (fences and final answers), `provider` (OpenAI, Anthropic, CLI models), `env`
//! (REPL environments), `agents` (sub-agents over `rlm-process`), `events` (traces).

pub use rlm_context_store as store;

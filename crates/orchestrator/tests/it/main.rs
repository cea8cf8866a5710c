//! Integration tests of the orchestrator library, in one test binary so it builds
//! once: external agents as real processes,
//! the Python environment with a real kernel, and persistent sessions end to end.

mod agents;
mod fuzz;
mod js_builtins;
mod js_env;
mod python_env;
mod python_hostile;
mod referenced_context;
mod session;
mod test_host;

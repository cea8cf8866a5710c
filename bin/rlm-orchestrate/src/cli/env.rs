//! Environment variables the binary reads, declared once.
//!
//! The `RLM_*` fallbacks of individual flags are named beside their flag (`env =
//! "RLM_MODEL"`), where `--help` shows them; the names read outside clap live here.

/// Data directory (same as `--data-dir`); also given to sub-agents.
pub const RLM_DATA_DIR: &str = "RLM_DATA_DIR";
/// Log filter in `tracing` syntax; overrides `-v` / `-q`.
pub const RUST_LOG: &str = "RUST_LOG";
/// The Python interpreter of `eval --arm rlms` (one that has the official `rlms`
/// library installed); default: the venv `scripts/arms/setup-rlms.sh` makes.
pub const RLM_RLMS_PYTHON: &str = "RLM_RLMS_PYTHON";
/// Where `scripts/arms/setup-rlms.sh` puts the `rlms` venv (default `.local-models`).
pub const RLM_ARMS_DIR: &str = "RLM_ARMS_DIR";

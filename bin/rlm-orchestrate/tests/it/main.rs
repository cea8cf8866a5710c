//! Black-box tests of the `rlm-orchestrate` binary: exit codes, stdout and stderr of
//! real invocations, each in its own temporary data directory.
//!
//! One integration-test binary (modules below) so the crate links once.

#![expect(
    clippy::unwrap_used,
    reason = "a test fails by panicking; helpers outside #[test] functions too"
)]

mod config;
mod example_data;
mod help;
mod js;
mod limits;
mod live;
mod repl;
mod run;
mod runs;
mod subagents;
mod support;
mod tools;
mod vars_big;
mod vars_errors;
mod vars_roundtrip;

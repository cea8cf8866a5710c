//! Black-box tests of the `rlm-orchestrate` binary: exit codes, stdout and stderr of
//! real invocations, each in its own temporary data directory.
//!
//! One integration-test binary (modules below) so the crate links once.

#![expect(
    clippy::unwrap_used,
    reason = "a test fails by panicking; helpers outside #[test] functions too"
)]
mod agent_ends;
mod agent_recipes;
mod big_context;
mod config;
mod constrain;
mod constrain_sub;
mod context_limits;
mod corrections;
mod dead_runs;
mod discovery;
mod escapees;
mod eval;
mod eval_arms;
mod eval_inputs;
mod eval_public;
mod example_data;
mod faults;
mod final_answers;
mod grace;
mod help;
mod hostile_disk;
mod input_bounds;
mod js;
mod kernel_protocol;
mod kill9;
mod large_answer;
mod limits;
mod live;
mod mcp_policy;
mod mcp_stdio;
mod ordinary_tasks;
mod plan_bounds;
mod plan_steps;
mod plans;
mod private_files;
mod readme;
mod real_agent_config;
mod real_agent_keys;
mod real_agents;
mod real_cli_support;
mod real_llm_agent;
mod real_mcp_host;
mod record_reductions;
mod redaction;
mod repl;
mod replies;
mod run;
mod runaway;
mod runs;
mod runs_prune;
mod sandbox;
mod server_faults;
mod slurm;
mod sub_rlm_args;
mod sub_rlm_parallel;
mod subagents;
mod support;
mod terminal;
mod tools;
mod tree_limits;
mod vars_big;
mod vars_bounds;
mod vars_errors;
mod vars_integrity;
mod vars_ranges;
mod vars_roundtrip;
mod watchdog_orders;
mod windows;

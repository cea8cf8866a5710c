//! The sub-commands that start runs and take little besides a run's flags: `run` (a
//! task), `repl` (queries typed or piped) and `mcp` (each `rlm_run` call).

use std::path::PathBuf;

use clap::Args;

use super::values::{parse_allowed_base_url, AllowedBaseUrl};
use super::RunOptions;

/// `run` options.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct RunArgs {
    /// The task; read from stdin when absent or `-`.
    pub task: Option<String>,

    /// Run the nested run described in this spec file (written by a parent run for
    /// `sub_rlm`; its settings replace every run flag).
    #[arg(long, value_name = "FILE", hide = true, conflicts_with = "task")]
    pub child_spec: Option<std::path::PathBuf>,

    /// The flags shared with `repl`.
    #[command(flatten)]
    pub options: RunOptions,
}

/// Lets `run` code read `args.model` for `args.options.model`.
impl std::ops::Deref for RunArgs {
    type Target = RunOptions;

    fn deref(&self) -> &RunOptions {
        &self.options
    }
}

/// `repl` options: every flag of `run`, without a task (queries are typed or piped).
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct ReplArgs {
    /// The flags shared with `run`.
    #[command(flatten)]
    pub options: RunOptions,
}

/// `rlm-orchestrate mcp` options: what a client may reach, and every setting of `run`,
/// used for each `rlm_run`.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct McpArgs {
    /// What an MCP client may point a run at, and how many runs it may start.
    #[command(flatten)]
    pub server: McpServerArgs,

    /// The settings of every run (model, environment, budgets, …), as for `run`.
    #[command(flatten)]
    pub options: RunOptions,
}

/// The flags of `mcp` alone: they bound what a client's calls may do.
#[derive(Debug, Args)]
pub struct McpServerArgs {
    /// A directory whose files a call's `context_paths` may name (repeatable; symbolic
    /// links are followed before the check). Default: the working directory only.
    #[arg(long, value_name = "DIR", help_heading = "MCP")]
    pub mcp_root: Vec<PathBuf>,

    /// A base URL a call's `base_url` may name besides the server's own, with any path
    /// below it (repeatable; scheme, host, port and path compared as parsed). A call's
    /// requests carry the server's API key.
    #[arg(long, value_name = "URL", value_parser = parse_allowed_base_url, help_heading = "MCP")]
    pub mcp_allow_base_url: Vec<AllowedBaseUrl>,

    /// Most `rlm_run` calls running at once; further calls wait (at most
    /// 16 of them; beyond that a call is refused).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=32), help_heading = "MCP")]
    pub mcp_max_runs: u32,
}

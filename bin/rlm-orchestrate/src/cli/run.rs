//! The sub-commands that start runs and take little besides a run's flags: `run` (a
//! task), `repl` (queries typed or piped) and `mcp` (each `rlm_run` call).

use clap::Args;

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

/// `rlm-orchestrate mcp` options: every setting of `run`, used for each `rlm_run`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// The settings of every run (model, environment, budgets, …), as for `run`.
    #[command(flatten)]
    pub options: RunOptions,
}

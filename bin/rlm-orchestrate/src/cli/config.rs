//! The arguments of `config` (`config show`: which settings a run would use).

use std::ffi::OsString;

use clap::{Args, Subcommand};

/// `config`: one of its sub-commands.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// What to show.
    #[command(subcommand)]
    pub command: ConfigCommand,
}

/// The `config` sub-commands.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print every `run` setting with its effective value and where it comes from:
    /// `flag`, `env RLM_…`, `rlm.toml` or `default`. Flags after `show` are read as
    /// `run` flags, so you can check what a command line would do. API keys are never
    /// printed, only whether their variable is set.
    #[command(after_help = "\
Examples:
  rlm-orchestrate config show
  rlm-orchestrate config show --model gpt-4o --max-depth 3
  RLM_MODEL=gpt-4o rlm-orchestrate config show
  rlm-orchestrate config show --json | jq -r '.settings[] | \"\\(.name)=\\(.value) (\\(.source))\"'

Precedence: flag > environment (RLM_*) > rlm.toml in the working directory > default.
Put --json before any run flag: after one, everything is read as run flags.")]
    Show(ConfigShowArgs),
}

/// `config show` options.
#[derive(Debug, Args)]
pub struct ConfigShowArgs {
    /// Print `{"settings": [{name, value, source}], "api_keys": […], "config_file": …}`.
    #[arg(long)]
    pub json: bool,

    /// `run` flags to take into account, exactly as you would give them to `run`.
    #[arg(
        value_name = "RUN_FLAGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub run_args: Vec<OsString>,
}

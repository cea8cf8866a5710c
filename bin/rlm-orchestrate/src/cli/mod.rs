//! The command-line grammar: every flag, its help text and its environment fallback.
//!
//! Only clap types live here, so `--help` reads like this folder: the top level
//! ([`Cli`], [`Command`], [`GlobalArgs`]) in this file, and the arguments of each
//! sub-command in a file of its own. Behaviour lives in the module of each sub-command
//! (`vars.rs`, `run.rs`, …), which imports its arguments from here; nothing here
//! imports from them.

pub mod completions;
pub mod config;
pub mod env;
pub mod eval;
pub mod run;
pub mod run_options;
pub mod runs;
pub mod values;
pub mod vars;

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand};

pub use completions::CompletionsArgs;
pub use config::{ConfigArgs, ConfigCommand, ConfigShowArgs};
pub use eval::EvalArgs;
pub use run::{McpArgs, ReplArgs, RunArgs};
pub use run_options::RunOptions;
pub use runs::RunsArgs;
pub use vars::VarsArgs;

/// The line after the examples of `-h`: where the rest is.
macro_rules! more_help {
    () => {
        "Common flags only: --help prints them all, with settings, exit codes and more."
    };
}

/// The examples of `run`, in both its `-h` and its `--help`.
macro_rules! run_examples {
    () => {
        "\
Examples:
  rlm-orchestrate run 'Which service logged the most errors?' --context app.log
  rlm-orchestrate run 'Summarise the design' --context-dir repo/ --dir-as dict
  rlm-orchestrate run 'Count the failures' --context big.log \\
      --base-url http://127.0.0.1:8080/v1 --model local --json"
    };
}

/// The examples of `repl`, in both its `-h` and its `--help`.
macro_rules! repl_examples {
    () => {
        "\
Examples:
  rlm-orchestrate repl --context app.log
  rlm-orchestrate repl --context-dir repo/ --dir-as dict --model gpt-4o
  printf 'How many errors?\\nWhich service logged most of them?\\n' | rlm-orchestrate repl --context app.log
  rlm-orchestrate repl --context app.log --json < questions.txt > answers.jsonl"
    };
}

/// The examples of `eval`, in both its `-h` and its `--help`.
macro_rules! eval_examples {
    () => {
        "\
Examples:
  rlm-orchestrate eval --suite sniah --lengths 8k,1m --base-url http://127.0.0.1:PORT/v1 --model oracle
      (with `mock-llm --oracle &` serving there: an offline model that writes the right code)
  rlm-orchestrate eval --suite sniah,aggregate --lengths 8k,64k --items 5 --model gpt-4o-mini --out eval-4o
  rlm-orchestrate eval --resume --out eval-4o ...   # skips the items already scored
  rlm-orchestrate eval --arms baseline,stub --arm stub='python3 scripts/arms/stub.py \\
      --context-file {context_file} --question {question}' ...
Exit codes: 0 done, 1 failure, 2 bad usage, 130 interrupted (what was done is kept)."
    };
}

/// The examples of `mcp`, in both its `-h` and its `--help`.
macro_rules! mcp_examples {
    () => {
        "\
Examples:
  rlm-orchestrate mcp --model gpt-4o-mini
  rlm-orchestrate mcp --base-url http://127.0.0.1:8080/v1 --model local --env python
  claude mcp add rlm -- rlm-orchestrate mcp --model gpt-4o-mini"
    };
}

/// Data directory used when neither `--data-dir` nor `RLM_DATA_DIR` is given.
pub const DEFAULT_DATA_DIR: &str = "./.rlm-data";

/// Run Recursive Language Models over a disk-backed context store.
#[derive(Debug, Parser)]
#[command(
    name = "rlm-orchestrate",
    version,
    propagate_version = true,
    after_help = "\
Examples:
  rlm-orchestrate run 'Which service logged the most errors?' --context app.log
  rlm-orchestrate repl --context app.log
  rlm-orchestrate vars set notes 'some text'
  rlm-orchestrate vars set big --file server.log
  rlm-orchestrate vars list
  rlm-orchestrate --data-dir /tmp/rlm vars get notes
  rlm-orchestrate config show
  rlm-orchestrate completions bash > ~/.local/share/bash-completion/completions/rlm-orchestrate

Exit codes: 0 ok, 1 failure, 2 bad usage or input, 3 compare-and-set conflict, 4 missing variable."
)]
pub struct Cli {
    /// Options shared by every sub-command.
    #[command(flatten)]
    pub global: GlobalArgs,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Options accepted before or after any sub-command.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Directory of the context store (variables/, locks/, runs/).
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        env = env::RLM_DATA_DIR,
        hide_env_values = true,
        default_value = DEFAULT_DATA_DIR
    )]
    pub data_dir: PathBuf,

    /// More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, global = true, action = ArgAction::Count)]
    pub verbose: u8,

    /// Only errors on stderr: no warnings, no logs.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
}

/// The sub-commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect and edit the variables of the context store.
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars list --type text
  rlm-orchestrate vars show chunk-3
  rlm-orchestrate vars set config --json '{\"depth\": 2}'
  rlm-orchestrate vars path chunk-3")]
    Vars(VarsArgs),

    /// Answer TASK over a context too large for a prompt: the model explores it with
    /// code in a persistent Python REPL and delegates slices to sub-calls.
    #[command(
        after_help = concat!(run_examples!(), "\n\n", more_help!()),
        after_long_help = concat!(
            run_examples!(),
            "
  echo 'What changed?' | rlm-orchestrate run --context a.md --context b.md
  rlm-orchestrate run 'Classify' --context data.json --provider anthropic \\
      --model claude-sonnet-4-5 --output-schema schema.json
  rlm-orchestrate run 'Explain' --context notes.md --provider cli --llm-cmd 'llm -m gpt-4o-mini'

Settings also come from RLM_* environment variables (RLM_MODEL, RLM_MAX_ITERATIONS, …)
and from rlm.toml in the working directory (model = \"x\", max_iterations = 30, …);
flags win over the environment, which wins over rlm.toml.
Exit codes: 0 answered, 1 failure (trace kept under runs/), 2 bad usage or input."
        )
    )]
    Run(Box<RunArgs>),

    /// Ask question after question over the same context, one query a line, in a
    /// Python REPL that keeps its variables and the earlier answers (`history`).
    #[command(
        after_help = concat!(repl_examples!(), "\n\n", more_help!()),
        after_long_help = concat!(
            repl_examples!(),
            "

Each query is a run of its own (trace under runs/) and sees the earlier queries and
answers in `history`. Commands: :context PATH (a file for the next query, loaded into a
new slot), :vars, :runs, :help, :quit (or Ctrl-D). Ctrl-C cancels the running query;
the REPL and its variables stay. Line history is kept in <data-dir>/repl_history.
With piped stdin each line is a query and each answer is printed on stdout (one JSON
object a line with --json), without a prompt. Settings come from flags, RLM_* variables
and rlm.toml, as for `run`.
Exit codes: 0 done, 1 a query failed (piped stdin), 2 bad usage or input."
        )
    )]
    Repl(Box<ReplArgs>),

    /// Inspect the settings `run` would use.
    #[command(after_help = "\
Examples:
  rlm-orchestrate config show
  rlm-orchestrate config show --json | jq -r '.settings[] | select(.source != \"default\")'
  RLM_MODEL=gpt-4o rlm-orchestrate config show --max-iterations 5")]
    Config(ConfigArgs),

    /// Print a shell completion script on stdout.
    #[command(after_help = "\
Examples:
  rlm-orchestrate completions bash > ~/.local/share/bash-completion/completions/rlm-orchestrate
  rlm-orchestrate completions zsh > \"${fpath[1]}/_rlm-orchestrate\"
  rlm-orchestrate completions fish > ~/.config/fish/completions/rlm-orchestrate.fish
  rlm-orchestrate completions powershell >> $PROFILE")]
    Completions(CompletionsArgs),

    /// List runs, show one's trace step by step, or render it as a self-contained HTML
    /// page.
    #[command(after_help = "\
Examples:
  rlm-orchestrate runs list
  rlm-orchestrate runs list --all --json
  rlm-orchestrate runs show 20261122-0943
  rlm-orchestrate runs show 20261122-0943 --html run.html")]
    Runs(RunsArgs),

    /// Score an RLM against the plain model on generated long-context suites.
    #[command(
        after_help = concat!(eval_examples!(), "\n\n", more_help!()),
        mut_args = only_common_run_flags,
        after_long_help = concat!(
            "\
Suites (generated locally from --seed, every answer checked automatically):
  sniah         one needle at depths 10-90 %          exact
  multi-needle  four needles, all to be found          set F1
  aggregate     count / most frequent / sum of records numeric or exact
  pairs         same-city pairs of records (quadratic)  numeric
Each item runs in every arm: the RLM (a normal run, with its trace), the baseline (one
direct call to the same model with the context cut to --baseline-window characters,
or to what fits the model's window),
and any external arm (--arm NAME='COMMAND': any system, see docs/eval.md).
Results: a table on the terminal and in OUT/table.md (accuracy with its 95 % Wilson
interval, mean score, tokens, tokens per correct answer, seconds, forced and failed
answers), every item in OUT/results.json, the accuracy-vs-length chart in
OUT/accuracy.svg.

",
            eval_examples!()
        )
    )]
    Eval(Box<EvalArgs>),

    /// Serve rlm to MCP hosts (Claude Code, Codex, …) over stdio: rlm_run, vars_*, runs_*.
    #[command(
        after_help = concat!(mcp_examples!(), "\n\n", more_help!()),
        mut_args = only_common_run_flags,
        after_long_help = concat!(
            "\
Tools: rlm_run (task, context_paths and/or inline context, optional model, provider,
base_url, env and budgets; answer as text, run id/usage/cost/forced as structured
content), vars_list, vars_get, vars_set, runs_list, runs_show. Every rlm_run uses the
flags given after `mcp` (and RLM_*, rlm.toml), then the call's own. Progress goes out
as MCP progress notifications; cancelling a call cancels its run and ends its children.
Stdout carries the protocol only.

A call's base_url must be the server's own or under an --mcp-allow-base-url (requests
carry the server's key); its context_paths must resolve, links followed, under an
--mcp-root (default: the working directory). At most --mcp-max-runs runs at once
(default 2); up to 16 more calls wait, further ones are refused. See docs/security.md.

",
            mcp_examples!()
        )
    )]
    Mcp(Box<McpArgs>),
}

/// The run flags `-h` of `eval` and `mcp` still shows, after their own: which model
/// (`--help` shows every one).
const COMMON_RUN_FLAGS: &[&str] = &["model", "base_url"];

/// Keeps a run flag out of `-h` unless it is in [`COMMON_RUN_FLAGS`]; the sub-command's
/// own flags (under a heading of their own) stay.
fn only_common_run_flags(arg: clap::Arg) -> clap::Arg {
    let run_flag = arg
        .get_help_heading()
        .is_some_and(|heading| run_options::HEADINGS.contains(&heading));
    if run_flag && !COMMON_RUN_FLAGS.contains(&arg.get_id().as_str()) {
        arg.hide_short_help(true)
    } else {
        arg
    }
}

/// A flag's value that does not parse. clap shows its message after
/// `invalid value 'X' for '--flag <V>': `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidValue(String);

impl InvalidValue {
    /// An invalid value, explained by `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl std::fmt::Display for InvalidValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidValue {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn run_headings_are_the_listed_ones_in_order() {
        use clap::CommandFactory;
        let cli = Cli::command();
        let run = cli.find_subcommand("run").expect("a run sub-command");
        let mut seen: Vec<&str> = Vec::new();
        for heading in run.get_arguments().filter_map(|a| a.get_help_heading()) {
            if !seen.contains(&heading) {
                seen.push(heading);
            }
        }
        assert_eq!(seen, run_options::HEADINGS);
    }
}

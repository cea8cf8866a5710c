//! The command-line grammar: every flag, its help text and its environment fallback.
//!
//! Only clap types live here, so `--help` reads like this file. Behaviour lives in the
//! module of each sub-command (`vars.rs`, …).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};
use rlm_context_store::{Expected, VariableType};
use rlm_orchestrator::env::tools::{parse_tool_list, MicroTool};

/// Environment variables the binary reads, declared once.
pub mod env {
    /// Data directory (same as `--data-dir`); also given to sub-agents.
    pub const RLM_DATA_DIR: &str = "RLM_DATA_DIR";
    /// Log filter in `tracing` syntax; overrides `-v` / `-q`.
    pub const RUST_LOG: &str = "RUST_LOG";
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
    #[command(after_help = "\
Examples:
  rlm-orchestrate run 'Which service logged the most errors?' --context app.log
  rlm-orchestrate run 'Summarise the design' --context-dir repo/ --dir-as dict
  echo 'What changed?' | rlm-orchestrate run --context a.md --context b.md
  rlm-orchestrate run 'Count the failures' --context big.log \\
      --base-url http://127.0.0.1:8080/v1 --model local --json
  rlm-orchestrate run 'Classify' --context data.json --provider anthropic \\
      --model claude-sonnet-4-5 --output-schema schema.json
  rlm-orchestrate run 'Explain' --context notes.md --provider cli --llm-cmd 'llm -m gpt-4o-mini'

Settings also come from RLM_* environment variables (RLM_MODEL, RLM_MAX_ITERATIONS, …)
and from rlm.toml in the working directory (model = \"x\", max_iterations = 30, …);
flags win over the environment, which wins over rlm.toml.
Exit codes: 0 answered, 1 failure (trace kept under runs/), 2 bad usage or input.")]
    Run(Box<RunArgs>),

    /// Ask question after question over the same context, one query a line, in a
    /// Python REPL that keeps its variables and the earlier answers (`history`).
    #[command(after_help = "\
Examples:
  rlm-orchestrate repl --context app.log
  rlm-orchestrate repl --context-dir repo/ --dir-as dict --model gpt-4o
  printf 'How many errors?\\nWhich service logged most of them?\\n' | rlm-orchestrate repl --context app.log
  rlm-orchestrate repl --context app.log --json < questions.txt > answers.jsonl

Each query is a run of its own (trace under runs/) and sees the earlier queries and
answers in `history`. Commands: :context PATH (a file for the next query, loaded into a
new slot), :vars, :runs, :help, :quit (or Ctrl-D). Ctrl-C cancels the running query;
the REPL and its variables stay. Line history is kept in <data-dir>/repl_history.
With piped stdin each line is a query and each answer is printed on stdout (one JSON
object a line with --json), without a prompt. Settings come from flags, RLM_* variables
and rlm.toml, as for `run`.
Exit codes: 0 done, 1 a query failed (piped stdin), 2 bad usage or input.")]
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
    Runs(crate::runs::RunsArgs),

    /// Score an RLM against the plain model on generated long-context suites.
    #[command(after_help = "\
Suites (generated locally from --seed, every answer checked automatically):
  sniah         one needle at depths 10-90 %          exact
  multi-needle  four needles, all to be found          set F1
  aggregate     count / most frequent / sum of records numeric or exact
  pairs         same-city pairs of records (quadratic)  numeric
Each item runs twice: the RLM (a normal run, with its trace) and the baseline (one
direct call to the same model with the context cut to --baseline-window characters).
Results: a table on the terminal and in OUT/table.md, every item in OUT/results.json,
the accuracy-vs-length chart in OUT/accuracy.svg.

Examples:
  rlm-orchestrate eval --suite sniah --lengths 8k,1m --base-url http://127.0.0.1:PORT/v1 --model oracle
      (with `mock-llm --oracle &` serving there: an offline model that writes the right code)
  rlm-orchestrate eval --suite sniah,aggregate --lengths 8k,64k --items 5 --model gpt-4o-mini --out eval-4o
  rlm-orchestrate eval --resume --out eval-4o ...   # skips the items already scored
Exit codes: 0 done, 1 failure, 2 bad usage, 130 interrupted (what was done is kept).")]
    Eval(Box<crate::eval::EvalArgs>),

    /// Serve rlm to MCP hosts (Claude Code, Codex, …) over stdio: rlm_run, vars_*, runs_*.
    #[command(after_help = "\
Tools: rlm_run (task, context_paths and/or inline context, optional model, provider,
base_url, env and budgets; answer as text, run id/usage/cost/forced as structured
content), vars_list, vars_get, vars_set, runs_list, runs_show. Every rlm_run uses the
flags given after `mcp` (and RLM_*, rlm.toml), then the call's own. Progress goes out
as MCP progress notifications; cancelling a call cancels its run and ends its children.
Stdout carries the protocol only.

Examples:
  rlm-orchestrate mcp --model gpt-4o-mini
  rlm-orchestrate mcp --base-url http://127.0.0.1:8080/v1 --model local --env python
  claude mcp add rlm -- rlm-orchestrate mcp --model gpt-4o-mini")]
    Mcp(Box<crate::mcp::McpArgs>),
}

/// Which API serves a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProviderArg {
    /// Any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, llama.cpp, Ollama, …).
    Openai,
    /// The Anthropic Messages API.
    Anthropic,
    /// A command as the model (`llm -m X`, `claude -p`): prompt in, answer on stdout.
    Cli,
}

/// Where the model's code runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EnvArg {
    /// A persistent python3 process.
    Python,
    /// Embedded JavaScript (QuickJS): no file system, network or processes.
    Js,
    /// No code at all: bounded micro-tools (ctx_grep, ctx_slice, …) called through
    /// tool calling, for small local models.
    Tools,
}

/// How tool calls travel under --env tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ToolProtocolArg {
    /// The provider's own tool calling (OpenAI tools, Anthropic tool_use).
    Native,
    /// One JSON object per call in a ```tool block of the reply (for endpoints
    /// without tool calling; always used with --provider cli).
    Text,
}

/// `--lazy-context`: when `context` is a lazy view of a referenced file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LazyContextArg {
    /// Lazy above --lazy-above bytes; a `str` below.
    Auto,
    /// Lazy for every referenced file.
    Always,
    /// Always a `str` loaded whole (bounded by --max-context-bytes).
    Never,
}

/// `--runner`: how agents and nested runs start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunnerArg {
    /// Processes of this machine.
    Local,
    /// Slurm jobs through `srun` (see --slurm-args).
    Slurm,
}

/// `--slurm-args`, split like a shell would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmArgs(pub rlm_orchestrator::runner::Runner);

fn parse_slurm_args(text: &str) -> Result<SlurmArgs, String> {
    rlm_orchestrator::runner::Runner::slurm(text).map(SlurmArgs)
}

/// `--sandbox`: how the Python kernel is confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SandboxArg {
    /// Confine with what the kernel supports (Landlock, seccomp, rlimits); say once
    /// what it cannot enforce.
    Auto,
    /// Refuse to run the kernel unless it can be fully confined.
    Strict,
    /// No confinement: the model's code runs as you, with your files and network.
    Off,
}

/// `--agent-sandbox` / `--agent-network`: a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOffArg {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// How `--context-dir` becomes `context`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DirAsArg {
    /// A list of file contents, in lexical order of their paths.
    List,
    /// `{relative path: content}`.
    Dict,
    /// One string, each file preceded by a `=== path ===` line.
    Concat,
}

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

/// The flags of `run` and `repl`: context, model, loop, sub-calls and budgets, output.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct RunOptions {
    /// A context file (repeatable; several make a list). `.json` is parsed, anything
    /// else is UTF-8 text. `-` reads stdin (give the task as an argument then).
    #[arg(long, value_name = "PATH", help_heading = "Context")]
    pub context: Vec<PathBuf>,

    /// A directory whose files (hidden ones skipped) make the context.
    #[arg(long, value_name = "DIR", env = "RLM_CONTEXT_DIR", conflicts_with_all = ["context", "context_var"], help_heading = "Context")]
    pub context_dir: Option<PathBuf>,

    /// Shape of a --context-dir context.
    #[arg(
        long,
        value_enum,
        default_value = "list",
        env = "RLM_DIR_AS",
        help_heading = "Context"
    )]
    pub dir_as: DirAsArg,

    /// Use an existing variable of the store as the context.
    #[arg(
        long,
        value_name = "KEY",
        env = "RLM_CONTEXT_VAR",
        conflicts_with = "context",
        help_heading = "Context"
    )]
    pub context_var: Option<String>,

    /// Refuse contexts larger than this many bytes that would be copied into the store
    /// or loaded whole (a file read lazily needs no such cap).
    #[arg(long, value_name = "N", default_value_t = 1 << 30, env = "RLM_MAX_CONTEXT_BYTES", help_heading = "Context")]
    pub max_context_bytes: u64,

    /// Copy --context files into the store instead of referencing them where they are
    /// (a referenced file must not change during the run; a copy cannot).
    #[arg(long, env = "RLM_COPY_CONTEXT", help_heading = "Context")]
    pub copy_context: bool,

    /// When the REPL's `context` is a lazy view of the file instead of a `str` loaded
    /// whole: above --lazy-above bytes (auto), for every referenced file, or never.
    #[arg(
        long,
        value_enum,
        value_name = "WHEN",
        default_value = "auto",
        env = "RLM_LAZY_CONTEXT",
        help_heading = "Context"
    )]
    pub lazy_context: LazyContextArg,

    /// The size above which --lazy-context auto reads a referenced file lazily.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 30, env = "RLM_LAZY_ABOVE", help_heading = "Context")]
    pub lazy_above: u64,

    /// API of the root model.
    #[arg(
        long,
        value_enum,
        default_value = "openai",
        env = "RLM_PROVIDER",
        help_heading = "Model"
    )]
    pub provider: ProviderArg,

    /// The root model's name.
    #[arg(
        long,
        value_name = "M",
        default_value = "gpt-4o-mini",
        env = "RLM_MODEL",
        help_heading = "Model"
    )]
    pub model: String,

    /// Endpoint of the root model (default: the provider's public API).
    #[arg(long, value_name = "URL", env = "RLM_BASE_URL", help_heading = "Model")]
    pub base_url: Option<String>,

    /// Environment variable holding the API key (default OPENAI_API_KEY / ANTHROPIC_API_KEY).
    #[arg(
        long,
        value_name = "NAME",
        env = "RLM_API_KEY_ENV",
        help_heading = "Model"
    )]
    pub api_key_env: Option<String>,

    /// Command used as the model with --provider cli (`{prompt}` or stdin).
    #[arg(long, value_name = "CMD", env = "RLM_LLM_CMD", help_heading = "Model")]
    pub llm_cmd: Option<String>,

    /// Model for sub-calls (llm_query, summarize); default: the root model.
    #[arg(long, value_name = "M", env = "RLM_SUB_MODEL", help_heading = "Model")]
    pub sub_model: Option<String>,

    /// API for sub-calls; default: the root's.
    #[arg(long, value_enum, env = "RLM_SUB_PROVIDER", help_heading = "Model")]
    pub sub_provider: Option<ProviderArg>,

    /// Endpoint for sub-calls; default: the root's (when the provider is the same).
    #[arg(
        long,
        value_name = "URL",
        env = "RLM_SUB_BASE_URL",
        help_heading = "Model"
    )]
    pub sub_base_url: Option<String>,

    /// Command for sub-calls with --sub-provider cli; default: --llm-cmd.
    #[arg(
        long,
        value_name = "CMD",
        env = "RLM_SUB_LLM_CMD",
        help_heading = "Model"
    )]
    pub sub_llm_cmd: Option<String>,

    /// Retries on 429, 5xx and connection errors (exponential backoff with jitter).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 4,
        env = "RLM_RETRIES",
        help_heading = "Model"
    )]
    pub retries: u32,

    /// Delay before the first retry in milliseconds; it doubles with each retry.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 500,
        env = "RLM_RETRY_BASE_DELAY_MS",
        help_heading = "Model"
    )]
    pub retry_base_delay_ms: u64,

    /// Seconds one model request may take.
    #[arg(
        long,
        value_name = "S",
        default_value_t = 300,
        env = "RLM_REQUEST_TIMEOUT",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Model"
    )]
    pub request_timeout: u64,

    /// Ask for whole responses instead of streaming them.
    #[arg(long, env = "RLM_NO_STREAM", help_heading = "Model")]
    pub no_stream: bool,

    /// Sampling temperature of every model call (0 to 2); default: the server's.
    #[arg(
        long,
        value_name = "T",
        env = "RLM_TEMPERATURE",
        value_parser = parse_temperature,
        help_heading = "Model"
    )]
    pub temperature: Option<f32>,

    /// Price of prompt tokens in USD per million, for cost accounting and --max-cost-usd.
    #[arg(
        long,
        value_name = "USD",
        env = "RLM_PRICE_INPUT",
        value_parser = parse_usd,
        allow_negative_numbers = true,
        help_heading = "Model"
    )]
    pub price_input: Option<f64>,

    /// Price of completion tokens in USD per million.
    #[arg(
        long,
        value_name = "USD",
        env = "RLM_PRICE_OUTPUT",
        value_parser = parse_usd,
        allow_negative_numbers = true,
        help_heading = "Model"
    )]
    pub price_output: Option<f64>,

    /// Where the model's code runs.
    #[arg(
        long,
        value_enum,
        default_value = "python",
        env = "RLM_ENV",
        help_heading = "Loop"
    )]
    pub env: EnvArg,

    /// The python3 executable of the REPL (--env python).
    #[arg(
        long,
        value_name = "PATH",
        default_value = "python3",
        env = "RLM_PYTHON",
        help_heading = "Loop"
    )]
    pub python: PathBuf,

    /// Confinement of the Python kernel and what it starts: auto confines where the
    /// Linux kernel allows (Landlock, seccomp, rlimits) and says once what it cannot;
    /// strict refuses to run unconfined; off runs model code as you.
    #[arg(
        long,
        value_name = "MODE",
        value_enum,
        default_value = "auto",
        env = "RLM_SANDBOX",
        help_heading = "Loop"
    )]
    pub sandbox: SandboxArg,

    /// Address-space limit of the confined Python kernel, in MiB; default 4096 or 3×
    /// the context's size, whichever is larger.
    #[arg(
        long,
        value_name = "MIB",
        env = "RLM_KERNEL_MEMORY_MB",
        value_parser = clap::value_parser!(u64).range(64..),
        help_heading = "Loop"
    )]
    pub kernel_memory_mb: Option<u64>,

    /// Memory limit of the JavaScript engine (--env js), in MiB; default 4× the
    /// context's size, at least 1024.
    #[arg(
        long,
        value_name = "MIB",
        env = "RLM_JS_MEMORY_MB",
        value_parser = clap::value_parser!(u64).range(16..),
        help_heading = "Loop"
    )]
    pub js_memory_mb: Option<u64>,

    /// The micro-tools offered under --env tools, comma-separated (final_answer is
    /// always offered) [default: ctx_length,ctx_grep,ctx_slice,ctx_summarize,final_answer].
    #[arg(
        long,
        value_name = "LIST",
        env = "RLM_TOOLS",
        value_parser = parse_tools,
        help_heading = "Loop"
    )]
    pub tools: Option<ToolList>,

    /// How tool calls travel under --env tools.
    #[arg(
        long,
        value_enum,
        value_name = "HOW",
        default_value = "native",
        env = "RLM_TOOL_PROTOCOL",
        help_heading = "Loop"
    )]
    pub tool_protocol: ToolProtocolArg,

    /// A file whose text replaces the built-in system prompt.
    #[arg(
        long,
        value_name = "FILE",
        env = "RLM_SYSTEM_PROMPT",
        help_heading = "Loop"
    )]
    pub system_prompt: Option<PathBuf>,

    /// Depth at which sub_rlm becomes a plain sub-model call.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 2,
        env = "RLM_MAX_DEPTH",
        help_heading = "Loop"
    )]
    pub max_depth: u32,

    /// Model turns before an answer is forced.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 20,
        env = "RLM_MAX_ITERATIONS",
        help_heading = "Loop"
    )]
    pub max_iterations: u32,

    /// REPL output characters shown to the model per block (more is truncated).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 20_000,
        env = "RLM_MAX_OUTPUT_CHARS",
        help_heading = "Loop"
    )]
    pub max_output_chars: usize,

    /// Output longer than this fraction of the context is redacted.
    #[arg(
        long,
        value_name = "R",
        default_value_t = 0.25,
        env = "RLM_REDACT_RATIO",
        help_heading = "Loop"
    )]
    pub redact_ratio: f64,

    /// Variables shown to the model in the state inventory.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 20,
        env = "RLM_STATE_VARS",
        help_heading = "Loop"
    )]
    pub state_vars: usize,

    /// Seconds one code block may run before it is interrupted.
    #[arg(
        long,
        value_name = "S",
        default_value_t = 120,
        env = "RLM_EXEC_TIMEOUT",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Loop"
    )]
    pub exec_timeout: u64,

    /// JSON Schema that SUBMIT payloads must satisfy.
    #[arg(
        long,
        value_name = "FILE",
        env = "RLM_OUTPUT_SCHEMA",
        help_heading = "Loop"
    )]
    pub output_schema: Option<PathBuf>,

    /// External agent command for spawn_agent: `{prompt}`, `{prompt_file}`,
    /// `{result_file}`, `{agent_id}` are filled in; without `{prompt}`/`{prompt_file}`
    /// the prompt goes to stdin. E.g. `claude -p {prompt}`, `llm -m gpt-4o-mini`.
    #[arg(
        long,
        value_name = "CMD",
        env = "RLM_AGENT_CMD",
        help_heading = "Sub-calls and budgets"
    )]
    pub agent_cmd: Option<String>,

    /// Confine external agents: they read the system, their program file, their prompt
    /// and the store, and write only the store and their temporary directory.
    #[arg(
        long,
        value_name = "on|off",
        value_enum,
        default_value = "off",
        env = "RLM_AGENT_SANDBOX",
        help_heading = "Sub-calls and budgets"
    )]
    pub agent_sandbox: OnOffArg,

    /// Network of confined agents (--agent-sandbox on): on by default, since agent
    /// CLIs call their APIs.
    #[arg(
        long,
        value_name = "on|off",
        value_enum,
        default_value = "on",
        env = "RLM_AGENT_NETWORK",
        help_heading = "Sub-calls and budgets"
    )]
    pub agent_network: OnOffArg,

    /// Environment variable passed to external agents (repeatable); none are by default.
    #[arg(long, value_name = "NAME", help_heading = "Sub-calls and budgets")]
    pub agent_env: Vec<String>,

    /// Seconds a sub-agent (external or nested run) may take before its process group
    /// is terminated.
    #[arg(
        long,
        value_name = "S",
        default_value_t = 600,
        env = "RLM_AGENT_TIMEOUT",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Sub-calls and budgets"
    )]
    pub agent_timeout: u64,

    /// Sub-calls running at once (llm_query_parallel).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 4,
        env = "RLM_MAX_PARALLEL",
        help_heading = "Sub-calls and budgets"
    )]
    pub max_parallel: usize,

    /// Model requests in flight at once across the whole run tree (every depth, every
    /// nested run); default: no limit beyond --max-parallel per call.
    #[arg(
        long,
        value_name = "N",
        env = "RLM_MAX_REQUESTS",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Sub-calls and budgets"
    )]
    pub max_requests: Option<u64>,

    /// External agent processes running at once across the whole run tree.
    #[arg(
        long,
        value_name = "N",
        env = "RLM_MAX_AGENTS",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Sub-calls and budgets"
    )]
    pub max_agents: Option<u64>,

    /// How agents and nested runs start: processes of this machine, or Slurm jobs
    /// (each through `srun`, named rlm-<agent id>).
    #[arg(
        long,
        value_enum,
        default_value = "local",
        env = "RLM_RUNNER",
        help_heading = "Sub-calls and budgets"
    )]
    pub runner: RunnerArg,

    /// Arguments for `srun` with --runner slurm (partition, time, memory, account), e.g.
    /// "--partition=batch --time=0:30:00 --mem=4G".
    #[arg(
        long,
        value_name = "ARGS",
        env = "RLM_SLURM_ARGS",
        allow_hyphen_values = true,
        value_parser = parse_slurm_args,
        help_heading = "Sub-calls and budgets"
    )]
    pub slurm_args: Option<SlurmArgs>,

    /// Longest prompt a sub-call may send, in characters; longer fails fast.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 400_000,
        env = "RLM_SUB_CONTEXT_CHARS",
        help_heading = "Sub-calls and budgets"
    )]
    pub sub_context_chars: usize,

    /// Stop after this many model calls (root and sub-calls).
    #[arg(
        long,
        value_name = "N",
        env = "RLM_MAX_LLM_CALLS",
        help_heading = "Sub-calls and budgets"
    )]
    pub max_llm_calls: Option<u64>,

    /// Stop after this many tokens (prompt + completion).
    #[arg(
        long,
        value_name = "N",
        env = "RLM_MAX_TOKENS",
        help_heading = "Sub-calls and budgets"
    )]
    pub max_tokens: Option<u64>,

    /// Stop after this cost in USD (needs --price-input/--price-output).
    #[arg(
        long,
        value_name = "USD",
        env = "RLM_MAX_COST_USD",
        value_parser = parse_usd,
        allow_negative_numbers = true,
        help_heading = "Sub-calls and budgets"
    )]
    pub max_cost_usd: Option<f64>,

    /// Stop after this many seconds.
    #[arg(
        long,
        value_name = "S",
        env = "RLM_MAX_TIME",
        help_heading = "Sub-calls and budgets"
    )]
    pub max_time: Option<u64>,

    /// Ask again instead of answering identical sub-calls from the store's cache.
    #[arg(long, env = "RLM_NO_CACHE", help_heading = "Sub-calls and budgets")]
    pub no_cache: bool,

    /// Memory for cached variable values, in MiB.
    #[arg(
        long,
        value_name = "MIB",
        default_value_t = 256,
        env = "RLM_MEMORY_CEILING_MB",
        help_heading = "Sub-calls and budgets"
    )]
    pub memory_ceiling_mb: u64,

    /// Print one JSON result object instead of the answer.
    #[arg(long, env = "RLM_JSON", help_heading = "Output")]
    pub json: bool,

    /// Stream events to stdout as JSON lines.
    #[arg(long, env = "RLM_EVENTS", help_heading = "Output")]
    pub events: bool,
}

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

/// `completions` options.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to write a completion script for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `vars`: one of its sub-commands.
#[derive(Debug, Args)]
pub struct VarsArgs {
    /// What to do with the variables.
    #[command(subcommand)]
    pub command: VarsCommand,
}

/// The `vars` sub-commands.
#[derive(Debug, Subcommand)]
pub enum VarsCommand {
    /// List variables: key, type, scope, size, creation time, short sha256.
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars list
  rlm-orchestrate vars list --scope agent:root --type result
  rlm-orchestrate vars list --json | jq -r '.[].key'

Unreadable files in variables/ are reported as warnings on stderr and skipped.")]
    List(ListArgs),

    /// Show a variable's reference (metadata) and a preview of its value.
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars show chunk-3
  rlm-orchestrate vars show chunk-3 --json | jq -r .ref.sha256")]
    Show(ShowArgs),

    /// Print a variable's value: text as is, anything else as pretty JSON, and for a
    /// `file` variable the file it refers to (refused if it changed since).
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars get notes
  rlm-orchestrate vars get big-log | grep ERROR
  rlm-orchestrate vars get sub-result-7 > answer.json

Values are streamed, so values of any size print in bounded memory.")]
    Get(KeyArgs),

    /// Store a value: VALUE or the contents of --file, as text or (--json) as JSON.
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars set notes 'remember the milk'
  rlm-orchestrate vars set big-log --file server.log
  rlm-orchestrate vars set huge-log --ref /data/huge.log
  cat report.md | rlm-orchestrate vars set report --file -
  rlm-orchestrate vars set config --json '{\"depth\": 2}'
  rlm-orchestrate vars set tail --type stream --file tail.log
  rlm-orchestrate vars set counter --json 1 --if-sha256 none
  sha=$(rlm-orchestrate vars show counter --json | jq -r .ref.sha256)
  rlm-orchestrate vars set counter --json 2 --if-sha256 \"$sha\"

Text files are streamed (bounded memory) unless --json or --if-sha256 is given.
A value that is not valid UTF-8 (text) or not valid JSON (--json) is rejected with
exit code 2 and the stored value is left as it was; a failed --if-sha256 check exits 3.")]
    Set(SetArgs),

    /// Remove a variable.
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars rm chunk-3

Exits 4 when the variable does not exist.")]
    Rm(KeyArgs),

    /// Remove every variable in the data directory and print how many were removed.
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars clear
  RLM_DATA_DIR=/tmp/scratch rlm-orchestrate vars clear

Files in variables/ that are not readable variables are left alone.")]
    Clear,

    /// Print the absolute path of a variable's file, as given to sub-agents (for a
    /// `file` variable: the file it refers to).
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars path chunk-3
  jq -r .value \"$(rlm-orchestrate vars path chunk-3)\"

The file is plain JSON; the data is under its \"value\" field.")]
    Path(KeyArgs),
}

/// `vars list` options.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only variables of this scope (global, agent:ID, session:ID, …).
    #[arg(long, value_name = "SCOPE")]
    pub scope: Option<String>,

    /// Only variables of this type.
    #[arg(long = "type", value_name = "TYPE", value_enum)]
    pub var_type: Option<TypeArg>,

    /// Print a JSON array of references exactly as stored.
    #[arg(long)]
    pub json: bool,
}

/// `vars show` options.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The variable's key.
    pub key: String,

    /// Print `{"ref": …, "path": …, "preview": …}` as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A sub-command taking just a key.
#[derive(Debug, Args)]
pub struct KeyArgs {
    /// The variable's key.
    pub key: String,
}

/// `vars set` options.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// The variable's key: any UTF-8, 1 to 512 bytes.
    pub key: String,

    /// The value, stored as text (parsed as JSON with --json).
    #[arg(required_unless_present_any = ["file", "reference"], conflicts_with_all = ["file", "reference"])]
    pub value: Option<String>,

    /// Read the value from FILE instead; `-` reads stdin.
    #[arg(short, long, value_name = "FILE", conflicts_with = "reference")]
    pub file: Option<PathBuf>,

    /// Store a `file` variable that refers to PATH where it is (nothing is copied;
    /// readers check the file has not changed), as `run --context PATH` does.
    #[arg(long = "ref", value_name = "PATH", conflicts_with_all = ["json", "var_type", "if_sha256"])]
    pub reference: Option<PathBuf>,

    /// Parse VALUE or FILE as JSON instead of storing it as text.
    #[arg(long)]
    pub json: bool,

    /// Scope of the variable (default: global).
    #[arg(long, value_name = "SCOPE")]
    pub scope: Option<String>,

    /// Type of the variable (default: inferred from the value; `stream` only when given).
    #[arg(long = "type", value_name = "TYPE", value_enum)]
    pub var_type: Option<TypeArg>,

    /// Write only if the variable's current sha256 is HEX, or with `none` only if it
    /// does not exist yet; otherwise exit 3.
    #[arg(long = "if-sha256", value_name = "HEX|none", value_parser = parse_expected)]
    pub if_sha256: Option<Expected>,
}

/// A variable type as written on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TypeArg {
    /// A string.
    Text,
    /// A JSON array, object or scalar.
    Json,
    /// An object with `entries` or `memories`.
    Memory,
    /// An object with `result` or `output`.
    Result,
    /// Streaming data; never inferred.
    Stream,
}

impl From<TypeArg> for VariableType {
    fn from(t: TypeArg) -> Self {
        match t {
            TypeArg::Text => Self::Text,
            TypeArg::Json => Self::Json,
            TypeArg::Memory => Self::Memory,
            TypeArg::Result => Self::Result,
            TypeArg::Stream => Self::Stream,
        }
    }
}

/// Parses `--if-sha256`: `none`, or 64 hex digits.
fn parse_expected(s: &str) -> Result<Expected, String> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(Expected::Absent);
    }
    if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(Expected::Sha256(s.to_ascii_lowercase()));
    }
    Err("expected a sha256 (64 hex digits) or `none`".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn if_sha256_accepts_none_and_hex_only() {
        assert_eq!(parse_expected("NONE"), Ok(Expected::Absent));
        let hex = "AB".repeat(32);
        assert_eq!(
            parse_expected(&hex),
            Ok(Expected::Sha256(hex.to_ascii_lowercase()))
        );
        assert!(parse_expected("abc").is_err());
        assert!(parse_expected(&"g".repeat(64)).is_err());
    }

    #[test]
    fn amounts_of_usd_are_finite_and_not_negative() {
        assert_eq!(parse_usd("0.5"), Ok(0.5));
        assert_eq!(parse_usd("0"), Ok(0.0));
        for bad in ["NaN", "nan", "inf", "-inf", "-0.01", "1e999", "x"] {
            assert!(parse_usd(bad).is_err(), "{bad} was accepted");
        }
    }
}

/// `--tools`: the micro-tools offered, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolList(pub Vec<MicroTool>);

/// Parses `--tools`.
fn parse_tools(list: &str) -> Result<ToolList, String> {
    parse_tool_list(list)
        .map(ToolList)
        .map_err(|e| e.to_string())
}

/// Parses `--temperature`: a number from 0 to 2.
fn parse_temperature(text: &str) -> Result<f32, String> {
    match text.trim().parse::<f32>() {
        Ok(t) if (0.0..=2.0).contains(&t) => Ok(t),
        _ => Err(format!("{text:?} is not a temperature from 0 to 2")),
    }
}

/// Parses an amount of USD (`--max-cost-usd`, `--price-*`): a finite number ≥ 0, so
/// that `NaN`, `inf` or a negative price cannot switch the cost limit off.
fn parse_usd(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd >= 0.0 => Ok(usd),
        _ => Err(format!(
            "{text:?} is not an amount of USD (a finite number ≥ 0)"
        )),
    }
}

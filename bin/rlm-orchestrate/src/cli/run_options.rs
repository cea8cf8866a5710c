//! The flags of a run, shared by `run`, `repl`, `eval`, `mcp` and `config show`:
//! context, model, environment, confinement, sub-agents, budgets, output. `settings.rs`
//! turns them into the library's run settings.
//!
//! `--help` groups the flags under their `help_heading`, headings in the order of
//! their first field here (so a new flag goes beside the others of its heading); `-h`
//! shows only the flags without `hide_short_help`, the common ones, and stays on one
//! screen (a test counts its lines): a new flag gets `hide_short_help = true` unless
//! most runs need it. `docs/cli.md` lists them all (regenerate it after a change:
//! `cargo run -q -p rlm-orchestrate -- __markdown-help > docs/cli.md`).

use std::path::PathBuf;

use clap::Args;

use super::values::{
    parse_agent, parse_corrections, parse_endpoint, parse_slurm_args, parse_temperature,
    parse_tools, parse_usd, AgentArg, ConstrainArg, CorrectionList, DirAsArg, EndpointArg, EnvArg,
    LazyContextArg, OnOffArg, ProviderArg, RunnerArg, SandboxArg, SlurmArgs, ToolList,
    ToolProtocolArg,
};

/// The help headings of the run flags, in the order `--help` shows them.
pub const HEADINGS: &[&str] = &[
    "Context",
    "Model",
    "Environment",
    "Confinement",
    "Sub-agents",
    "Budgets",
    "Output",
    "Advanced",
];

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
        help_heading = "Context",
        hide_short_help = true
    )]
    pub dir_as: DirAsArg,

    /// Follow the symbolic links of --context-dir that resolve inside it (by default
    /// none is followed; links are listed as skipped in what the model is told).
    #[arg(
        long,
        env = "RLM_FOLLOW_SYMLINKS",
        help_heading = "Context",
        hide_short_help = true
    )]
    pub follow_symlinks: bool,

    /// Use an existing variable of the store as the context.
    #[arg(
        long,
        value_name = "KEY",
        env = "RLM_CONTEXT_VAR",
        conflicts_with = "context",
        help_heading = "Context",
        hide_short_help = true
    )]
    pub context_var: Option<String>,

    /// Refuse contexts larger than this many bytes that would be copied into the store
    /// or loaded whole (a file read lazily needs no such cap).
    #[arg(long, value_name = "N", default_value_t = 1 << 30, env = "RLM_MAX_CONTEXT_BYTES", help_heading = "Context", hide_short_help = true)]
    pub max_context_bytes: u64,

    /// Copy --context files into the store instead of referencing them where they are
    /// (a referenced file must not change during the run; a copy cannot).
    #[arg(
        long,
        env = "RLM_COPY_CONTEXT",
        help_heading = "Context",
        hide_short_help = true
    )]
    pub copy_context: bool,

    /// When the REPL's `context` is a lazy view of the file instead of a `str` loaded
    /// whole: above --lazy-above bytes (auto), for every referenced file, or never.
    #[arg(
        long,
        value_enum,
        value_name = "WHEN",
        default_value = "auto",
        env = "RLM_LAZY_CONTEXT",
        help_heading = "Context",
        hide_short_help = true
    )]
    pub lazy_context: LazyContextArg,

    /// The size above which --lazy-context auto reads a referenced file lazily.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 30, env = "RLM_LAZY_ABOVE", help_heading = "Context", hide_short_help = true)]
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
        help_heading = "Model",
        hide_short_help = true
    )]
    pub api_key_env: Option<String>,

    /// Command used as the model with --provider cli (`{prompt}` or stdin).
    #[arg(
        long,
        value_name = "CMD",
        env = "RLM_LLM_CMD",
        help_heading = "Model",
        hide_short_help = true
    )]
    pub llm_cmd: Option<String>,

    /// The root model's context window in tokens (prompt and answer together); default:
    /// what the server says, else the table of known models, else 8192.
    #[arg(
        long,
        value_name = "TOKENS",
        env = "RLM_CONTEXT_WINDOW",
        value_parser = clap::value_parser!(u32).range(1024..),
        help_heading = "Model", hide_short_help = true
    )]
    pub context_window: Option<u32>,

    /// The sub-model's context window in tokens; default: the root's when the sub-model
    /// is the root model, else learned like the root's.
    #[arg(
        long,
        value_name = "TOKENS",
        env = "RLM_SUB_CONTEXT_WINDOW",
        value_parser = clap::value_parser!(u32).range(1024..),
        help_heading = "Model", hide_short_help = true
    )]
    pub sub_context_window: Option<u32>,

    /// Hold the root model's replies to their form by the server: the loop's grammar
    /// for code, the calls' JSON schema for tools and plans (docs/constrain.md).
    #[arg(
        long,
        value_enum,
        default_value = "auto",
        env = "RLM_CONSTRAIN",
        help_heading = "Model",
        hide_short_help = true
    )]
    pub constrain: ConstrainArg,

    /// --constrain for the sub-model (its server is asked on its own); default: the root's.
    #[arg(
        long,
        value_enum,
        env = "RLM_SUB_CONSTRAIN",
        help_heading = "Model",
        hide_short_help = true
    )]
    pub sub_constrain: Option<ConstrainArg>,

    /// Model for sub-calls (llm_query, summarize); default: the root model.
    #[arg(
        long,
        value_name = "M",
        env = "RLM_SUB_MODEL",
        help_heading = "Model",
        hide_short_help = true
    )]
    pub sub_model: Option<String>,

    /// API for sub-calls; default: the root's.
    #[arg(
        long,
        value_enum,
        env = "RLM_SUB_PROVIDER",
        help_heading = "Model",
        hide_short_help = true
    )]
    pub sub_provider: Option<ProviderArg>,

    /// Endpoint for sub-calls; default: the root's (when the provider is the same).
    #[arg(
        long,
        value_name = "URL",
        env = "RLM_SUB_BASE_URL",
        help_heading = "Model",
        hide_short_help = true
    )]
    pub sub_base_url: Option<String>,

    /// Command for sub-calls with --sub-provider cli; default: --llm-cmd.
    #[arg(
        long,
        value_name = "CMD",
        env = "RLM_SUB_LLM_CMD",
        help_heading = "Model",
        hide_short_help = true
    )]
    pub sub_llm_cmd: Option<String>,

    /// Retries on 429, 5xx and connection errors (exponential backoff with jitter).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 4,
        env = "RLM_RETRIES",
        help_heading = "Model",
        hide_short_help = true
    )]
    pub retries: u32,

    /// Delay before the first retry in milliseconds; it doubles with each retry.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 500,
        env = "RLM_RETRY_BASE_DELAY_MS",
        help_heading = "Model",
        hide_short_help = true
    )]
    pub retry_base_delay_ms: u64,

    /// Seconds one model request may take.
    #[arg(
        long,
        value_name = "S",
        default_value_t = 300,
        env = "RLM_REQUEST_TIMEOUT",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Model", hide_short_help = true
    )]
    pub request_timeout: u64,

    /// Bytes one model reply may take, whole body or stream, before the call fails
    /// (a runaway stream stops there).
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = rlm_orchestrator::provider::config::DEFAULT_MAX_REPLY_BYTES,
        env = "RLM_MAX_REPLY_BYTES",
        value_parser = clap::value_parser!(u64).range(1024..),
        help_heading = "Model", hide_short_help = true
    )]
    pub max_reply_bytes: u64,

    /// Ask for whole responses instead of streaming them.
    #[arg(
        long,
        env = "RLM_NO_STREAM",
        help_heading = "Model",
        hide_short_help = true
    )]
    pub no_stream: bool,

    /// Sampling temperature of every model call (0 to 2); default: the server's.
    #[arg(
        long,
        value_name = "T",
        env = "RLM_TEMPERATURE",
        value_parser = parse_temperature,
        help_heading = "Model", hide_short_help = true
    )]
    pub temperature: Option<f32>,

    /// Price of prompt tokens in USD per million, for cost accounting and --max-cost-usd.
    #[arg(
        long,
        value_name = "USD",
        env = "RLM_PRICE_INPUT",
        value_parser = parse_usd,
        allow_negative_numbers = true,
        help_heading = "Model", hide_short_help = true
    )]
    pub price_input: Option<f64>,

    /// Price of completion tokens in USD per million.
    #[arg(
        long,
        value_name = "USD",
        env = "RLM_PRICE_OUTPUT",
        value_parser = parse_usd,
        allow_negative_numbers = true,
        help_heading = "Model", hide_short_help = true
    )]
    pub price_output: Option<f64>,

    /// Where the model's code runs.
    #[arg(
        long,
        value_enum,
        default_value = "python",
        env = "RLM_ENV",
        help_heading = "Environment"
    )]
    pub env: EnvArg,

    /// The python3 executable of the REPL (--env python).
    #[arg(
        long,
        value_name = "PATH",
        default_value = "python3",
        env = "RLM_PYTHON",
        help_heading = "Environment",
        hide_short_help = true
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
        help_heading = "Confinement",
        hide_short_help = true
    )]
    pub sandbox: SandboxArg,

    /// Address-space limit of the confined Python kernel, in MiB; default 4096 or 3×
    /// the context's size, whichever is larger.
    #[arg(
        long,
        value_name = "MIB",
        env = "RLM_KERNEL_MEMORY_MB",
        value_parser = clap::value_parser!(u64).range(64..),
        help_heading = "Confinement", hide_short_help = true
    )]
    pub kernel_memory_mb: Option<u64>,

    /// Memory limit of the JavaScript engine (--env js), in MiB; default 4× the
    /// context's size, at least 1024.
    #[arg(
        long,
        value_name = "MIB",
        env = "RLM_JS_MEMORY_MB",
        value_parser = clap::value_parser!(u64).range(16..),
        help_heading = "Confinement", hide_short_help = true
    )]
    pub js_memory_mb: Option<u64>,

    /// The micro-tools offered under --env tools, comma-separated (final_answer is
    /// always offered) [default: ctx_length,ctx_grep,ctx_slice,ctx_summarize,final_answer].
    #[arg(
        long,
        value_name = "LIST",
        env = "RLM_TOOLS",
        value_parser = parse_tools,
        help_heading = "Environment", hide_short_help = true
    )]
    pub tools: Option<ToolList>,

    /// How tool calls travel under --env tools.
    #[arg(
        long,
        value_enum,
        value_name = "HOW",
        default_value = "native",
        env = "RLM_TOOL_PROTOCOL",
        help_heading = "Environment",
        hide_short_help = true
    )]
    pub tool_protocol: ToolProtocolArg,

    /// The correction rules the loop asks: all, none, or a comma list of names (docs/loop.md; `config show` lists them).
    #[arg(
        long,
        value_name = "all|none|LIST",
        default_value = "all",
        env = "RLM_CORRECTIONS",
        value_parser = parse_corrections,
        help_heading = "Environment", hide_short_help = true
    )]
    pub corrections: CorrectionList,

    /// A file whose text replaces the built-in system prompt.
    #[arg(
        long,
        value_name = "FILE",
        env = "RLM_SYSTEM_PROMPT",
        help_heading = "Environment",
        hide_short_help = true
    )]
    pub system_prompt: Option<PathBuf>,

    /// Depth at which sub_rlm becomes a plain sub-model call.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 2,
        env = "RLM_MAX_DEPTH",
        help_heading = "Sub-agents",
        hide_short_help = true
    )]
    pub max_depth: u32,

    /// Model turns before an answer is forced.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 20,
        env = "RLM_MAX_ITERATIONS",
        help_heading = "Budgets",
        hide_short_help = true
    )]
    pub max_iterations: u32,

    /// REPL output characters shown to the model per block (more is truncated).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 20_000,
        env = "RLM_MAX_OUTPUT_CHARS",
        help_heading = "Environment",
        hide_short_help = true
    )]
    pub max_output_chars: usize,

    /// Output longer than this fraction of the context is redacted.
    #[arg(
        long,
        value_name = "R",
        default_value_t = 0.25,
        env = "RLM_REDACT_RATIO",
        help_heading = "Environment",
        hide_short_help = true
    )]
    pub redact_ratio: f64,

    /// Variables shown to the model in the state inventory.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 20,
        env = "RLM_STATE_VARS",
        help_heading = "Environment",
        hide_short_help = true
    )]
    pub state_vars: usize,

    /// Seconds one code block may run before it is interrupted, the sub-calls, agents and
    /// nested runs it waits on included: one still running then is stopped and its result
    /// is a timeout (give them longer with a larger value; --agent-timeout bounds each).
    #[arg(
        long,
        value_name = "S",
        default_value_t = 120,
        env = "RLM_EXEC_TIMEOUT",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Environment", hide_short_help = true
    )]
    pub exec_timeout: u64,

    /// JSON Schema that SUBMIT payloads must satisfy.
    #[arg(
        long,
        value_name = "FILE",
        env = "RLM_OUTPUT_SCHEMA",
        help_heading = "Output",
        hide_short_help = true
    )]
    pub output_schema: Option<PathBuf>,

    /// External agent for spawn_agent, ready to use: `claude` (Claude Code), `codex`
    /// (Codex CLI), `llm`, or a preset file. Print one with `config show --agent NAME`.
    #[arg(
        long,
        value_name = "NAME|FILE",
        env = "RLM_AGENT",
        value_parser = parse_agent,
        conflicts_with = "agent_cmd",
        help_heading = "Sub-agents"
    )]
    pub agent: Option<AgentArg>,

    /// External agent command for spawn_agent: `{prompt}`, `{prompt_file}`,
    /// `{result_file}`, `{agent_id}`, `{result_key}`, `{rlm_bin}`, `{data_dir}`,
    /// `{agent_tmp}`, `{read_path}`, `{env:NAME}` are filled in; without
    /// `{prompt}`/`{prompt_file}` the prompt goes to stdin. E.g. `my-agent {prompt}`.
    #[arg(
        long,
        value_name = "CMD",
        env = "RLM_AGENT_CMD",
        help_heading = "Sub-agents",
        hide_short_help = true
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
        help_heading = "Confinement",
        hide_short_help = true
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
        help_heading = "Confinement",
        hide_short_help = true
    )]
    pub agent_network: OnOffArg,

    /// With --agent-network off: an endpoint confined agents may still reach, as
    /// HOST:PORT or a URL (repeatable). Only its TCP port is enforced (any host), and
    /// there is no DNS: give an IP address or a name in /etc/hosts.
    #[arg(
        long,
        value_name = "HOST:PORT|URL",
        value_parser = parse_endpoint,
        help_heading = "Confinement", hide_short_help = true
    )]
    pub agent_allow_connect: Vec<EndpointArg>,

    /// Environment variable passed to external agents (repeatable); none are by default.
    #[arg(
        long,
        value_name = "NAME",
        help_heading = "Sub-agents",
        hide_short_help = true
    )]
    pub agent_env: Vec<String>,

    /// Let the --agent preset's CLI read your own config (Claude Code's and Codex's MCP
    /// servers, Codex's config.toml); by default the agents start none of them.
    #[arg(
        long,
        env = "RLM_AGENT_USER_CONFIG",
        help_heading = "Sub-agents",
        hide_short_help = true
    )]
    pub agent_user_config: bool,

    /// Seconds a sub-agent (external or nested run) may take before its process group
    /// is terminated; a code block that waits on it still ends at --exec-timeout (the
    /// agent then ends with a timeout result), so keep that larger to give agents this long.
    #[arg(
        long,
        value_name = "S",
        default_value_t = 600,
        env = "RLM_AGENT_TIMEOUT",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Sub-agents", hide_short_help = true
    )]
    pub agent_timeout: u64,

    /// Sub-calls running at once (llm_query_parallel).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 4,
        env = "RLM_MAX_PARALLEL",
        help_heading = "Sub-agents"
    )]
    pub max_parallel: usize,

    /// Model requests in flight at once across the whole run tree (every depth, every
    /// nested run); default: no limit beyond --max-parallel per call.
    #[arg(
        long,
        value_name = "N",
        env = "RLM_MAX_REQUESTS",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Sub-agents", hide_short_help = true
    )]
    pub max_requests: Option<u64>,

    /// External agent processes running at once across the whole run tree.
    #[arg(
        long,
        value_name = "N",
        env = "RLM_MAX_AGENTS",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Sub-agents", hide_short_help = true
    )]
    pub max_agents: Option<u64>,

    /// How agents and nested runs start: processes of this machine, or Slurm jobs
    /// (each through `srun`, named rlm-<agent id>).
    #[arg(
        long,
        value_enum,
        default_value = "local",
        env = "RLM_RUNNER",
        help_heading = "Sub-agents",
        hide_short_help = true
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
        help_heading = "Sub-agents", hide_short_help = true
    )]
    pub slurm_args: Option<SlurmArgs>,

    /// Longest prompt a sub-call may send, in characters; longer fails fast.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 400_000,
        env = "RLM_SUB_CONTEXT_CHARS",
        help_heading = "Advanced",
        hide_short_help = true
    )]
    pub sub_context_chars: usize,

    /// Stop after this many model calls (root and sub-calls).
    #[arg(
        long,
        value_name = "N",
        // At least the forced answer's call, which the budget includes.
        value_parser = clap::value_parser!(u64).range(1..),
        env = "RLM_MAX_LLM_CALLS",
        help_heading = "Budgets"
    )]
    pub max_llm_calls: Option<u64>,

    /// Stop after this many tokens (prompt + completion).
    #[arg(
        long,
        value_name = "N",
        env = "RLM_MAX_TOKENS",
        help_heading = "Budgets",
        hide_short_help = true
    )]
    pub max_tokens: Option<u64>,

    /// Stop after this cost in USD (needs --price-input/--price-output).
    #[arg(
        long,
        value_name = "USD",
        env = "RLM_MAX_COST_USD",
        value_parser = parse_usd,
        allow_negative_numbers = true,
        help_heading = "Budgets", hide_short_help = true
    )]
    pub max_cost_usd: Option<f64>,

    /// Stop after this many seconds.
    #[arg(long, value_name = "S", env = "RLM_MAX_TIME", help_heading = "Budgets")]
    pub max_time: Option<u64>,

    /// Ask again instead of answering identical sub-calls from the store's cache.
    #[arg(
        long,
        env = "RLM_NO_CACHE",
        help_heading = "Sub-agents",
        hide_short_help = true
    )]
    pub no_cache: bool,

    /// Memory for cached variable values, in MiB.
    #[arg(
        long,
        value_name = "MIB",
        default_value_t = 256,
        env = "RLM_MEMORY_CEILING_MB",
        help_heading = "Advanced",
        hide_short_help = true
    )]
    pub memory_ceiling_mb: u64,

    /// Print one JSON result object instead of the answer.
    #[arg(long, env = "RLM_JSON", help_heading = "Output")]
    pub json: bool,

    /// Stream events to stdout as JSON lines.
    #[arg(long, env = "RLM_EVENTS", help_heading = "Output")]
    pub events: bool,
}

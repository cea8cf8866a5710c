//! From parsed flags to the library's [`RunSettings`]: the only place the command
//! line's grammar meets the run's settings. `run`, `repl` and `config show` all go
//! through it, so they agree on what a flag means.

use std::time::Duration;

use rlm_orchestrator::accounting::Limits;
use rlm_orchestrator::context::{ContextSpec, DirAs, LazyMode, LazyPolicy};
use rlm_orchestrator::env::tools::{MicroTool, ToolProtocol};
use rlm_orchestrator::env::EnvKind;
use rlm_orchestrator::provider::{Prices, ProviderConfig, ProviderKind};
use rlm_orchestrator::runner::Runner;
use rlm_orchestrator::settings::RunSettings;

use crate::cli::values::{
    AgentArg, DirAsArg, EnvArg, LazyContextArg, OnOffArg, ProviderArg, RunnerArg, SandboxArg,
    SlurmArgs, ToolProtocolArg,
};
use crate::cli::{GlobalArgs, RunOptions};

/// `--lazy-context` and `--lazy-above`.
pub fn lazy_policy(args: &RunOptions) -> LazyPolicy {
    LazyPolicy {
        mode: match args.lazy_context {
            LazyContextArg::Auto => LazyMode::Auto,
            LazyContextArg::Always => LazyMode::Always,
            LazyContextArg::Never => LazyMode::Never,
        },
        above_bytes: args.lazy_above,
    }
}

/// The settings the flags of `run` / `repl` describe.
pub fn run_settings(global: &GlobalArgs, args: &RunOptions) -> RunSettings {
    let model = root_provider_config(args);
    let sub_model = sub_provider_config(args, &model);
    RunSettings {
        data_dir: global.data_dir.clone(),
        context: ContextSpec {
            files: args.context.clone(),
            dir: args.context_dir.clone(),
            dir_as: match args.dir_as {
                DirAsArg::List => DirAs::List,
                DirAsArg::Dict => DirAs::Dict,
                DirAsArg::Concat => DirAs::Concat,
            },
            follow_symlinks: args.follow_symlinks,
            var: args.context_var.clone(),
            max_bytes: args.max_context_bytes,
            copy: args.copy_context,
            lazy: lazy_policy(args),
        },
        model,
        sub_model,
        env: match args.env {
            EnvArg::Python => EnvKind::Python,
            EnvArg::Js => EnvKind::Js,
            EnvArg::Tools => EnvKind::Tools,
            EnvArg::Plan => EnvKind::Plan,
        },
        python: args.python.clone(),
        js_memory_mb: args.js_memory_mb,
        tools: args
            .tools
            .as_ref()
            .map_or_else(|| MicroTool::ALL.to_vec(), |list| list.0.clone()),
        tool_protocol: match args.tool_protocol {
            ToolProtocolArg::Native => ToolProtocol::Native,
            ToolProtocolArg::Text => ToolProtocol::Text,
        },
        max_depth: args.max_depth,
        max_iterations: args.max_iterations,
        corrections: args.corrections.0.clone(),
        max_output_chars: args.max_output_chars,
        redact_ratio: args.redact_ratio,
        state_vars: args.state_vars,
        exec_timeout: Duration::from_secs(args.exec_timeout),
        output_schema: args.output_schema.clone(),
        system_prompt: args.system_prompt.clone(),
        agent_cmd: args.agent_cmd.clone(),
        agent: args.agent.as_ref().map(|AgentArg(preset)| preset.clone()),
        agent_env: args.agent_env.clone(),
        agent_user_config: args.agent_user_config,
        agent_timeout: Duration::from_secs(args.agent_timeout),
        max_parallel: args.max_parallel,
        sub_context_chars: args.sub_context_chars,
        limits: Limits {
            max_llm_calls: args.max_llm_calls,
            max_tokens: args.max_tokens,
            max_cost_usd: args.max_cost_usd,
            max_time: args.max_time.map(Duration::from_secs),
        },
        cache: !args.no_cache,
        memory_ceiling_bytes: args.memory_ceiling_mb.saturating_mul(1 << 20),
        sandbox: match args.sandbox {
            SandboxArg::Auto => rlm_sandbox::Mode::Auto,
            SandboxArg::Strict => rlm_sandbox::Mode::Strict,
            SandboxArg::Off => rlm_sandbox::Mode::Off,
        },
        kernel_memory_mb: args.kernel_memory_mb,
        agent_sandbox: args.agent_sandbox == OnOffArg::On,
        agent_network: args.agent_network == OnOffArg::On,
        agent_allow_connect: args.agent_allow_connect.iter().map(|a| a.0).collect(),
        max_requests: args.max_requests.map(|n| n as usize),
        max_agents: args.max_agents.map(|n| n as usize),
        runner: match (args.runner, &args.slurm_args) {
            (RunnerArg::Local, _) => Runner::Local,
            (RunnerArg::Slurm, Some(SlurmArgs(runner))) => runner.clone(),
            (RunnerArg::Slurm, None) => Runner::Slurm { args: Vec::new() },
        },
        budget_ledger: None,
    }
}

fn kind(arg: ProviderArg) -> ProviderKind {
    match arg {
        ProviderArg::Openai => ProviderKind::OpenAi,
        ProviderArg::Anthropic => ProviderKind::Anthropic,
        ProviderArg::Cli => ProviderKind::Cli,
    }
}

/// The root model's configuration.
pub fn root_provider_config(args: &RunOptions) -> ProviderConfig {
    let prices = match (args.price_input, args.price_output) {
        (None, None) => None,
        (input, output) => Some(Prices {
            input_usd_per_million: input.unwrap_or(0.0),
            output_usd_per_million: output.unwrap_or(0.0),
        }),
    };
    ProviderConfig {
        base_url: args.base_url.clone(),
        api_key_env: args.api_key_env.clone(),
        llm_cmd: args.llm_cmd.clone(),
        retries: args.retries,
        retry_base_delay: Duration::from_millis(args.retry_base_delay_ms),
        request_timeout: Duration::from_secs(args.request_timeout),
        max_reply_bytes: args.max_reply_bytes,
        stream: !args.no_stream,
        temperature: args.temperature,
        prices,
        context_window: args.context_window,
        constrain: args.constrain.mode(),
        ..ProviderConfig::new(kind(args.provider), args.model.clone())
    }
}

/// The sub-model's configuration: the root's, with what the `--sub-*` flags change.
/// Another provider does not inherit the root's endpoint or key variable.
pub fn sub_provider_config(args: &RunOptions, root: &ProviderConfig) -> ProviderConfig {
    let mut sub = root.clone();
    if let Some(provider) = args.sub_provider {
        if kind(provider) != root.kind {
            sub.kind = kind(provider);
            sub.base_url = None;
            sub.api_key_env = None;
        }
    }
    if let Some(model) = &args.sub_model {
        sub.model = model.clone();
    }
    if let Some(url) = &args.sub_base_url {
        sub.base_url = Some(url.clone());
    }
    if let Some(cmd) = &args.sub_llm_cmd {
        sub.llm_cmd = Some(cmd.clone());
    }
    // The root's window is the sub-model's only when it is the same model.
    let same_model = sub.kind == root.kind
        && sub.model == root.model
        && sub.base_url == root.base_url
        && sub.llm_cmd == root.llm_cmd;
    sub.context_window = args
        .sub_context_window
        .or(root.context_window.filter(|_| same_model));
    if let Some(constrain) = args.sub_constrain {
        sub.constrain = constrain.mode();
    }
    sub
}

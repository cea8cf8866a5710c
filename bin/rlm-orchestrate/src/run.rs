//! `rlm-orchestrate run`: turns flags into a run configuration, runs it on a tokio
//! runtime, and prints the answer (or one JSON object with `--json`).
//!
//! Everything that can be checked before a model is asked is checked here or while
//! the context loads; such failures exit 2 and leave the store as it was.

use std::io::{self, IsTerminal, Read, Write};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rlm_orchestrator::accounting::Limits;
use rlm_orchestrator::agents::AgentCommand;
use rlm_orchestrator::context::{ContextSpec, DirAs};
use rlm_orchestrator::env::{EnvConfig, Environment, Host};
use rlm_orchestrator::host::Model;
use rlm_orchestrator::provider::{
    build_provider, install_crypto_provider, Prices, ProviderConfig, ProviderError, ProviderKind,
};
use rlm_orchestrator::rlm::LoopSettings;
use rlm_orchestrator::run::{run as run_query, EnvFactory, RunConfig, RunError, RunReport};
use rlm_orchestrator::subrlm::SubRlmLauncher;
use rlm_process::CancellationToken;

use crate::cli::{DirAsArg, GlobalArgs, ProviderArg, RunArgs, RunOptions};
use crate::exit::{annotate, bad_input, ExitStatus};

/// Environment variables through which a parent run describes a child run.
pub mod lineage {
    /// This process's agent id.
    pub const RLM_AGENT_ID: &str = "RLM_AGENT_ID";
    /// The parent's agent id.
    pub const RLM_PARENT_ID: &str = "RLM_PARENT_ID";
    /// This run's depth.
    pub const RLM_DEPTH: &str = "RLM_DEPTH";
    /// Variable this run must write its result to (set for `sub_rlm` children).
    pub const RLM_RESULT_KEY: &str = "RLM_RESULT_KEY";
}

/// Runs `run`.
pub fn run(global: &GlobalArgs, args: RunArgs) -> anyhow::Result<()> {
    let task = read_task(args.task.as_deref())?;
    let cancel = CancellationToken::new();
    let Prepared { config, root, sub } = prepare(global, &args, task, cancel.clone())?;

    let progress = crate::live::Progress::start(args.events, global.quiet, &global.data_dir);
    let listeners = progress.listeners();
    let factory = python_factory(args.python.clone());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    runtime.spawn(stop_on_signals(cancel));
    let outcome = runtime.block_on(run_query(config, root, sub, factory, listeners));
    progress.finish(); // the live view leaves the terminal before the answer is printed
    if let Ok(key) = std::env::var(lineage::RLM_RESULT_KEY) {
        publish_result(&global.data_dir, &key, &outcome);
    }
    let report = outcome.map_err(run_error)?;
    if args.events && !args.json {
        return Ok(()); // stdout is JSON lines; the answer is in the `final` event
    }
    print_report(&report, args.json)
}

/// What `run` and `repl` build from their flags: the models and the run configuration.
pub(crate) struct Prepared {
    /// The configuration (its `query` is the task; empty for `repl`).
    pub config: RunConfig,
    /// The root model.
    pub root: Model,
    /// The sub-model.
    pub sub: Model,
}

/// Checks the flags and builds the models and the run configuration for `query`;
/// `cancel` is the token Ctrl-C / SIGTERM will cancel.
pub(crate) fn prepare(
    global: &GlobalArgs,
    args: &RunOptions,
    query: String,
    cancel: CancellationToken,
) -> anyhow::Result<Prepared> {
    check_numbers(args)?;
    install_crypto_provider();
    let root_config = root_provider_config(args);
    let sub_config = sub_provider_config(args, &root_config);
    let root = model(&root_config)?;
    let sub = model(&sub_config)?;
    let output_schema = load_schema(args.output_schema.as_deref())?;

    let depth = std::env::var(lineage::RLM_DEPTH)
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(0);
    let config = RunConfig {
        query,
        context: ContextSpec {
            files: args.context.clone(),
            dir: args.context_dir.clone(),
            dir_as: match args.dir_as {
                DirAsArg::List => DirAs::List,
                DirAsArg::Dict => DirAs::Dict,
                DirAsArg::Concat => DirAs::Concat,
            },
            var: args.context_var.clone(),
            max_bytes: args.max_context_bytes,
        },
        data_dir: global.data_dir.clone(),
        memory_ceiling_bytes: args.memory_ceiling_mb.saturating_mul(1 << 20),
        loop_settings: LoopSettings {
            max_iterations: args.max_iterations,
            max_output_chars: args.max_output_chars,
            redact_ratio: args.redact_ratio,
            state_vars: args.state_vars,
            depth,
            max_depth: args.max_depth,
            sub_context_chars: args.sub_context_chars,
            output_schema,
        },
        max_parallel: args.max_parallel,
        sub_context_chars: args.sub_context_chars,
        limits: Limits {
            max_llm_calls: args.max_llm_calls,
            max_tokens: args.max_tokens,
            max_cost_usd: args.max_cost_usd,
            max_time: args.max_time.map(Duration::from_secs),
        },
        exec_timeout: Duration::from_secs(args.exec_timeout),
        agent_id: std::env::var(lineage::RLM_AGENT_ID)
            .unwrap_or_else(|_| format!("root-{}", std::process::id())),
        parent_id: std::env::var(lineage::RLM_PARENT_ID).ok(),
        cache: !args.no_cache,
        sub_rlm: Some(sub_rlm_launcher(global, args, &sub_config)?),
        agent_command: args
            .agent_cmd
            .as_deref()
            .map(AgentCommand::parse)
            .transpose()
            .map_err(|e| bad_input(format!("invalid --agent-cmd: {e}")))?,
        agent_env: args.agent_env.clone(),
        agent_timeout: Duration::from_secs(args.agent_timeout),
        cancel,
        history: Vec::new(),
    };
    Ok(Prepared { config, root, sub })
}

/// Writes this run's result to the variable its parent waits for (`sub_rlm`):
/// `{"result", "forced", "run_id", "iterations", "depth_reached", "sub_agents", "usage",
/// "cost_usd"}`, or `{"error"}` when the run failed.
fn publish_result(data_dir: &std::path::Path, key: &str, outcome: &Result<RunReport, RunError>) {
    let value = match outcome {
        Ok(report) => serde_json::json!({
            "result": report.answer,
            "forced": report.forced,
            "run_id": report.run_id,
            "iterations": report.iterations,
            "depth_reached": report.depth_reached,
            "sub_agents": report.sub_agents,
            "llm_calls": report.llm_calls,
            "usage": report.usage,
            "cost_usd": report.cost_usd,
        }),
        Err(e) => serde_json::json!({ "error": e.to_string() }),
    };
    let scope = match std::env::var(lineage::RLM_PARENT_ID) {
        Ok(parent) => format!("agent:{parent}"),
        Err(_) => rlm_context_store::GLOBAL_SCOPE.to_owned(),
    };
    let written = rlm_context_store::Store::open(data_dir).and_then(|store| {
        store.set(
            key,
            value,
            rlm_context_store::SetOptions::default().scope(scope),
        )
    });
    if let Err(e) = written {
        tracing::error!("failed to write the result variable {key}: {e}");
    }
}

/// How `sub_rlm` starts a child: this binary, `run`, and the settings a child inherits.
/// The child's model is this run's sub-model; its sub-calls use the same model.
fn sub_rlm_launcher(
    global: &GlobalArgs,
    args: &RunOptions,
    sub: &ProviderConfig,
) -> anyhow::Result<SubRlmLauncher> {
    let program = std::env::current_exe()
        .context("cannot find the rlm-orchestrate executable to start sub-runs")?;
    let data_dir = std::path::absolute(&global.data_dir).with_context(|| {
        format!(
            "cannot resolve the data directory {}",
            global.data_dir.display()
        )
    })?;
    let mut a: Vec<String> = vec![
        "--data-dir".into(),
        data_dir.display().to_string(),
        "-q".into(),
        "run".into(),
    ];
    let mut flag = |name: &str, value: String| {
        a.push(format!("--{name}"));
        a.push(value);
    };
    flag("provider", sub.kind.as_str().to_owned());
    flag("model", sub.model.clone());
    if let Some(url) = &sub.base_url {
        flag("base-url", url.clone());
    }
    if let Some(env) = &sub.api_key_env {
        flag("api-key-env", env.clone());
    }
    if let Some(cmd) = &sub.llm_cmd {
        flag("llm-cmd", cmd.clone());
    }
    if let Some(prices) = &sub.prices {
        flag("price-input", prices.input_usd_per_million.to_string());
        flag("price-output", prices.output_usd_per_million.to_string());
    }
    flag("retries", args.retries.to_string());
    flag("retry-base-delay-ms", args.retry_base_delay_ms.to_string());
    flag("request-timeout", args.request_timeout.to_string());
    flag("python", args.python.display().to_string());
    flag("max-depth", args.max_depth.to_string());
    flag("max-iterations", args.max_iterations.to_string());
    flag("max-output-chars", args.max_output_chars.to_string());
    flag("redact-ratio", args.redact_ratio.to_string());
    flag("state-vars", args.state_vars.to_string());
    flag("exec-timeout", args.exec_timeout.to_string());
    flag("max-parallel", args.max_parallel.to_string());
    flag("sub-context-chars", args.sub_context_chars.to_string());
    flag("agent-timeout", args.agent_timeout.to_string());
    flag("memory-ceiling-mb", args.memory_ceiling_mb.to_string());
    if let Some(cmd) = &args.agent_cmd {
        flag("agent-cmd", cmd.clone());
    }
    for name in &args.agent_env {
        flag("agent-env", name.clone());
    }
    if args.no_stream {
        a.push("--no-stream".into());
    }
    if args.no_cache {
        a.push("--no-cache".into());
    }
    // The children need the sub-model's key, and nothing else of ours.
    let pass_env = sub.key_env().map(str::to_owned).into_iter().collect();
    Ok(SubRlmLauncher {
        program,
        args: a,
        pass_env,
        timeout: Duration::from_secs(args.agent_timeout),
    })
}

/// First Ctrl-C or SIGTERM: cancel the run (every sub-agent group gets SIGTERM, a
/// grace period, then SIGKILL; the run is recorded as cancelled). A second one kills
/// every child group at once and exits.
async fn stop_on_signals(cancel: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::warn!(
            "cannot install signal handlers; Ctrl-C will kill rlm-orchestrate without cleanup"
        );
        return;
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    crate::live::write_stderr(
        "stopping: ending sub-agents (press Ctrl-C again to kill them at once)",
    );
    cancel.cancel();
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    let killed = rlm_process::kill_all_groups(rlm_process::Signal::SIGKILL);
    let _ = writeln!(io::stderr(), "killed {killed} process group(s)");
    std::process::exit(130);
}

fn read_task(task: Option<&str>) -> anyhow::Result<String> {
    let task = match task {
        Some(task) if task != "-" => task.to_owned(),
        _ => {
            if io::stdin().is_terminal() {
                return Err(bad_input(
                    "no task given: pass it as an argument or pipe it on stdin",
                ));
            }
            let mut text = String::new();
            io::stdin()
                .read_to_string(&mut text)
                .context("failed to read the task from stdin")?;
            text
        }
    };
    let task = task.trim().to_owned();
    if task.is_empty() {
        return Err(bad_input(
            "the task is empty: say what to do with the context",
        ));
    }
    Ok(task)
}

fn check_numbers(args: &RunOptions) -> anyhow::Result<()> {
    let problems = [
        (
            args.max_iterations == 0,
            "--max-iterations must be at least 1",
        ),
        (args.max_parallel == 0, "--max-parallel must be at least 1"),
        (
            !(args.redact_ratio >= 0.0 && args.redact_ratio.is_finite()),
            "--redact-ratio must be a number ≥ 0",
        ),
        (
            args.exec_timeout == 0,
            "--exec-timeout must be at least 1 second",
        ),
        (
            args.max_output_chars == 0,
            "--max-output-chars must be at least 1",
        ),
    ];
    match problems.iter().find(|(bad, _)| *bad) {
        Some((_, message)) => Err(bad_input(*message)),
        None => Ok(()),
    }
}

fn kind(arg: ProviderArg) -> ProviderKind {
    match arg {
        ProviderArg::Openai => ProviderKind::OpenAi,
        ProviderArg::Anthropic => ProviderKind::Anthropic,
        ProviderArg::Cli => ProviderKind::Cli,
    }
}

pub(crate) fn root_provider_config(args: &RunOptions) -> ProviderConfig {
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
        stream: !args.no_stream,
        prices,
        ..ProviderConfig::new(kind(args.provider), args.model.clone())
    }
}

pub(crate) fn sub_provider_config(args: &RunOptions, root: &ProviderConfig) -> ProviderConfig {
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
    sub
}

fn model(config: &ProviderConfig) -> anyhow::Result<Model> {
    let provider = build_provider(config).map_err(|e| match e {
        ProviderError::MissingKey { .. } => {
            let hint = match config.kind {
                ProviderKind::OpenAi => "for a local OpenAI-compatible server pass --base-url http://127.0.0.1:PORT/v1 (no key needed); `rlm-orchestrate config show` lists the key variable of each model",
                _ => "`rlm-orchestrate config show` lists the key variable of each model (root and sub)",
            };
            annotate(
                anyhow::Error::new(e),
                Some(ExitStatus::BadInput),
                Some(hint.into()),
            )
        }
        ProviderError::Config(_) => {
            annotate(anyhow::Error::new(e), Some(ExitStatus::BadInput), None)
        }
        other => anyhow::Error::new(other),
    })?;
    Ok(Model {
        provider,
        price: config.prices,
    })
}

fn load_schema(
    path: Option<&std::path::Path>,
) -> anyhow::Result<Option<Arc<jsonschema::Validator>>> {
    let Some(path) = path else { return Ok(None) };
    let text = std::fs::read_to_string(path).map_err(|e| {
        bad_input(format!(
            "cannot read --output-schema {}: {e}",
            path.display()
        ))
    })?;
    let schema: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        bad_input(format!(
            "--output-schema {} is not valid JSON: {e}",
            path.display()
        ))
    })?;
    let validator = jsonschema::validator_for(&schema).map_err(|e| {
        bad_input(format!(
            "--output-schema {} is not a valid JSON Schema: {e}",
            path.display()
        ))
    })?;
    Ok(Some(Arc::new(validator)))
}

pub(crate) fn python_factory(python: std::path::PathBuf) -> EnvFactory {
    Box::new(move |config: EnvConfig, host: Arc<dyn Host>| {
        Box::pin(async move {
            let env = rlm_orchestrator::env::python::PythonEnv::start(config, host, python).await?;
            Ok(Box::new(env) as Box<dyn Environment>)
        })
    })
}

pub(crate) fn run_error(error: RunError) -> anyhow::Error {
    match error {
        RunError::BadInput(e) => annotate(anyhow::Error::new(e), Some(ExitStatus::BadInput), None),
        RunError::Cancelled { .. } => {
            annotate(anyhow::Error::new(error), Some(ExitStatus::Cancelled), None)
        }
        other => anyhow::Error::new(other),
    }
}

pub(crate) fn print_report(report: &RunReport, json: bool) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    let written = if json {
        let object = serde_json::json!({
            "answer": report.answer,
            "run_id": report.run_id,
            "forced": report.forced,
            "iterations": report.iterations,
            "depth_reached": report.depth_reached,
            "sub_agents": report.sub_agents,
            "usage": {
                "prompt_tokens": report.usage.prompt_tokens,
                "completion_tokens": report.usage.completion_tokens,
            },
            "cost_usd": report.cost_usd,
        });
        writeln!(out, "{object}")
    } else {
        writeln!(out, "{}", report.answer)
    };
    match written.and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(e).context("failed to write the answer")
        }
        _ => Ok(()),
    }
}

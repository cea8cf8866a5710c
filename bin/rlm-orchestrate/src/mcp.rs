//! `rlm-orchestrate mcp`: an MCP server over stdio, so coding agents (Claude Code,
//! Codex, opencode, goose, …) can hand a task over a huge context to rlm as a tool.
//!
//! Tools: `rlm_run` (a whole run: task, context by path and/or inline, optional model,
//! provider, environment and budgets), `vars_list`, `vars_get`, `vars_set`,
//! `runs_list`, `runs_show`. There is no second implementation behind them: a run is
//! built by parsing the same flags `rlm-orchestrate run` takes — the server's own
//! (flags after `mcp`, `RLM_*`, `rlm.toml`) followed by the call's overrides — and the
//! `vars_*`/`runs_*` tools are the `vars`/`runs` sub-commands writing to a buffer.
//!
//! A run reports its steps as MCP progress notifications (when the client asked for
//! progress), and a cancelled request cancels the run: its loop stops and every child
//! process is ended, as on Ctrl-C. Stdout carries the protocol and nothing else; logs
//! go to stderr.
//!
//! The client is not trusted (docs/security.md, "A hostile MCP client"): a call's base
//! URL and context paths pass [`policy`] first, at most `--mcp-max-runs` runs go at once
//! ([`slots`]), and the transport ([`stdio`]) answers every line and stops reading a
//! client that does not read its replies.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use rlm_orchestrator::events::{Event, EventData, EventListener};
use rlm_orchestrator::provider::{AnthropicProvider, OpenAiProvider, ProviderConfig, ProviderKind};
use rlm_orchestrator::run::RunReport;
use rlm_process::CancellationToken;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, ProgressNotificationParam, RequestMetaObject, ServerCapabilities,
    ServerConfig,
};
use rmcp::{
    tool, tool_handler, tool_router, ErrorData, Peer, RoleServer, ServerHandler, ServiceExt,
};
use serde_json::{json, Value};

use crate::cli::run::McpServerArgs;
use crate::cli::{Cli, Command, GlobalArgs, RunOptions};
use params::{KeyParams, RunParams, RunsListParams, RunsShowParams, VarsListParams, VarsSetParams};
use policy::Policy;
use slots::RunSlots;

mod params;
mod policy;
mod slots;
mod stdio;

/// Most bytes of output a `vars_*`/`runs_*` tool returns; longer output is cut with a
/// note saying how long it was.
const OUTPUT_MAX_BYTES: usize = 1 << 20;

/// Most progress messages of one run waiting to be sent; more are dropped (a client
/// that reads nothing must not make them pile up).
const PROGRESS_QUEUE: usize = 64;

/// Serves MCP on stdin/stdout until the client closes it. `args_after_mcp` are the
/// command-line arguments that followed `mcp` (with `rlm.toml`'s settings folded in):
/// each `rlm_run` parses them again, followed by its own overrides; `server` bounds
/// what those overrides may reach.
pub fn run(
    global: &GlobalArgs,
    server: &McpServerArgs,
    args_after_mcp: Vec<OsString>,
) -> anyhow::Result<()> {
    let own = parse_run_options(mcp_command_line(&global.data_dir, &args_after_mcp))?;
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let policy = Policy::new(
        cwd,
        &server.mcp_root,
        own_base_urls(&own),
        &server.mcp_allow_base_url,
    )?;
    let server = RlmServer {
        base: Arc::new(Base {
            data_dir: global.data_dir.clone(),
            verbose: global.verbose,
            args: args_after_mcp,
            policy,
            runs: RunSlots::new(server.mcp_max_runs),
        }),
        tool_router: RlmServer::tool_router(),
    };
    let runtime = crate::runtime::build()?;
    runtime.block_on(async move {
        let framed = stdio::frame(tokio::io::stdin(), tokio::io::stdout());
        let service = server
            .serve(framed.transport)
            .await
            .map_err(|e| anyhow::anyhow!("the MCP session could not start: {e}"))?;
        service
            .waiting()
            .await
            .map_err(|e| anyhow::anyhow!("the MCP session failed: {e}"))?;
        // The session ended with stdin: let the last replies reach stdout.
        let _ = framed.writer.await;
        anyhow::Ok(())
    })
}

/// The base URLs the server's own settings send requests to: the root's and the
/// sub-model's, each its provider's public API when none is given.
fn own_base_urls(options: &RunOptions) -> Vec<String> {
    let root = crate::settings::root_provider_config(options);
    let sub = crate::settings::sub_provider_config(options, &root);
    let url = |config: &ProviderConfig| {
        match config.kind {
            ProviderKind::OpenAi => Some(OpenAiProvider::DEFAULT_BASE_URL),
            ProviderKind::Anthropic => Some(AnthropicProvider::DEFAULT_BASE_URL),
            ProviderKind::Cli => None,
        }
        .map(|default| {
            config
                .base_url
                .clone()
                .unwrap_or_else(|| default.to_owned())
        })
    };
    [url(&root), url(&sub)].into_iter().flatten().collect()
}

/// What every call starts from.
#[derive(Debug)]
struct Base {
    data_dir: PathBuf,
    verbose: u8,
    /// The flags given after `mcp`.
    args: Vec<OsString>,
    /// What a call may point its run at.
    policy: Policy,
    /// `--mcp-max-runs`.
    runs: RunSlots,
}

impl Base {
    fn global(&self) -> GlobalArgs {
        GlobalArgs {
            data_dir: self.data_dir.clone(),
            verbose: self.verbose,
            quiet: true,
        }
    }
}

/// The MCP server.
#[derive(Clone)]
struct RlmServer {
    base: Arc<Base>,
    #[expect(dead_code, reason = "read by the code #[tool_handler] generates")]
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl RlmServer {
    #[tool(
        description = "Answer a task over a context too large for a prompt, as a Recursive Language Model: the model explores the context with code in a REPL and delegates pieces to sub-calls and sub-agents. Give the context as file paths (read where they are, any size) and/or inline text. Returns the answer; structured content has run_id, usage, cost and whether the answer was forced."
    )]
    async fn rlm_run(
        &self,
        Parameters(params): Parameters<RunParams>,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
        cancelled: CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        let task = match crate::run::checked_task(&params.task) {
            Ok(task) => task,
            Err(error) => return Ok(error_result(error_text(&error))),
        };
        let checked = match self.checked(&params) {
            Ok(checked) => checked,
            Err(refused) => return Ok(error_result(refused.to_string())),
        };
        // A call that does not parse is told so at once, not after waiting for a slot.
        if let Err(error) = parse_run_options(self.run_args(&params, &checked, None)) {
            return Ok(error_result(error.to_string()));
        }
        let _slot = match self.base.runs.enter(&cancelled).await {
            Ok(slot) => slot,
            Err(no_slot) => return Ok(error_result(no_slot.to_string())),
        };
        let inline = match params
            .context
            .as_deref()
            .map(|t| self.inline_context_file(t))
        {
            None => None,
            Some(Ok(path)) => Some(path),
            Some(Err(error)) => return Ok(error_result(error_text(&error))),
        };
        let options = match parse_run_options(self.run_args(&params, &checked, inline.as_deref())) {
            Ok(options) => options,
            Err(error) => return Ok(error_result(error.to_string())),
        };
        let cancel = CancellationToken::new();
        let global = self.base.global();
        let config = match crate::run::prepare(&global, &options, None, cancel.clone()) {
            Ok(config) => config,
            Err(error) => return Ok(error_result(error_text(&error))),
        };
        // A cancelled request cancels the run: its children are ended as on Ctrl-C.
        let bridge = {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                cancelled.cancelled().await;
                cancel.cancel();
            })
        };
        let listeners = progress_listener(meta, peer);
        let outcome = rlm_orchestrator::run::run(config, &task, listeners).await;
        bridge.abort();
        Ok(match outcome {
            Ok(report) => answer_result(&report),
            Err(error) => error_result(error_text(&anyhow::Error::new(error))),
        })
    }

    #[tool(
        description = "List the variables of rlm's context store (key, type, scope, size, sha256)."
    )]
    async fn vars_list(
        &self,
        Parameters(params): Parameters<VarsListParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = params
            .scope
            .as_ref()
            .map(|scope| format!("--scope={scope}"));
        let mut args = vec!["vars", "list", "--json"];
        args.extend(scope.as_deref());
        Ok(self.command(&args, true))
    }

    #[tool(
        description = "Print a variable of rlm's context store: text as is, anything else as JSON (values over 1 MiB are cut)."
    )]
    async fn vars_get(
        &self,
        Parameters(params): Parameters<KeyParams>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.command(&["vars", "get", "--", &params.key], false))
    }

    #[tool(
        description = "Store a variable in rlm's context store (text, or JSON with json=true); returns its reference."
    )]
    async fn vars_set(
        &self,
        Parameters(params): Parameters<VarsSetParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = params
            .scope
            .as_ref()
            .map(|scope| format!("--scope={scope}"));
        let mut args = vec!["vars", "set"];
        if params.json {
            args.push("--json");
        }
        args.extend(scope.as_deref());
        args.extend(["--", params.key.as_str(), params.value.as_str()]);
        Ok(self.command(&args, false))
    }

    #[tool(description = "List rlm's runs, newest first (run id, status, task, answer, usage).")]
    async fn runs_list(
        &self,
        Parameters(params): Parameters<RunsListParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let limit = params.limit.map(|n| n.to_string());
        let mut args = vec!["runs", "list", "--json"];
        if let Some(limit) = &limit {
            args.extend(["--limit", limit.as_str()]);
        }
        Ok(self.command(&args, true))
    }

    #[tool(
        description = "Show what a run did, step by step: the model's text and code, outputs, sub-calls and sub-agents."
    )]
    async fn runs_show(
        &self,
        Parameters(params): Parameters<RunsShowParams>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.command(&["runs", "show", "--", &params.run_id], false))
    }
}

#[tool_handler]
impl ServerHandler for RlmServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            "rlm answers questions over contexts far larger than a prompt (logs, repositories, \
             corpora) with a Recursive Language Model. Call rlm_run with the task and the \
             context's file paths; inspect what runs stored with vars_list/vars_get and what \
             they did with runs_list/runs_show.",
        )
    }
}

impl RlmServer {
    /// What the policy makes of a call's base URL and context paths: the URL and the
    /// resolved paths the run gets, or why the call is refused.
    fn checked(&self, params: &RunParams) -> Result<Checked, policy::Refused> {
        let policy = &self.base.policy;
        Ok(Checked {
            base_url: params
                .base_url
                .as_deref()
                .map(|url| policy.base_url(url))
                .transpose()?,
            context_paths: params
                .context_paths
                .iter()
                .map(|path| policy.context_path(path))
                .collect::<Result<_, _>>()?,
        })
    }

    /// The command line of one `rlm_run`: the server's flags, then the call's, each as
    /// `--flag=value` so no value is read as a flag.
    fn run_args(
        &self,
        params: &RunParams,
        checked: &Checked,
        inline_context: Option<&std::path::Path>,
    ) -> Vec<OsString> {
        let mut args = mcp_command_line(&self.base.data_dir, &self.base.args);
        let mut flag = |name: &str, value: Option<&std::ffi::OsStr>| {
            if let Some(value) = value {
                let mut arg = OsString::from(format!("--{name}="));
                arg.push(value);
                args.push(arg);
            }
        };
        let text = |value: &Option<String>| value.as_ref().map(OsString::from);
        let numbers = [
            ("max-iterations", number(params.max_iterations)),
            ("max-depth", number(params.max_depth)),
            ("max-llm-calls", number(params.max_llm_calls)),
            ("max-tokens", number(params.max_tokens)),
            ("max-cost-usd", number(params.max_cost_usd)),
            ("max-time", number(params.max_time)),
        ];
        let texts = [
            ("model", text(&params.model)),
            ("provider", text(&params.provider)),
            ("base-url", text(&checked.base_url)),
            ("sub-model", text(&params.sub_model)),
            ("env", text(&params.env)),
        ];
        for (name, value) in texts.iter().chain(&numbers) {
            flag(name, value.as_deref());
        }
        let paths = checked.context_paths.iter().map(PathBuf::as_path);
        for path in paths.chain(inline_context) {
            flag("context", Some(path.as_os_str()));
        }
        args
    }

    /// Writes inline context to `<data-dir>/mcp-contexts/<uuid>.txt` (private), so the
    /// run reads it like any file.
    fn inline_context_file(&self, text: &str) -> anyhow::Result<PathBuf> {
        let dir = self.base.data_dir.join("mcp-contexts");
        let path = dir.join(format!("{}.txt", uuid::Uuid::new_v4().simple()));
        // Without an fsync: the client still has the text, and an fsync here waits for
        // the disk before the run's first request.
        rlm_context_store::private_fs::write_private_new_with(
            &path,
            text.as_bytes(),
            rlm_context_store::Durability::Bulk,
        )
        .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }

    /// Runs a `vars`/`runs` sub-command into a buffer: its output as the text (and,
    /// when `json`, as structured content), or its error.
    fn command(&self, args: &[&str], json: bool) -> CallToolResult {
        let mut argv: Vec<OsString> =
            vec!["rlm-orchestrate".into(), "-q".into(), "--data-dir".into()];
        argv.push(self.base.data_dir.clone().into_os_string());
        argv.extend(args.iter().map(OsString::from));
        let cli = match Cli::try_parse_from(argv) {
            Ok(cli) => cli,
            Err(error) => return error_result(error.to_string()),
        };
        let mut out = Capped {
            kept: Vec::new(),
            total: 0,
        };
        let done = match cli.command {
            Command::Vars(vars) => crate::vars::run_to(&cli.global, vars, &mut out),
            Command::Runs(runs) => crate::runs::run_to(&cli.global, runs, &mut out),
            _ => Err(anyhow::anyhow!("not a vars or runs command")),
        };
        if let Err(error) = done {
            return error_result(error_text(&error));
        }
        let mut text = String::from_utf8_lossy(&out.kept).into_owned();
        if out.total > out.kept.len() as u64 {
            // Cut: drop a character the cap split, and say how much there was.
            text = text.trim_end_matches('\u{fffd}').to_owned();
            text.push_str(&format!(
                "\n[… cut: the first {} of {} bytes; read the rest with `rlm-orchestrate vars get` or `runs show`]",
                text.len(),
                out.total
            ));
        }
        let mut result = CallToolResult::success(vec![ContentBlock::text(text.clone())]);
        if json {
            if let Ok(value) = serde_json::from_str::<Value>(&text) {
                // Structured content is an object: wrap lists.
                result.structured_content = Some(match value {
                    Value::Array(items) => json!({ "items": items }),
                    other => other,
                });
            }
        }
        result
    }
}

/// A number argument as a flag's value.
fn number<T: ToString>(value: Option<T>) -> Option<OsString> {
    value.map(|n| n.to_string().into())
}

/// A call's base URL and context paths as the policy let them through.
struct Checked {
    base_url: Option<String>,
    context_paths: Vec<PathBuf>,
}

/// `rlm-orchestrate --data-dir DIR mcp ARGS…`: the server's own command line, to
/// which a call appends its overrides.
fn mcp_command_line(data_dir: &std::path::Path, args: &[OsString]) -> Vec<OsString> {
    let mut line: Vec<OsString> = vec!["rlm-orchestrate".into(), "--data-dir".into()];
    line.push(data_dir.as_os_str().to_owned());
    line.push("mcp".into());
    line.extend(args.iter().cloned());
    line
}

/// Parses an `mcp` command line into its run options. The error is clap's message,
/// whole: show it with `{}`, since `{:#}` would repeat a value parser's cause after it.
fn parse_run_options(args: Vec<OsString>) -> anyhow::Result<RunOptions> {
    let cli = Cli::try_parse_from(args)?;
    match cli.command {
        Command::Mcp(mcp) => Ok(mcp.options),
        _ => Err(anyhow::anyhow!("not an mcp command line")),
    }
}

/// The answer as text, the rest as structured content.
fn answer_result(report: &RunReport) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(report.answer.clone())]);
    result.structured_content = Some(json!({
        "answer": report.answer,
        "run_id": report.run_id.as_str(),
        "forced": report.forced,
        "iterations": report.iterations,
        "llm_calls": report.totals.llm_calls,
        "sub_agents": report.totals.sub_agents,
        "depth_reached": report.depth_reached,
        "usage": {
            "prompt_tokens": report.totals.usage.prompt_tokens,
            "completion_tokens": report.totals.usage.completion_tokens,
            "total_tokens": report.totals.usage.total(),
        },
        "cost_usd": report.totals.cost_usd,
    }));
    result
}

/// The message of `error` as the CLI prints it, on one line: each cause once (a
/// cause whose text is already in the message before it adds nothing; `{:#}` would
/// repeat it), secrets redacted.
fn error_text(error: &anyhow::Error) -> String {
    let mut text = String::new();
    let mut previous = String::new();
    for cause in error.chain() {
        let line = rlm_process::redact_secrets(&cause.to_string()).into_owned();
        if !previous.is_empty() && previous.contains(&line) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&line);
        previous = line;
    }
    text
}

/// A failed call, with the message the CLI would print.
fn error_result(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// Keeps the first [`OUTPUT_MAX_BYTES`] written to it and counts the rest, so a tool's
/// reply never holds more than it returns (a `vars get` of a 1 GB value streams
/// through it).
struct Capped {
    kept: Vec<u8>,
    total: u64,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = OUTPUT_MAX_BYTES.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&buf[..room.min(buf.len())]);
        self.total += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A listener that turns the run's events into MCP progress notifications, when the
/// client gave a progress token.
fn progress_listener(meta: RequestMetaObject, peer: Peer<RoleServer>) -> Vec<EventListener> {
    let Some(token) = meta.get_progress_token() else {
        return Vec::new();
    };
    let (sender, mut receiver) = tokio::sync::mpsc::channel::<String>(PROGRESS_QUEUE);
    tokio::spawn(async move {
        let mut count = 0u32;
        while let Some(message) = receiver.recv().await {
            count += 1;
            let param = ProgressNotificationParam::new(token.clone(), f64::from(count))
                .with_message(message);
            if peer.notify_progress(param).await.is_err() {
                break;
            }
        }
    });
    let listener: EventListener = Arc::new(move |event: &Event| {
        if let Some(message) = progress_message(&event.data) {
            // Full: the client is not reading; this message is dropped.
            let _ = sender.try_send(message);
        }
    });
    vec![listener]
}

/// What a progress notification says about an event (most events say nothing).
fn progress_message(data: &EventData) -> Option<String> {
    match data {
        EventData::StepStarted { iteration } => Some(format!("step {iteration}")),
        EventData::SubAgentSpawned(spawned) => Some(format!(
            "sub-agent {} started: {}",
            spawned.child_agent_id,
            crate::output::escape_controls(&rlm_orchestrator::format::clip(&spawned.task, 80))
        )),
        EventData::SubAgentFinished(finished) => {
            Some(format!("sub-agent {} finished", finished.child_agent_id))
        }
        _ => None,
    }
}

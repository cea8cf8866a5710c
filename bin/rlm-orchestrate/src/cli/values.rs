//! The values of a run's flags that are more than a number or a path: the choices
//! (`--provider`, `--env`, …) and the parsers that check a value before a run starts.

use clap::ValueEnum;
use rlm_orchestrator::env::tools::{parse_tool_list, MicroTool};

use super::InvalidValue;

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
    /// No code at all: each step is one combinator plan (split, filter, map, reduce)
    /// the orchestrator prices and runs (docs/plans.md), for models that should not
    /// write code.
    Plan,
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

/// `--constrain`: how far replies are held to their form by the server
/// (docs/constrain.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConstrainArg {
    /// What the server says (or its API documents) it supports; nothing for a
    /// server that says nothing.
    Auto,
    /// Never send a constraint.
    Off,
    /// Send a JSON schema for JSON replies (tools, plans) even if the server said nothing.
    Json,
    /// Also send the GBNF grammar of the loop's protocol for code replies.
    Grammar,
}

impl ConstrainArg {
    /// The library's mode.
    pub fn mode(self) -> rlm_orchestrator::provider::ConstrainMode {
        use rlm_orchestrator::provider::ConstrainMode;
        match self {
            Self::Auto => ConstrainMode::Auto,
            Self::Off => ConstrainMode::Off,
            Self::Json => ConstrainMode::Json,
            Self::Grammar => ConstrainMode::Grammar,
        }
    }
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

/// Parses `--slurm-args`.
pub(super) fn parse_slurm_args(text: &str) -> Result<SlurmArgs, InvalidValue> {
    rlm_orchestrator::runner::Runner::slurm(text)
        .map(SlurmArgs)
        .map_err(|e| InvalidValue::new(e.to_string()))
}

/// `mcp --mcp-allow-base-url`: an http(s) URL with a host and no credentials, query or
/// fragment, parsed as requests will parse it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedBaseUrl(pub url::Url);

/// Parses `--mcp-allow-base-url`.
pub(super) fn parse_allowed_base_url(text: &str) -> Result<AllowedBaseUrl, InvalidValue> {
    let url = url::Url::parse(text).map_err(|e| {
        InvalidValue::new(format!(
            "{text:?} is not a URL ({e}): give one like http://127.0.0.1:8080/v1"
        ))
    })?;
    let problem = if !matches!(url.scheme(), "http" | "https") {
        Some("its scheme is not http or https")
    } else if url.host_str().is_none_or(str::is_empty) {
        Some("it has no host")
    } else if !url.username().is_empty() || url.password().is_some() {
        Some("it carries credentials (user@ or user:password@)")
    } else if url.query().is_some() || url.fragment().is_some() {
        Some("it has a query or a fragment")
    } else {
        None
    };
    match problem {
        Some(problem) => Err(InvalidValue::new(format!(
            "{text:?} cannot be allowed: {problem}; give a plain base URL like http://127.0.0.1:8080/v1"
        ))),
        None => Ok(AllowedBaseUrl(url)),
    }
}

/// `--agent`: a built-in preset's name or a preset file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentArg(pub rlm_orchestrator::agents::AgentPreset);

/// Parses `--agent`.
pub(super) fn parse_agent(spec: &str) -> Result<AgentArg, InvalidValue> {
    rlm_orchestrator::agents::AgentPreset::resolve(spec)
        .map(AgentArg)
        .map_err(|e| InvalidValue::new(e.to_string()))
}

/// `--agent-allow-connect`: the TCP port of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointArg(pub u16);

/// Parses `--agent-allow-connect`: `HOST:PORT`, `:PORT`, or a URL (`http://h:8080/v1`;
/// without a port, 80 for http and 443 for https).
pub(super) fn parse_endpoint(text: &str) -> Result<EndpointArg, InvalidValue> {
    let refused = || {
        InvalidValue::new(format!(
            "{text:?} names no TCP port: give HOST:PORT (127.0.0.1:8080) or a URL (http://127.0.0.1:8080/v1)"
        ))
    };
    let (scheme, rest) = match text.split_once("://") {
        Some((scheme, rest)) => (Some(scheme.to_ascii_lowercase()), rest),
        None => (None, text),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or_default();
    // `[::1]:8080`, `host:8080`; a bare IPv6 address has no port.
    let port = match authority.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') || host.ends_with(']') => Some(port),
        _ => None,
    };
    let port = match (port, scheme.as_deref()) {
        (Some(port), _) => port.parse::<u16>().map_err(|_| refused())?,
        (None, Some("http")) => 80,
        (None, Some("https")) => 443,
        (None, _) => return Err(refused()),
    };
    if port == 0 {
        return Err(refused());
    }
    Ok(EndpointArg(port))
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

/// `--tools`: the micro-tools offered, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolList(pub Vec<MicroTool>);

/// Parses `--tools`.
pub(super) fn parse_tools(list: &str) -> Result<ToolList, InvalidValue> {
    parse_tool_list(list)
        .map(ToolList)
        .map_err(|e| InvalidValue::new(e.to_string()))
}

/// `--corrections`: the loop's correction rules to switch on.
#[derive(Debug, Clone)]
pub struct CorrectionList(pub rlm_orchestrator::corrections::Corrections);

/// Parses `--corrections`: `all`, `none`, or a comma list of rule names.
pub(super) fn parse_corrections(list: &str) -> Result<CorrectionList, InvalidValue> {
    rlm_orchestrator::corrections::Corrections::from_names(list)
        .map(CorrectionList)
        .map_err(|e| InvalidValue::new(e.to_string()))
}

/// Parses `--temperature`: a number from 0 to 2.
pub(super) fn parse_temperature(text: &str) -> Result<f32, InvalidValue> {
    match text.trim().parse::<f32>() {
        Ok(t) if (0.0..=2.0).contains(&t) => Ok(t),
        _ => Err(InvalidValue::new(format!(
            "{text:?} is not a temperature from 0 to 2"
        ))),
    }
}

/// Parses an amount of USD (`--max-cost-usd`, `--price-*`): a finite number ≥ 0, so
/// that `NaN`, `inf` or a negative price cannot switch the cost limit off.
pub(super) fn parse_usd(text: &str) -> Result<f64, InvalidValue> {
    match text.trim().parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd >= 0.0 => Ok(usd),
        _ => Err(InvalidValue::new(format!(
            "{text:?} is not an amount of USD (a finite number ≥ 0)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_of_usd_are_finite_and_not_negative() {
        assert_eq!(parse_usd("0.5"), Ok(0.5));
        assert_eq!(parse_usd("0"), Ok(0.0));
        for bad in ["NaN", "nan", "inf", "-inf", "-0.01", "1e999", "x"] {
            assert!(parse_usd(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn an_endpoint_is_its_tcp_port() {
        for (text, port) in [
            ("127.0.0.1:8080", 8080),
            (":9000", 9000),
            ("http://127.0.0.1:39000/v1", 39000),
            ("https://gateway.internal/v1", 443),
            ("http://localhost", 80),
            ("http://user:pw@[::1]:8443/x", 8443),
        ] {
            assert_eq!(parse_endpoint(text).unwrap(), EndpointArg(port), "{text}");
        }
        for text in ["localhost", "host:http", "h:0", "h:70000", "::1"] {
            assert!(parse_endpoint(text).is_err(), "{text}");
        }
    }
}

//! Provider settings and API keys: what [`build_provider`](crate::build_provider) turns
//! into a [`Provider`](crate::Provider).
//!
//! The binary fills one [`ProviderConfig`] for the root model and one for the sub-model
//! from flags, `RLM_*` variables and `rlm.toml`; everything else in the orchestrator
//! sees only the `Arc<dyn Provider>` that `build_provider` returns.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::retry::{RetryPolicy, DEFAULT_RETRIES, DEFAULT_RETRY_BASE_DELAY_MS};
use super::{ProviderError, Usage};

/// Where an OpenAI-compatible endpoint's API key is read from by default.
pub const OPENAI_KEY_ENV: &str = "OPENAI_API_KEY";

/// Where the Anthropic API key is read from by default.
pub const ANTHROPIC_KEY_ENV: &str = "ANTHROPIC_API_KEY";

/// Per-request timeout unless configured.
pub const DEFAULT_REQUEST_TIMEOUT_SECS: u64 = 300;

/// The largest reply read unless configured (`--max-reply-bytes`), counted as it
/// arrives: a whole body, or every byte of a stream. The longest answer rlm asks for
/// is 4 096 tokens (about 1 MiB streamed, at the ~250 bytes each token's event takes);
/// a server left to its own limit with a 32 768-token window streams about 8 MiB.
/// 16 MiB is above both, and far below what a runaway stream reaches: endless 4 KiB
/// deltas grew a process to 21.7 GB before this bound.
pub const DEFAULT_MAX_REPLY_BYTES: u64 = 16 << 20;

fn default_max_reply_bytes() -> u64 {
    DEFAULT_MAX_REPLY_BYTES
}

/// Which kind of model endpoint a configuration describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// An OpenAI-compatible Chat Completions endpoint.
    #[default]
    #[serde(rename = "openai")]
    OpenAi,
    /// The Anthropic Messages API.
    Anthropic,
    /// A command line used as a model.
    Cli,
}

impl ProviderKind {
    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Cli => "cli",
        }
    }

    /// The environment variable holding the API key unless `--api-key-env` names
    /// another (`None` for `cli`, which needs no key from rlm).
    pub fn default_key_env(self) -> Option<&'static str> {
        match self {
            Self::OpenAi => Some(OPENAI_KEY_ENV),
            Self::Anthropic => Some(ANTHROPIC_KEY_ENV),
            Self::Cli => None,
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProviderKind {
    type Err = ProviderError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "openai" => Ok(Self::OpenAi),
            "anthropic" => Ok(Self::Anthropic),
            "cli" => Ok(Self::Cli),
            other => Err(ProviderError::Config(format!(
                "unknown provider `{other}`; use openai, anthropic or cli"
            ))),
        }
    }
}

/// `--constrain`: how far replies are held to their form by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConstrainMode {
    /// What the server says (or its API documents) it supports; nothing for a server
    /// that says nothing.
    #[default]
    Auto,
    /// No constraint is ever sent.
    Off,
    /// A JSON schema for replies that are JSON (tools, plans, sub-calls with a schema),
    /// sent as `response_format` even where the server did not say it takes one.
    Json,
    /// A GBNF grammar for code replies (the loop's protocol) and the JSON schema for
    /// JSON replies, sent even where the server did not say it takes them.
    Grammar,
}

impl ConstrainMode {
    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Off => "off",
            Self::Json => "json",
            Self::Grammar => "grammar",
        }
    }
}

impl fmt::Display for ConstrainMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ConstrainMode {
    type Err = ProviderError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "off" => Ok(Self::Off),
            "json" => Ok(Self::Json),
            "grammar" => Ok(Self::Grammar),
            other => Err(ProviderError::Config(format!(
                "unknown --constrain `{other}`; use auto, off, json or grammar"
            ))),
        }
    }
}

/// Prices of a model, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Prices {
    /// USD per million prompt (input) tokens.
    pub input_usd_per_million: f64,
    /// USD per million completion (output) tokens.
    pub output_usd_per_million: f64,
}

impl Prices {
    /// The cost of `usage` at these prices.
    pub fn cost_usd(&self, usage: &Usage) -> f64 {
        // Token counts stay far below 2^53, where f64 starts losing integers.
        let tokens = |count: u64| count as f64 / 1_000_000.0;
        tokens(usage.prompt_tokens) * self.input_usd_per_million
            + tokens(usage.completion_tokens) * self.output_usd_per_million
    }
}

/// Everything needed to reach one model. Serialisable (a parent run hands its
/// sub-model's configuration to nested runs this way); it holds the *name* of the
/// variable with the API key, never the key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// Which API (or a command).
    pub kind: ProviderKind,
    /// The model name sent to the API (for `cli`, only a label; the command line
    /// is used when empty).
    pub model: String,
    /// Endpoint base; `None` means the provider's public default.
    pub base_url: Option<String>,
    /// Environment variable holding the API key; `None` means the provider's default.
    pub api_key_env: Option<String>,
    /// The command line of a `cli` model, e.g. `llm -m X` or `claude -p {prompt}`.
    pub llm_cmd: Option<String>,
    /// Retries after the first attempt on 429, 5xx and connection errors.
    pub retries: u32,
    /// Bound on one attempt (HTTP: sending, the answer's headers and its whole body or
    /// stream), or on the whole command (`cli`).
    #[serde(
        with = "rlm_protocol::format::duration_ms",
        rename = "request_timeout_ms"
    )]
    pub request_timeout: Duration,
    /// Backoff before the first retry; doubles with each retry.
    #[serde(
        with = "rlm_protocol::format::duration_ms",
        rename = "retry_base_delay_ms"
    )]
    pub retry_base_delay: Duration,
    /// Stream the answer (SSE) instead of waiting for the whole body.
    pub stream: bool,
    /// The most bytes of one reply read, whole body or stream
    /// ([`DEFAULT_MAX_REPLY_BYTES`] unless `--max-reply-bytes`): past it the call fails
    /// with [`ProviderError::ReplyTooLarge`].
    #[serde(default = "default_max_reply_bytes")]
    pub max_reply_bytes: u64,
    /// Output token limit when the request sets none (Anthropic requires one; it
    /// defaults to 4096 there; OpenAI-compatible requests omit it when `None`).
    pub max_tokens: Option<u32>,
    /// Sampling temperature sent when the request sets none (`None`: the server's
    /// default).
    #[serde(default)]
    pub temperature: Option<f32>,
    /// Prices for cost accounting, when known.
    pub prices: Option<Prices>,
    /// The model's context window in tokens, when configured (`--context-window`,
    /// `--sub-context-window`, `rlm.toml`); `None`: learned (see [`crate::window`]).
    #[serde(default)]
    pub context_window: Option<u32>,
    /// `--constrain` / `--sub-constrain`: how far replies are held to their form by
    /// the server (`crate::constrain`).
    #[serde(default)]
    pub constrain: ConstrainMode,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        Self {
            kind: ProviderKind::OpenAi,
            model: String::new(),
            base_url: None,
            api_key_env: None,
            llm_cmd: None,
            retries: DEFAULT_RETRIES,
            request_timeout: Duration::from_secs(DEFAULT_REQUEST_TIMEOUT_SECS),
            retry_base_delay: Duration::from_millis(DEFAULT_RETRY_BASE_DELAY_MS),
            stream: true,
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
            max_tokens: None,
            temperature: None,
            prices: None,
            context_window: None,
            constrain: ConstrainMode::Auto,
        }
    }
}

impl ProviderConfig {
    /// A configuration of `kind` for `model` with every other setting at its default.
    pub fn new(kind: ProviderKind, model: impl Into<String>) -> Self {
        Self {
            kind,
            model: model.into(),
            ..Self::default()
        }
    }

    /// The cost of `usage`, when prices are configured.
    pub fn cost_usd(&self, usage: &Usage) -> Option<f64> {
        self.prices.map(|prices| prices.cost_usd(usage))
    }

    /// The environment variable that holds the key (configured, else the default).
    pub fn key_env(&self) -> Option<&str> {
        self.api_key_env.as_deref().or(self.kind.default_key_env())
    }

    /// The retry policy these settings describe.
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy::new(self.retries, self.retry_base_delay)
    }
}

/// Installs rustls' `ring` crypto provider for the process (reqwest is built without
/// one). Safe to call any number of times; an already installed provider is kept.
pub fn install_crypto_provider() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        // Err means another provider is already installed, which is just as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// An API key. Its `Debug` never shows the value, and rlm never writes it anywhere
/// but the request header.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key given directly (tests, library users).
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// Reads the key from environment variable `var`; unset or blank gives `None`.
    pub fn from_env(var: &str) -> Option<Self> {
        let value = rlm_process::secret_var(var)?;
        let value = value.to_str()?.trim();
        (!value.is_empty()).then(|| Self(value.to_owned()))
    }

    /// The secret itself, for the request header only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// Replaces any occurrence of the key in `text` (an error body that echoes it).
    pub(crate) fn scrub(&self, text: &str) -> String {
        if self.0.len() < 4 {
            return text.to_owned();
        }
        text.replace(&self.0, "[redacted]")
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

/// True when `url` points at this machine or a private network (llama.cpp, vLLM,
/// Ollama and LM Studio run there and need no key): loopback, private and link-local
/// addresses, `localhost` and `*.local` names.
pub fn is_local_url(url: &str) -> bool {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return false;
    };
    let Some(host) = parsed.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return is_local_ip(ip);
    }
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost") || name.ends_with(".local")
}

fn is_local_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback() || v4.is_private() || v4.is_link_local() || v4.is_unspecified()
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_local_ip(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link local
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_urls_are_recognised() {
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434/v1",
            "http://[::1]:8000",
            "http://192.168.1.20:1234/v1",
            "http://10.0.0.5/v1",
            "http://gpu-box.local:8000/v1",
            "http://0.0.0.0:8089",
        ] {
            assert!(is_local_url(url), "{url} should be local");
        }
        for url in [
            "https://api.openai.com/v1",
            "https://openrouter.ai/api/v1",
            "http://8.8.8.8/v1",
            "not a url",
            "http://localhost.example.com/v1",
        ] {
            assert!(!is_local_url(url), "{url} should not be local");
        }
    }

    #[test]
    fn kinds_parse_and_print() {
        for kind in [
            ProviderKind::OpenAi,
            ProviderKind::Anthropic,
            ProviderKind::Cli,
        ] {
            assert_eq!(kind.as_str().parse::<ProviderKind>().ok(), Some(kind));
        }
        assert!(matches!(
            "gpt".parse::<ProviderKind>(),
            Err(ProviderError::Config(_))
        ));
        assert_eq!(
            serde_json::to_string(&ProviderKind::OpenAi).ok().as_deref(),
            Some("\"openai\"")
        );
    }

    #[test]
    fn cost_needs_prices() {
        let usage = Usage {
            prompt_tokens: 2_000_000,
            completion_tokens: 500_000,
        };
        let mut config = ProviderConfig::new(ProviderKind::OpenAi, "m");
        assert_eq!(config.cost_usd(&usage), None);
        config.prices = Some(Prices {
            input_usd_per_million: 0.5,
            output_usd_per_million: 4.0,
        });
        let cost = config.cost_usd(&usage).unwrap_or_default();
        assert!((cost - 3.0).abs() < 1e-9);
    }

    #[test]
    fn key_env_defaults_by_kind() {
        assert_eq!(
            ProviderConfig::new(ProviderKind::OpenAi, "m").key_env(),
            Some("OPENAI_API_KEY")
        );
        assert_eq!(
            ProviderConfig::new(ProviderKind::Anthropic, "m").key_env(),
            Some("ANTHROPIC_API_KEY")
        );
        let mut custom = ProviderConfig::new(ProviderKind::Anthropic, "m");
        custom.api_key_env = Some("MY_KEY".into());
        assert_eq!(custom.key_env(), Some("MY_KEY"));
    }

    #[test]
    fn api_key_debug_and_scrub_hide_the_value() {
        let key = ApiKey::new("sk-secret-123");
        assert_eq!(format!("{key:?}"), "ApiKey([redacted])");
        assert_eq!(key.scrub("bad key sk-secret-123!"), "bad key [redacted]!");
    }
}

//! What a server says about itself: its window and the tokenizer it offers, learned
//! in one round of requests and kept as a [`ServerFacts`] record.
//!
//! Every process of a run tree used to ask up to six questions, one after another,
//! before its first model request (`/models`, `/props`, and both tokenizer paths,
//! twice). Now the questions go out together — `GET {base}/models`, llama.cpp's
//! `GET {root}/props` and FastAPI's `GET {root}/openapi.json` (the listing in which
//! llama-cpp-python names its extras) — once per base URL and model: the orchestrator
//! keeps the record in the data directory for later runs and children, and asks
//! beside the first request instead of before it.
//!
//! A tokenizer is used only when the server said it has one: llama.cpp's `/props`
//! says it is llama.cpp (and then `POST {root}/tokenize` counts), llama-cpp-python's
//! listing names `/extras/tokenize/count`. The API key and samples of the prompt
//! never go to a tokenizer path a server did not name, nor the key to `/props` of a
//! server whose `/models` listing does not say it is llama.cpp, nor to the listing.
//!
//! The record is versioned serde ([`DISCOVERY_FORMAT_VERSION`]); what more is learned
//! about a server later (the structured output it supports, say) is a field with a
//! default, so older records still read.

use std::time::Duration;

use rlm_protocol::now_ms;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{ApiKey, ProviderConfig, ProviderKind};
use crate::constrain::{in_listing, in_models, in_props, Support};
use crate::window::{
    offline_window, window_in_models, window_in_props, ContextWindow, WindowSource,
};

/// The version of the [`ServerFacts`] record this build writes.
pub const DISCOVERY_FORMAT_VERSION: u32 = 1;

/// How long discovery waits for each of the server's answers.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a count of tokens by the server's own tokenizer may take (a server that
/// answers one request at a time makes it wait for the one in progress).
const TOKENIZE_TIMEOUT: Duration = Duration::from_secs(30);

/// The most bytes of a discovery answer read (an OpenAPI listing runs to tens of KiB).
const DISCOVERY_BODY_MAX_BYTES: usize = 1 << 20;

/// What one round of discovery learned about a server, for one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerFacts {
    /// [`DISCOVERY_FORMAT_VERSION`] when written.
    pub format_version: u32,
    /// The base URL asked, credentials redacted (the record's key holds it whole).
    pub base_url: String,
    /// The model asked about.
    pub model: String,
    /// When it was learned, in milliseconds since the Unix epoch.
    pub learned_at_ms: u64,
    /// The window the server gave (or a refusal later taught), if any.
    #[serde(default)]
    pub window: Option<ContextWindow>,
    /// The tokenizer the server offers, if it said it has one.
    #[serde(default)]
    pub tokenizer: Option<Tokenizer>,
    /// What the server said it takes to constrain a reply ([`crate::constrain`]): from
    /// llama.cpp's `/props`, the request schema of its OpenAPI listing, or its
    /// `/v1/models` owner. Absent when it said nothing (it then gets no constraint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constrain: Option<Support>,
}

/// A tokenizer a server said it offers, and how to ask it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tokenizer {
    /// llama.cpp's server: `POST {root}/tokenize` `{"content"}` → `{"tokens": […]}`.
    LlamaCpp,
    /// llama-cpp-python's server: `POST {root}/extras/tokenize/count` `{"input",
    /// "model"}` → `{"count"}`.
    LlamaCppPython,
}

impl Tokenizer {
    /// The path under the server's root.
    pub fn path(self) -> &'static str {
        match self {
            Self::LlamaCpp => "/tokenize",
            Self::LlamaCppPython => "/extras/tokenize/count",
        }
    }
}

/// True when discovery asks `config`'s server anything: an OpenAI-compatible endpoint
/// with a base URL of its own.
pub fn discovers(config: &ProviderConfig) -> bool {
    config.kind == ProviderKind::OpenAi && config.base_url.is_some()
}

/// Asks `config`'s server what it says about itself, in one round (`/models`, `/props`
/// and `/openapi.json` together; `/props` again with the key only when it was refused
/// and `/models` said the server is llama.cpp). `None` when [`discovers`] is false.
/// A server that does not answer within a few seconds is passed over.
pub async fn discover(config: &ProviderConfig) -> Option<ServerFacts> {
    if !discovers(config) {
        return None;
    }
    let base = config.base_url.as_deref()?.trim_end_matches('/').to_owned();
    let root = server_root(&base).to_owned();
    let client = client(&base, DISCOVERY_TIMEOUT)?;
    let key = config.key_env().and_then(ApiKey::from_env);
    let models_url = format!("{base}/models");
    let props_url = format!("{root}/props");
    let listing_url = format!("{root}/openapi.json");
    let (models, props, listing) = tokio::join!(
        get_json(&client, &models_url, key.as_ref()),
        get_json(&client, &props_url, None),
        get_json(&client, &listing_url, None),
    );
    let (models_answer, listing_answer) = (models, listing);
    let llama_cpp_listed = models_answer.as_ref().is_ok_and(owned_by_llama_cpp);
    let props = match props {
        Err(Some(401 | 403)) if llama_cpp_listed && key.is_some() => {
            get_json(&client, &props_url, key.as_ref()).await
        }
        other => other,
    };
    // No answer read at all (each question timed out, found nothing listening or got
    // no JSON): nothing learned, and nothing kept, so that the next run asks again.
    if [&models_answer, &props, &listing_answer]
        .iter()
        .all(|answer| matches!(answer, Err(None)))
    {
        return None;
    }
    let props = props.ok();
    let models = models_answer.ok();
    let listing = listing_answer.ok();
    let served = |url: &str, found: Option<(u32, String)>| {
        found.map(|(tokens, field)| ContextWindow {
            tokens,
            source: WindowSource::Server {
                url: crate::redact_url(url),
                field,
            },
        })
    };
    let window = served(
        &models_url,
        models
            .as_ref()
            .and_then(|m| window_in_models(m, &config.model)),
    )
    .or_else(|| served(&props_url, props.as_ref().and_then(window_in_props)));
    let tokenizer = if props.as_ref().is_some_and(is_llama_cpp_props) {
        Some(Tokenizer::LlamaCpp)
    } else if listing.as_ref().is_some_and(lists_tokenize_count) {
        Some(Tokenizer::LlamaCppPython)
    } else {
        None
    };
    let constrain = props
        .as_ref()
        .and_then(in_props)
        .or_else(|| listing.as_ref().and_then(in_listing))
        .or_else(|| models.as_ref().and_then(in_models));
    Some(ServerFacts {
        format_version: DISCOVERY_FORMAT_VERSION,
        base_url: crate::redact_url(&base),
        model: config.model.clone(),
        learned_at_ms: now_ms(),
        window,
        tokenizer,
        constrain,
    })
}

/// The window of the model `config` describes: configured, else what the server says,
/// else the table, else the default. Asks the server only for an OpenAI-compatible
/// endpoint with a base URL of its own, in one round ([`discover`]); a server
/// that does not answer within a few seconds is passed over.
pub async fn resolve_window(config: &ProviderConfig) -> ContextWindow {
    if let Some(tokens) = config.context_window {
        return ContextWindow {
            tokens,
            source: WindowSource::Configured,
        };
    }
    if let Some(window) = served_window(config).await {
        return window;
    }
    offline_window(&config.model)
}

/// What the server says about the window of `config`'s model, if anything (one round of
/// [`discover`], no cache).
pub async fn served_window(config: &ProviderConfig) -> Option<ContextWindow> {
    discover(config).await?.window
}

/// The tokens of `text` counted by `tokenizer` on `config`'s server (one the server
/// said it offers: [`ServerFacts::tokenizer`]). `None` when it does not answer.
pub async fn count_tokens(
    config: &ProviderConfig,
    tokenizer: Tokenizer,
    text: &str,
) -> Option<u64> {
    let base = config.base_url.as_deref()?.trim_end_matches('/');
    let url = format!("{}{}", server_root(base), tokenizer.path());
    let body = match tokenizer {
        Tokenizer::LlamaCpp => serde_json::json!({"content": text}),
        Tokenizer::LlamaCppPython => serde_json::json!({"input": text, "model": config.model}),
    };
    let client = client(base, TOKENIZE_TIMEOUT)?;
    let mut request = client.post(&url).json(&body);
    if let Some(key) = config.key_env().and_then(ApiKey::from_env) {
        request = request.bearer_auth(key.expose());
    }
    let response = request.send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    let answer: Value = response.json().await.ok()?;
    match tokenizer {
        Tokenizer::LlamaCpp => answer
            .get("tokens")?
            .as_array()
            .map(|tokens| tokens.len() as u64),
        Tokenizer::LlamaCppPython => answer.get("count")?.as_u64(),
    }
}

/// The server's root: the base URL without its `/v1` (llama.cpp answers `/props` and
/// `/tokenize` there, llama-cpp-python its extras and listing).
fn server_root(base: &str) -> &str {
    base.strip_suffix("/v1").unwrap_or(base)
}

/// A client for discovery of `base`: `TCP_NODELAY`, a bound on each answer, no proxy;
/// for a plain `http://` server no TLS roots (loading the system's took longer than
/// the questions themselves: about 100 ms of a debug build's start).
fn client(base: &str, timeout: Duration) -> Option<reqwest::Client> {
    crate::config::install_crypto_provider();
    let mut builder = reqwest::Client::builder()
        .tcp_nodelay(true)
        .timeout(timeout)
        .no_proxy();
    if base.starts_with("http://") {
        builder = builder.tls_certs_only(std::iter::empty());
    }
    builder.build().ok()
}

/// `GET url` as JSON (with the key when given), at most [`DISCOVERY_BODY_MAX_BYTES`];
/// the error is the status when the server answered with one.
async fn get_json(
    client: &reqwest::Client,
    url: &str,
    key: Option<&ApiKey>,
) -> Result<Value, Option<u16>> {
    let mut request = client.get(url);
    if let Some(key) = key {
        request = request.bearer_auth(key.expose());
    }
    let response = request.send().await.map_err(|_| None)?;
    let status = response.status();
    if !status.is_success() {
        return Err(Some(status.as_u16()));
    }
    let (bytes, cut) = crate::http::read_capped(response, DISCOVERY_BODY_MAX_BYTES)
        .await
        .map_err(|_| None)?;
    if cut {
        return Err(None);
    }
    serde_json::from_slice(&bytes).map_err(|_| None)
}

/// True when a `/models` listing says the server is llama.cpp (`owned_by: "llamacpp"`).
fn owned_by_llama_cpp(listing: &Value) -> bool {
    listing
        .get("data")
        .and_then(Value::as_array)
        .is_some_and(|entries| {
            entries
                .iter()
                .any(|e| e.get("owned_by").and_then(Value::as_str) == Some("llamacpp"))
        })
}

/// True when `/props` is llama.cpp's: its `default_generation_settings` object.
fn is_llama_cpp_props(props: &Value) -> bool {
    props
        .get("default_generation_settings")
        .is_some_and(Value::is_object)
}

/// True when an OpenAPI listing names llama-cpp-python's `/extras/tokenize/count`.
fn lists_tokenize_count(listing: &Value) -> bool {
    listing
        .get("paths")
        .and_then(Value::as_object)
        .is_some_and(|paths| paths.contains_key(Tokenizer::LlamaCppPython.path()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn servers_say_what_they_are_in_their_own_words() {
        assert!(owned_by_llama_cpp(
            &json!({"data": [{"id": "m", "owned_by": "llamacpp"}]})
        ));
        assert!(!owned_by_llama_cpp(
            &json!({"data": [{"id": "m", "owned_by": "me"}]})
        ));
        assert!(is_llama_cpp_props(
            &json!({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1})
        ));
        assert!(!is_llama_cpp_props(&json!({"n_ctx": 4096})));
        assert!(lists_tokenize_count(
            &json!({"paths": {"/extras/tokenize/count": {"post": {}}}})
        ));
        assert!(!lists_tokenize_count(&json!({"paths": {"/tokenize": {}}})));
        assert_eq!(server_root("http://h:1/v1"), "http://h:1");
        assert_eq!(server_root("http://h:1/api"), "http://h:1/api");
    }

    #[test]
    fn a_record_reads_back_and_tolerates_what_later_builds_add() {
        let facts = ServerFacts {
            format_version: DISCOVERY_FORMAT_VERSION,
            base_url: "http://127.0.0.1:8080/v1".into(),
            model: "m".into(),
            learned_at_ms: 1,
            window: Some(ContextWindow {
                tokens: 8_192,
                source: WindowSource::Server {
                    url: "http://127.0.0.1:8080/props".into(),
                    field: "n_ctx".into(),
                },
            }),
            tokenizer: Some(Tokenizer::LlamaCpp),
            constrain: None,
        };
        let text = serde_json::to_string(&facts).unwrap_or_default();
        assert!(text.contains("\"formatVersion\":1"), "{text}");
        assert_eq!(
            serde_json::from_str::<ServerFacts>(&text).ok(),
            Some(facts.clone())
        );
        // A field a later build adds is ignored; one this build adds may be missing.
        let later = json!({"formatVersion": 1, "baseUrl": "u", "model": "m",
            "learnedAtMs": 2, "structuredOutput": {"jsonSchema": true}});
        let read: Option<ServerFacts> = serde_json::from_value(later).ok();
        assert_eq!(
            read.map(|f| (f.window, f.tokenizer, f.constrain)),
            Some((None, None, None))
        );
        // A record of a build before `constrain` has none, and one with it keeps it.
        let mut told = facts.clone();
        told.constrain = Some(Support::default());
        let text = serde_json::to_string(&told).unwrap_or_default();
        assert_eq!(serde_json::from_str::<ServerFacts>(&text).ok(), Some(told));
    }
}

//! The host functions model code calls: sub-model queries, the store, sub-agents.
//!
//! Errors returned here are *for the model*: they surface in its code as exceptions
//! with a message that says what to do (split the context, the budget is spent, …).
//! Fatal problems never pass through this path.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use rlm_context_store::{ListFilter, SetOptions, Store};
use rlm_process::CancellationToken;
use serde_json::{json, Value};

use crate::accounting::Accounting;
use crate::agents::{new_agent_id, run_external_agent, AgentCommand, AgentRef, ExternalAgentSpec};
use crate::cache::{CallCache, CallKey};
use crate::env::Host;
use crate::events::{EventData, EventSink};
use crate::provider::{ChatMessage, ChatRequest, Completion, Prices, Provider, Usage};
use crate::subrlm::{run_child, ChildRequest, SubRlmLauncher};

/// Characters of context kept when `sub_rlm` becomes a plain call at max depth.
pub const ONE_SHOT_CONTEXT_CHARS: usize = 8_000;

/// Default `--sub-context-chars`.
pub const DEFAULT_SUB_CONTEXT_CHARS: usize = 400_000;

/// Bytes of an external agent's stdout kept as its answer.
pub const AGENT_STDOUT_CAP_BYTES: usize = 1 << 20;

/// Default `--max-parallel`.
pub const DEFAULT_MAX_PARALLEL: usize = 4;

/// A model with its price.
#[derive(Clone)]
pub struct Model {
    /// The provider.
    pub provider: Arc<dyn Provider>,
    /// Its price, if configured.
    pub price: Option<Prices>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("provider", &self.provider.describe())
            .field("price", &self.price)
            .finish()
    }
}

/// Accounts one finished model call (tokens, cost) and traces it as `llm_call`.
pub(crate) fn record_call(
    model: &Model,
    request: &ChatRequest,
    completion: &Completion,
    purpose: &str,
    accounting: &Accounting,
    sink: &EventSink,
) {
    let cost = model.price.map(|p| p.cost_usd(&completion.usage));
    accounting.record_call(completion.usage, cost);
    sink.emit(EventData::LlmCall {
        model: completion.model.clone(),
        purpose: purpose.to_owned(),
        prompt_tokens: completion.usage.prompt_tokens,
        completion_tokens: completion.usage.completion_tokens,
        usage_reported: completion.usage_reported,
        latency_ms: completion.latency.as_millis() as u64,
        attempts: completion.attempts,
        request_bytes: request
            .messages
            .iter()
            .map(|m| m.content.len() as u64)
            .sum(),
        cost_usd: cost,
    });
}

/// Settings of the host functions.
#[derive(Debug, Clone)]
pub struct HostSettings {
    /// `--max-parallel`.
    pub max_parallel: usize,
    /// `--sub-context-chars`: the longest prompt a sub-call may send.
    pub sub_context_chars: usize,
    /// This run's depth.
    pub depth: u32,
    /// `--max-depth`.
    pub max_depth: u32,
    /// Scope of variables written from code.
    pub scope: String,
    /// Answer identical sub-calls from the store (`--no-cache` turns it off).
    pub cache: bool,
    /// This run's agent id (the parent id of its sub-agents).
    pub agent_id: String,
    /// How `sub_rlm` starts child runs; `None` makes it a plain sub-model call.
    pub sub_rlm: Option<SubRlmLauncher>,
    /// `--agent-cmd`, parsed.
    pub agent_command: Option<AgentCommand>,
    /// `--agent-env`: variables external agents may see.
    pub agent_env: Vec<String>,
    /// `--agent-timeout`.
    pub agent_timeout: Duration,
    /// Ends every sub-agent of the run (Ctrl-C, SIGTERM).
    pub cancel: CancellationToken,
}

/// Serves host calls of one run.
pub struct RunHost {
    store: Arc<Store>,
    cache: CallCache,
    sub_model: Model,
    sink: EventSink,
    accounting: Arc<Accounting>,
    settings: HostSettings,
}

impl RunHost {
    /// A host over `store` that asks `sub_model` for sub-calls.
    pub fn new(
        store: Arc<Store>,
        sub_model: Model,
        sink: EventSink,
        accounting: Arc<Accounting>,
        settings: HostSettings,
    ) -> Self {
        Self {
            cache: CallCache::new(Arc::clone(&store), settings.cache),
            store,
            sub_model,
            sink,
            accounting,
            settings,
        }
    }

    /// One plain sub-model call.
    async fn llm_query(
        &self,
        prompt: &str,
        context: Option<&Value>,
        purpose: &str,
    ) -> Result<String, String> {
        let mut content = prompt.to_owned();
        if let Some(context) = context.filter(|c| !c.is_null()) {
            content.push_str("\n\nContext:\n");
            match context {
                Value::String(s) => content.push_str(s),
                other => content.push_str(&other.to_string()),
            }
        }
        let chars = content.chars().count();
        if chars > self.settings.sub_context_chars {
            return Err(format!(
                "this sub-call's prompt is {chars} characters, over the sub-model's limit of {} (--sub-context-chars); split the context into smaller pieces",
                self.settings.sub_context_chars
            ));
        }
        let key = CallKey::new("llm_query", &[self.sub_model.provider.model(), &content]);
        if let Some(Value::String(answer)) = self.cache.get(&key).await {
            self.sink.emit(EventData::CacheHit {
                call: "llm_query".into(),
                key: key.variable(),
            });
            return Ok(answer);
        }
        if let Some(reason) = self.accounting.exhausted() {
            return Err(format!(
                "no more model calls: {reason}; answer from what you have"
            ));
        }
        let request = ChatRequest {
            messages: vec![ChatMessage::user(content)],
            ..ChatRequest::default()
        };
        let completion = self
            .sub_model
            .provider
            .complete(&request, None)
            .await
            .map_err(|e| e.to_string())?;
        record_call(
            &self.sub_model,
            &request,
            &completion,
            purpose,
            &self.accounting,
            &self.sink,
        );
        self.cache
            .put(&key, "llm_query", &Value::String(completion.text.clone()))
            .await;
        Ok(completion.text)
    }

    async fn llm_query_parallel(&self, prompts: &[Value]) -> Value {
        let jobs: Vec<(String, Option<Value>)> = prompts
            .iter()
            .map(|item| match item {
                Value::String(p) => (p.clone(), None),
                other => (
                    other
                        .get("prompt")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    other.get("context").cloned(),
                ),
            })
            .collect();
        let answers: Vec<Value> = stream::iter(jobs)
            .map(|(prompt, context)| async move {
                match self.llm_query(&prompt, context.as_ref(), "llm_query").await {
                    Ok(text) => Value::String(text),
                    Err(error) => json!({ "error": error }),
                }
            })
            .buffered(self.settings.max_parallel.max(1))
            .collect()
            .await;
        Value::Array(answers)
    }

    /// `sub_rlm` at max depth (and, until sub-agent processes exist, at every depth):
    /// a plain call with the context cut to [`ONE_SHOT_CONTEXT_CHARS`].
    async fn one_shot_sub_rlm(
        &self,
        query: &str,
        context: Option<&Value>,
    ) -> Result<String, String> {
        let context = context.map(|c| {
            let text = match c {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let total = text.chars().count();
            if total <= ONE_SHOT_CONTEXT_CHARS {
                Value::String(text)
            } else {
                let cut: String = text.chars().take(ONE_SHOT_CONTEXT_CHARS).collect();
                Value::String(format!("{cut}\n[context truncated: first {ONE_SHOT_CONTEXT_CHARS} of {total} characters]"))
            }
        });
        self.llm_query(query, context.as_ref(), "sub_rlm_one_shot")
            .await
    }

    /// `sub_rlm`: a child `rlm-orchestrate run` one level deeper, unless this run is at
    /// the maximum depth (or children are disabled): then one plain sub-model call.
    async fn sub_rlm(&self, query: &str, context: Option<&Value>) -> Result<String, String> {
        let Some(launcher) = self
            .settings
            .sub_rlm
            .as_ref()
            .filter(|_| self.settings.depth < self.settings.max_depth)
        else {
            return self.one_shot_sub_rlm(query, context).await;
        };
        if let Some(reason) = self.accounting.exhausted() {
            return Err(format!(
                "no sub-run started: {reason}; answer from what you have"
            ));
        }
        let child_id = new_agent_id();
        let parent = self.settings.agent_id.clone();
        // The child gets its context by reference: a variable of its own.
        // (key, sha256) of the variable holding the child's context.
        let context_var = match context.filter(|c| !c.is_null()) {
            None => None,
            Some(value) => {
                let key = format!("sub-context-{child_id}");
                let (store, value, scope, k) = (
                    Arc::clone(&self.store),
                    value.clone(),
                    format!("agent:{parent}"),
                    key.clone(),
                );
                let stored = tokio::task::spawn_blocking(move || {
                    store.set(&k, value, SetOptions::default().scope(scope))
                })
                .await
                .map_err(|e| format!("store task failed: {e}"))?
                .map_err(|e| e.to_string())?;
                Some((key, stored.sha256.unwrap_or_default()))
            }
        };
        let (context_key, context_sha) = match context_var {
            Some((key, sha)) => (Some(key), sha),
            None => (None, String::new()),
        };
        let cache_key = CallKey::new(
            "sub_rlm",
            &[self.sub_model.provider.model(), query, &context_sha],
        );
        if let Some(Value::String(answer)) = self.cache.get(&cache_key).await {
            self.sink.emit(EventData::CacheHit {
                call: "sub_rlm".into(),
                key: cache_key.variable(),
            });
            return Ok(answer);
        }
        self.accounting.record_sub_agent();
        self.sink.emit(EventData::SubAgentSpawned {
            child_agent_id: child_id.clone(),
            mode: "sub_rlm".into(),
            pid: None,
            task: query.to_owned(),
        });
        let request = ChildRequest {
            child_id: child_id.clone(),
            parent_id: parent,
            depth: self.settings.depth + 1,
            data_dir: self.store.data_dir().to_owned(),
            query: query.to_owned(),
            context_key,
            budget_args: self.accounting.remaining_budget_args(),
            cancel: Some(self.settings.cancel.clone()),
        };
        let outcome = run_child(launcher, Arc::clone(&self.store), request).await;
        self.accounting.record_child(&outcome.report);
        self.sink.emit(EventData::SubAgentFinished {
            child_agent_id: child_id,
            status: outcome.termination.to_string(),
            duration_ms: outcome.duration.as_millis() as u64,
            usage: outcome.report.usage,
        });
        match outcome.report.answer {
            Ok(answer) => {
                self.cache
                    .put(&cache_key, "sub_rlm", &Value::String(answer.clone()))
                    .await;
                Ok(answer)
            }
            Err(error) => Err(format!("the sub-run failed: {error}")),
        }
    }

    /// `spawn_agent`: the external agent command on `task` with the variables `refs`
    /// passed by file path. Returns its answer, or the error object describing how it
    /// failed (also stored as its `sub-result-<id>`).
    async fn spawn_agent(&self, task: &str, refs: &[String]) -> Result<Value, String> {
        let Some(command) = &self.settings.agent_command else {
            return Err("no external agent is configured: start the run with --agent-cmd, e.g. --agent-cmd 'claude -p {prompt}'".to_owned());
        };
        let store = Arc::clone(&self.store);
        let keys = refs.to_vec();
        // Each reference, persisted for the agent, with its sha256 for the cache key.
        let described = tokio::task::spawn_blocking(move || {
            keys.iter()
                .map(|key| {
                    let agent_ref = AgentRef::from_store(&store, key)?;
                    let sha = store.reference(key)?.sha256.unwrap_or_default();
                    Ok((agent_ref, sha))
                })
                .collect::<Result<Vec<_>, rlm_context_store::StoreError>>()
        })
        .await
        .map_err(|e| format!("store task failed: {e}"))?
        .map_err(|e| e.to_string())?;
        let mut parts: Vec<String> = vec![command.template().to_owned(), task.to_owned()];
        let mut agent_refs = Vec::with_capacity(described.len());
        for (agent_ref, sha) in described {
            parts.push(sha);
            agent_refs.push(agent_ref);
        }
        let part_refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        let cache_key = CallKey::new("spawn_agent", &part_refs);
        if let Some(answer) = self.cache.get(&cache_key).await {
            self.sink.emit(EventData::CacheHit {
                call: "spawn_agent".into(),
                key: cache_key.variable(),
            });
            return Ok(answer);
        }
        if let Some(reason) = self.accounting.exhausted() {
            return Err(format!(
                "no agent started: {reason}; answer from what you have"
            ));
        }
        let agent_id = new_agent_id();
        self.accounting.record_sub_agent();
        self.sink.emit(EventData::SubAgentSpawned {
            child_agent_id: agent_id.clone(),
            mode: "spawn_agent".into(),
            pid: None,
            task: task.to_owned(),
        });
        let spec = ExternalAgentSpec {
            agent_id: agent_id.clone(),
            parent_id: self.settings.agent_id.clone(),
            depth: self.settings.depth + 1,
            data_dir: self.store.data_dir().to_owned(),
            task: task.to_owned(),
            refs: agent_refs,
            timeout: self.settings.agent_timeout,
            stdout_cap: AGENT_STDOUT_CAP_BYTES,
            pass_env: self.settings.agent_env.clone(),
            cancel: Some(self.settings.cancel.clone()),
        };
        let outcome = run_external_agent(command, spec, Arc::clone(&self.store)).await;
        self.sink.emit(EventData::SubAgentFinished {
            child_agent_id: agent_id,
            status: outcome.termination.to_string(),
            duration_ms: outcome.duration.as_millis() as u64,
            usage: Usage::default(),
        });
        if outcome.ok {
            self.cache
                .put(&cache_key, "spawn_agent", &outcome.value)
                .await;
        }
        Ok(outcome.value)
    }

    async fn store_call(&self, method: &str, args: Value) -> Result<Value, String> {
        let store = Arc::clone(&self.store);
        let scope = self.settings.scope.clone();
        let method = method.to_owned();
        tokio::task::spawn_blocking(move || -> Result<Value, String> {
            let key = || {
                args.get("key")
                    .and_then(Value::as_str)
                    .ok_or_else(|| "missing string argument `key`".to_owned())
            };
            match method.as_str() {
                "store_set" => {
                    let value = args.get("value").cloned().unwrap_or(Value::Null);
                    store
                        .set(key()?, value, SetOptions::default().scope(scope))
                        .map_err(|e| e.to_string())
                        .and_then(to_json)
                }
                "store_ref" => {
                    let key = key()?;
                    let reference = store.reference(key).map_err(|e| e.to_string())?;
                    let path = store
                        .persist_for_sub_agent(key)
                        .map_err(|e| e.to_string())?;
                    let mut value = to_json(reference)?;
                    value["path"] = Value::String(path.display().to_string());
                    Ok(value)
                }
                "store_list" => to_json(store.list(&ListFilter::default())),
                "store_delete" => store
                    .delete(key()?)
                    .map(|()| Value::Null)
                    .map_err(|e| e.to_string()),
                other => Err(format!("unknown store method {other}")),
            }
        })
        .await
        .map_err(|e| format!("store task failed: {e}"))?
    }
}

/// A list of strings from a JSON array (or one string).
fn string_list(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

fn to_json(value: impl serde::Serialize) -> Result<Value, String> {
    serde_json::to_value(value).map_err(|e| e.to_string())
}

#[async_trait::async_trait]
impl Host for RunHost {
    async fn call(&self, method: &str, args: Value) -> Result<Value, String> {
        let text = |name: &str| {
            args.get(name)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        match method {
            "llm_query" => self
                .llm_query(&text("prompt"), args.get("context"), "llm_query")
                .await
                .map(Value::String),
            "llm_query_parallel" => {
                let prompts = args
                    .get("prompts")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                Ok(self.llm_query_parallel(&prompts).await)
            }
            "summarize" => {
                let max_tokens = args
                    .get("max_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(500);
                let prompt = format!("Summarize the following in at most {max_tokens} tokens. Keep names, numbers and anything unusual.");
                self.llm_query(&prompt, args.get("text"), "summarize")
                    .await
                    .map(Value::String)
            }
            "sub_rlm" => self
                .sub_rlm(&text("query"), args.get("context"))
                .await
                .map(Value::String),
            "spawn_agent" => {
                let refs = string_list(args.get("refs"));
                self.spawn_agent(&text("task"), &refs).await
            }
            "spawn_agents" => {
                let jobs: Vec<(String, Vec<String>)> = args
                    .get("jobs")
                    .and_then(Value::as_array)
                    .map(|jobs| {
                        jobs.iter()
                            .map(|job| {
                                let task = job
                                    .get("task")
                                    .and_then(Value::as_str)
                                    .unwrap_or("")
                                    .to_owned();
                                (task, string_list(job.get("refs")))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let answers: Vec<Value> = stream::iter(jobs)
                    .map(|(task, refs)| async move {
                        self.spawn_agent(&task, &refs)
                            .await
                            .unwrap_or_else(|error| json!({ "error": error }))
                    })
                    .buffered(self.settings.max_parallel.max(1))
                    .collect()
                    .await;
                Ok(Value::Array(answers))
            }
            "store_set" | "store_ref" | "store_list" | "store_delete" => {
                self.store_call(method, args).await
            }
            other => Err(format!("unknown host function {other}")),
        }
    }
}

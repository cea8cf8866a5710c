//! [`RunHost`]: serves the host calls of one run — sub-model calls, nested runs,
//! external agents and the store — with budgets, memoisation and a trace.
//!
//! What goes wrong in a call is for the model ([`HostError::RespondToModel`]): it
//! surfaces in its code as an exception whose message says what to do (split the
//! context, the budget is spent, configure `--agent-cmd`, …). Only what the model
//! cannot fix — a store task that panicked — is [`HostError::Fatal`].

use std::sync::Arc;

use rlm_context_store::{ListFilter, SetOptions, Store, StoreError};
use serde_json::Value;

use rlm_protocol::host_call::{AgentJob, HostCall, HostError, HostReply, PromptArgs, SubRlmArgs};
use rlm_protocol::SubResult;

use super::detached::{end_status, DetachedAgents, StopOnDrop, SETTLE_LIMIT};
use super::structured::Shape;
use super::sub_fit;
use super::{expected_cost, fan_out, record_call, Host, HostSettings, Model};
use crate::accounting::Accounting;
use crate::agents::{child_totals, run_child, Abandonment, ChildRequest};
use crate::cache::{CallCache, CallKey};
use crate::events::{
    AgentMode, CacheHit, CachedCall, CallPurpose, EventData, EventSink, SubAgentFinished,
    SubAgentSpawned,
};
use crate::ids::AgentId;
use crate::provider::{ChatMessage, ChatRequest};

/// Characters of context kept when `sub_rlm` becomes a plain call at max depth.
pub const ONE_SHOT_CONTEXT_CHARS: usize = 8_000;

pub use crate::settings::{DEFAULT_MAX_PARALLEL, DEFAULT_SUB_CONTEXT_CHARS};

/// Bytes of an external agent's stdout kept as its answer.
pub const AGENT_STDOUT_CAP_BYTES: usize = 1 << 20;

/// Serves host calls of one run.
pub struct RunHost {
    pub(super) store: Arc<Store>,
    pub(super) cache: CallCache,
    pub(super) sub_model: Model,
    pub(super) sink: EventSink,
    pub(super) accounting: Arc<Accounting>,
    pub(super) settings: HostSettings,
    /// Agents on tasks of their own (see [`super::detached`]).
    pub(super) agents: Arc<DetachedAgents>,
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
            cache: CallCache::new(Arc::clone(&store), settings.delegation.cache),
            store,
            sub_model,
            sink,
            accounting,
            settings,
            agents: Arc::default(),
        }
    }

    /// Waits (a bounded time) until every agent this run started has ended and its
    /// result and end are recorded, even those whose calls were abandoned; `false` if
    /// some had not after [`SETTLE_LIMIT`].
    pub async fn agents_settled(&self) -> bool {
        self.agents.settled(SETTLE_LIMIT).await
    }

    /// The scope of variables this run's code writes: `agent:<agent id>`.
    pub(super) fn scope(&self) -> String {
        self.settings.lineage.agent_id.scope()
    }

    /// Store work off the async threads; a panic there is fatal, a store error is for
    /// the model.
    pub(super) async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, HostError> {
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || work(&store))
            .await
            .map_err(|e| HostError::Fatal(format!("a store task failed: {e}")))?
            .map_err(|e| HostError::RespondToModel(e.to_string()))
    }

    pub(super) fn cache_hit(&self, call: CachedCall, key: &CallKey) {
        self.sink.emit(EventData::CacheHit(CacheHit {
            call,
            key: key.variable(),
        }));
    }

    /// One plain sub-model call, checked against `--sub-context-chars` and the
    /// sub-model's window: a prompt that does not fit is refused with the sizes, or,
    /// when `args.split` asks for it, its context is split, asked piece by piece, and
    /// the answers combined. With `args.schema` the answer is the JSON value it asks
    /// for ([`Shape`]).
    async fn llm_query(&self, args: &PromptArgs, purpose: CallPurpose) -> Result<Value, HostError> {
        let Some(schema) = &args.schema else {
            return self
                .query_text(args, purpose, None)
                .await
                .map(Value::String);
        };
        let shape = Shape::new(schema, purpose.helper())?;
        let text = self.query_text(args, purpose, Some(&shape)).await?;
        // Read and checked already ([`Self::ask_sub_as`]): this cannot fail.
        shape.read(&text)
    }

    /// [`Self::llm_query`]'s text: the answer, or with `shape` the JSON of its value.
    async fn query_text(
        &self,
        args: &PromptArgs,
        purpose: CallPurpose,
        shape: Option<&Shape>,
    ) -> Result<String, HostError> {
        let context = args
            .context
            .as_ref()
            .filter(|c| !c.is_null())
            .map(|context| match context {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
        let mut content = sub_fit::with_context(&args.prompt, context.as_deref());
        if let Some(shape) = shape {
            content = shape.prompt(&content);
        }
        let chars = content.chars().count();
        if chars > self.settings.delegation.sub_context_chars {
            return Err(HostError::RespondToModel(format!(
                "this sub-call's prompt is {chars} characters, over the sub-model's limit of {} (--sub-context-chars); split the context into smaller pieces",
                self.settings.delegation.sub_context_chars
            )));
        }
        let fit = sub_fit::measure(&self.sub_model.window, &content).await;
        if fit.fits() {
            return self.ask_sub_as(content, purpose, shape).await;
        }
        if shape.is_some() && args.split {
            return Err(HostError::RespondToModel(format!(
                "{}: the prompt does not fit the sub-model's window, and split=True cannot combine answers that must match a schema; ask about smaller pieces of the context, each with schema=, and combine the values in code",
                purpose.helper()
            )));
        }
        let window = &self.sub_model.window;
        // Pieces of the context at its own density (`measure` counted a sample of it).
        let piece = sub_fit::piece_chars_beside(
            window.estimator.tokens_of(&args.prompt),
            fit.budget,
            window.estimator.ratio_of(&content),
        );
        match (args.split, context, piece) {
            (true, Some(context), Some(piece)) => {
                self.split_query(&args.prompt, &context, piece, fit, purpose)
                    .await
            }
            (_, context, piece) => Err(HostError::RespondToModel(
                fit.refusal(purpose.helper(), context.and(piece)),
            )),
        }
    }

    /// One sub-model call with `content` as it is: answered from the cache when asked
    /// before, else within the budgets, accounted and cached. Whatever asked for it,
    /// the content itself is measured first ([`sub_fit::unsendable`]): a plan priced
    /// on what a pieces variable claimed, or any other way round the checks before it,
    /// sends nothing over `--sub-context-chars`, the window or `--max-tokens`.
    pub(super) async fn ask_sub(
        &self,
        content: String,
        purpose: CallPurpose,
    ) -> Result<String, HostError> {
        self.ask_sub_as(content, purpose, None).await
    }

    /// [`Self::ask_sub`], the reply held to `shape` where given: its schema goes to
    /// the server, and the answer is the JSON of the value read from the reply (a
    /// reply that does not match is an error, and is not cached).
    pub(super) async fn ask_sub_as(
        &self,
        content: String,
        purpose: CallPurpose,
        shape: Option<&Shape>,
    ) -> Result<String, HostError> {
        let window = &self.sub_model.window;
        let limits = sub_fit::SendLimits {
            max_chars: self.settings.delegation.sub_context_chars,
            budget: window.prompt_budget().await,
            chars_per_token: window.estimator.calibration().0,
            tokens_left: self.accounting.left().tokens,
        };
        if let Some(reason) = sub_fit::unsendable(&content, &limits) {
            return Err(HostError::RespondToModel(format!(
                "{}: {reason}; nothing was sent",
                purpose.helper()
            )));
        }
        let key = CallKey::new(
            CachedCall::LlmQuery,
            &[self.sub_model.provider.model(), &content],
        );
        if let Some(Value::String(answer)) = self.cache.get(&key).await {
            if shape.is_none_or(|shape| shape.read(&answer).is_ok()) {
                self.cache_hit(CachedCall::LlmQuery, &key);
                return Ok(answer);
            }
        }
        let request = ChatRequest {
            messages: vec![ChatMessage::user(content)],
            max_tokens: self.sub_model.window.answer_limit().await,
            response_format: shape.map(Shape::format),
            ..ChatRequest::default()
        };
        let reserved = expected_cost(&self.sub_model, &request.messages);
        if let Some(reason) = self.accounting.start_call(reserved) {
            return Err(HostError::RespondToModel(format!(
                "no more model calls: {reason}; answer from what you have"
            )));
        }
        let answer = self
            .sub_model
            .complete_within(&request, None, &self.accounting, false)
            .await;
        let completion = match answer {
            Ok(completion) => completion,
            Err(error) => {
                self.accounting.release(reserved);
                let window = &self.sub_model.window;
                if let Some(learned) = window.learn_from_refusal(&error, &request).await {
                    // Known from now on: the next call is checked before it is sent.
                    return Err(HostError::RespondToModel(format!(
                        "the sub-model refused this prompt (about {} tokens) as too long: its window is {learned}; ask again with a shorter context, or with split=True to have it split",
                        window.estimator.request_tokens(&request)
                    )));
                }
                return Err(HostError::RespondToModel(error.to_string()));
            }
        };
        record_call(
            &self.sub_model,
            &request,
            &completion,
            purpose,
            (&self.accounting, reserved),
            &self.sink,
        );
        let answer = match shape {
            Some(shape) => shape.read(&completion.text)?.to_string(),
            None => completion.text,
        };
        self.cache
            .put(&key, CachedCall::LlmQuery, &Value::String(answer.clone()))
            .await;
        Ok(answer)
    }

    /// Several plain calls, `--max-parallel` at a time; each answer or error object.
    async fn llm_query_parallel(&self, prompts: Vec<PromptArgs>) -> Result<HostReply, HostError> {
        let answers = fan_out::in_order(
            prompts,
            self.settings.delegation.max_parallel,
            |args| async move { self.llm_query(&args, CallPurpose::LlmQuery).await },
        )
        .await;
        answers_in_order(answers)
    }

    /// `sub_rlm` at max depth (or when children are disabled): a plain call with the
    /// context cut to [`ONE_SHOT_CONTEXT_CHARS`].
    async fn one_shot_sub_rlm(&self, args: &SubRlmArgs) -> Result<String, HostError> {
        let by_key = match (&args.context, &args.context_key) {
            (None, Some(key)) => {
                let k = key.clone();
                Some(
                    self.blocking(move |store| one_shot_value(store, &k))
                        .await?,
                )
            }
            _ => None,
        };
        let context = match (&args.context, by_key) {
            (_, Some(OneShotContext::Cut(text))) => Some(Value::String(text)),
            (Some(value), _) => Some(cut_for_one_shot(value)),
            (None, Some(OneShotContext::Whole(value))) => Some(cut_for_one_shot(&value)),
            (None, None) => None,
        };
        // A nested run would have worked through its context whatever its size: the
        // plain call in its place splits what does not fit the window.
        let prompt = PromptArgs {
            prompt: args.query.clone(),
            context,
            split: true,
            schema: None,
        };
        self.query_text(&prompt, CallPurpose::SubRlmOneShot, None)
            .await
    }

    /// `sub_rlm`: a child `rlm-orchestrate run` one level deeper, unless this run is at
    /// the maximum depth (or children are disabled): then one plain sub-model call.
    pub(super) async fn sub_rlm(&self, args: &SubRlmArgs) -> Result<String, HostError> {
        let lineage = &self.settings.lineage;
        let Some(launcher) = self
            .settings
            .delegation
            .sub_rlm
            .as_ref()
            .filter(|_| lineage.depth < self.settings.delegation.max_depth)
        else {
            return self.one_shot_sub_rlm(args).await;
        };
        if let Some(reason) = self.accounting.exhausted() {
            return Err(HostError::RespondToModel(format!(
                "no sub-run started: {reason}; answer from what you have"
            )));
        }
        let child = lineage.child(AgentId::generate());
        // The child gets its context by reference: a variable of its own, or one that
        // already exists.
        let context = match args.context.clone().filter(|c| !c.is_null()) {
            None => match &args.context_key {
                None => None,
                Some(key) => {
                    let k = key.clone();
                    let digest = self
                        .blocking(move |store| crate::cache::variable_digest(store, &k))
                        .await?;
                    Some((key.clone(), digest))
                }
            },
            Some(value) => {
                let key = format!("sub-context-{}", child.agent_id);
                let (k, scope) = (key.clone(), self.scope());
                let stored = self
                    .blocking(move |store| store.set(&k, value, SetOptions::default().scope(scope)))
                    .await?;
                Some((key, stored.sha256.unwrap_or_default()))
            }
        };
        let context_sha = context.as_ref().map_or("", |(_, sha)| sha.as_str());
        let cache_key = CallKey::new(
            CachedCall::SubRlm,
            &[self.sub_model.provider.model(), &args.query, context_sha],
        );
        if let Some(Value::String(answer)) = self.cache.get(&cache_key).await {
            self.cache_hit(CachedCall::SubRlm, &cache_key);
            return Ok(answer);
        }
        // The child's forced answer is within the tree's call budget: its call is held
        // before the child starts, or the child does not start.
        if let Some(reason) = self.accounting.hold_for_child(child.agent_id.as_str()) {
            return Err(HostError::RespondToModel(format!(
                "no sub-run started: {reason}; answer from what you have"
            )));
        }
        self.accounting.record_sub_agent();
        self.sink.emit(EventData::SubAgentSpawned(SubAgentSpawned {
            child_agent_id: child.agent_id.clone(),
            mode: AgentMode::SubRlm,
            pid: None,
            task: args.query.clone(),
        }));
        let child_id = child.agent_id.clone();
        let child_depth = child.depth;
        let stop = StopOnDrop::for_run(&self.settings.cancel);
        let request = ChildRequest {
            lineage: child,
            query: args.query.clone(),
            context_var: context.map(|(key, _)| key),
            limits: self.accounting.remaining(),
            budget_ledger: self.accounting.tree().map(|tree| tree.path().to_owned()),
            cancel: Some(stop.agent.clone()),
            abandoned: Some(Abandonment {
                token: stop.abandoned.clone(),
                cell_timeout: self.settings.delegation.cell_timeout,
            }),
        };
        // On a task of its own, as an external agent is (see `spawn_agent`).
        let (launcher, store) = (launcher.clone(), Arc::clone(&self.store));
        let (sink, accounting) = (self.sink.clone(), Arc::clone(&self.accounting));
        let abandoned = stop.abandoned.clone();
        let child = self.agents.spawn(async move {
            let outcome = run_child(&launcher, store, request).await;
            accounting.release_child(child_id.as_str());
            let totals = child_totals(&outcome.result, child_depth);
            accounting.record_child(&totals);
            sink.emit(EventData::SubAgentFinished(SubAgentFinished {
                child_agent_id: child_id,
                status: end_status(&outcome.termination, &abandoned),
                duration_ms: outcome.duration.as_millis() as u64,
                usage: totals.totals.usage,
            }));
            outcome
        });
        let outcome = child.await.map_err(|error| {
            HostError::Fatal(format!("supervising a nested run failed: {error}"))
        })?;
        stop.disarm();
        match outcome.result {
            SubResult::Answer(answer) => {
                let text = answer.text();
                self.cache
                    .put(&cache_key, CachedCall::SubRlm, &Value::String(text.clone()))
                    .await;
                Ok(text)
            }
            SubResult::Error(failure) => {
                let mut message = format!("the sub-run failed: {}", failure.error);
                let tail = failure.stderr_tail.trim();
                if !tail.is_empty() {
                    message.push_str(&format!("; its stderr ended with:\n{tail}"));
                }
                Err(HostError::RespondToModel(message))
            }
        }
    }

    /// Several nested runs, `--max-parallel` at a time; each answer or error object.
    async fn sub_rlm_parallel(&self, jobs: Vec<SubRlmArgs>) -> Result<HostReply, HostError> {
        let answers = fan_out::in_order(
            jobs,
            self.settings.delegation.max_parallel,
            |args| async move { self.sub_rlm(&args).await },
        )
        .await;
        answers_in_order(answers.into_iter().map(|answer| answer.map(Value::String)))
    }

    /// Several agents, `--max-parallel` at a time; each answer or error object.
    async fn spawn_agents(&self, jobs: Vec<AgentJob>) -> Result<HostReply, HostError> {
        let answers = fan_out::in_order(
            jobs,
            self.settings.delegation.max_parallel,
            |job| async move { self.spawn_agent(&job).await },
        )
        .await;
        answers_in_order(answers)
    }

    async fn store_set(&self, key: String, value: Value) -> Result<HostReply, HostError> {
        let scope = self.scope();
        let reference = self
            .blocking(move |store| store.set(&key, value, SetOptions::default().scope(scope)))
            .await?;
        to_json(reference)
    }

    async fn store_set_ref(&self, key: String, from: String) -> Result<HostReply, HostError> {
        let scope = self.scope();
        let reference = self
            .blocking(move |store| {
                let Some(file) = store.unchanged_file_reference(&from)? else {
                    return Err(rlm_context_store::StoreError::NotFound {
                        key: format!("{from} (as a file variable)"),
                    });
                };
                store
                    .set_file_reference(&key, &file.path, SetOptions::default().scope(scope))
                    .map(|(reference, _)| reference)
            })
            .await?;
        to_json(reference)
    }

    async fn store_ref(&self, key: String) -> Result<HostReply, HostError> {
        let (reference, path) = self
            .blocking(move |store| {
                let reference = store.reference(&key)?;
                let path = store.persist_for_sub_agent(&key)?;
                Ok((reference, path))
            })
            .await?;
        let mut value = to_json(reference)?;
        value["path"] = Value::String(path.display().to_string());
        Ok(value)
    }
}

/// What a one-shot `sub_rlm` sends for a variable.
enum OneShotContext {
    /// Its value, to be cut by [`cut_for_one_shot`].
    Whole(std::sync::Arc<Value>),
    /// The start of a referenced file, already cut, with a note naming its size.
    Cut(String),
}

/// `value` as text of at most [`ONE_SHOT_CONTEXT_CHARS`] characters, with a note when
/// it was cut.
fn cut_for_one_shot(value: &Value) -> Value {
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let total = text.chars().count();
    if total <= ONE_SHOT_CONTEXT_CHARS {
        return Value::String(text);
    }
    let cut: String = text.chars().take(ONE_SHOT_CONTEXT_CHARS).collect();
    Value::String(format!(
        "{cut}\n[context truncated: first {ONE_SHOT_CONTEXT_CHARS} of {total} characters]"
    ))
}

/// The context a one-shot `sub_rlm` sends for the variable `key`: its value, or for a
/// `file` variable the start of the file (checked unchanged), so that a large file is
/// never read whole.
fn one_shot_value(
    store: &rlm_context_store::Store,
    key: &str,
) -> Result<OneShotContext, rlm_context_store::StoreError> {
    use std::io::Read;
    let Some(file) = store.unchanged_file_reference(key)? else {
        return store.get(key).map(OneShotContext::Whole);
    };
    let limit = ONE_SHOT_CONTEXT_CHARS as u64 * 4;
    let mut head = Vec::new();
    std::fs::File::open(&file.path)
        .and_then(|f| f.take(limit).read_to_end(&mut head))
        .map_err(|e| rlm_context_store::StoreError::Io {
            action: "read the referenced file",
            path: file.path.clone(),
            source: e,
        })?;
    let text = String::from_utf8_lossy(&head);
    let cut: String = text.chars().take(ONE_SHOT_CONTEXT_CHARS).collect();
    if cut.len() as u64 >= file.size {
        return Ok(OneShotContext::Cut(cut));
    }
    Ok(OneShotContext::Cut(format!(
        "{cut}\n[context truncated: first {ONE_SHOT_CONTEXT_CHARS} characters of the {}-byte file {}]",
        file.size,
        file.path.display()
    )))
}

fn to_json(value: impl serde::Serialize) -> Result<Value, HostError> {
    serde_json::to_value(value)
        .map_err(|e| HostError::Fatal(format!("a reply could not be encoded: {e}")))
}

#[async_trait::async_trait]
impl Host for RunHost {
    async fn call(&self, call: HostCall) -> Result<HostReply, HostError> {
        match call {
            HostCall::LlmQuery(args) => self.llm_query(&args, CallPurpose::LlmQuery).await,
            HostCall::LlmQueryParallel { prompts } => self.llm_query_parallel(prompts).await,
            HostCall::Summarize { text, max_tokens } => {
                // A summary of a text too long for one call is a summary of its
                // pieces' summaries.
                let prompt = PromptArgs {
                    prompt: format!("Summarize the following in at most {max_tokens} tokens. Keep names, numbers and anything unusual."),
                    context: Some(text),
                    split: true,
                    schema: None,
                };
                self.query_text(&prompt, CallPurpose::Summarize, None)
                    .await
                    .map(Value::String)
            }
            HostCall::SubRlm(args) => self.sub_rlm(&args).await.map(Value::String),
            HostCall::SubRlmParallel { jobs } => self.sub_rlm_parallel(jobs).await,
            HostCall::SpawnAgent(job) => self.spawn_agent(&job).await,
            HostCall::SpawnAgents { jobs } => self.spawn_agents(jobs).await,
            HostCall::RunPlan(args) => self.run_plan(args).await,
            HostCall::PlanSplit(args) => self.plan_split(args).await,
            HostCall::PlanFilter { pieces, filter } => self.plan_filter(pieces, filter).await,
            HostCall::PlanMap { pieces, map } => self.plan_map(pieces, map).await,
            HostCall::PlanReduce { results, reduce } => self.plan_reduce(results, reduce).await,
            HostCall::StoreSet { key, value } => self.store_set(key, value).await,
            HostCall::StoreSetRef { key, from } => self.store_set_ref(key, from).await,
            HostCall::StoreGet { key } => {
                let value = self.blocking(move |store| store.get(&key)).await?;
                Ok(serde_json::Value::clone(&value))
            }
            HostCall::StoreRef { key } => self.store_ref(key).await,
            HostCall::StoreList {} => {
                let list = self
                    .blocking(|store| Ok(store.list(&ListFilter::default())))
                    .await?;
                to_json(list)
            }
            HostCall::StoreDelete { key } => self
                .blocking(move |store| store.delete(&key))
                .await
                .map(|()| Value::Null),
        }
    }
}

/// The reply of a parallel helper: each answer in order, a failure the model can act on
/// as its [`SubResult::Error`] object in that place; a fatal failure fails the call.
fn answers_in_order(
    answers: impl IntoIterator<Item = Result<Value, HostError>>,
) -> Result<HostReply, HostError> {
    answers
        .into_iter()
        .map(|answer| match answer {
            Ok(value) => Ok(value),
            Err(HostError::RespondToModel(error)) => Ok(SubResult::error(error).to_value()),
            Err(fatal @ HostError::Fatal(_)) => Err(fatal),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}

//! The `js` environment: JavaScript in an embedded QuickJS engine, confined by
//! construction.
//!
//! The engine runs in the orchestrator's process, on a thread of its own
//! (`engine`), with nothing but what rlm gives it: the context, the task, `history`
//! and the helpers of every environment (`peek`, `search`, `find_relevant`,
//! `llm_query`, `sub_rlm`, `spawn_agent(s)`, `store.*`, `SHOW_VARS`, `FINAL_VAR`,
//! `SUBMIT`), written in JavaScript (`prelude/*.js`) over one host bridge. There is no
//! file system, network, process or module access: no `require`, `fetch`, `process`,
//! `std`/`os` modules, and `import()` rejects. Helpers that need the orchestrator return
//! Promises; cells may use top-level `await`.
//!
//! Guards, each ending the step with an error the model sees while the run goes on:
//! `--exec-timeout` (an interrupt handler stops running code; calls it awaits are
//! cancelled), `--js-memory-mb` (default: 4× the context, at least 1 GiB), and a stack
//! limit. A runtime that cannot recover from running out of memory is replaced and the
//! model is told its variables are gone, as with a restarted Python kernel.
//!
//! Cells have notebook semantics (`cell`): top-level `let`/`const`/`class` become
//! redeclarable globals, so `FINAL_VAR`, `SHOW_VARS` and the next step see them.

mod cell;
mod engine;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use engine::EngineInfo;

use self::engine::{EngineError, EngineHandle, ExecReply, Request};
use rlm_env::CHUNK_CHARS;
use rlm_env::{system_prompt, EnvGuide, PromptFeatures};
use rlm_env::{
    CodeRepl, ContextSource, EnvConfig, EnvError, EnvKind, Environment, EnvironmentFactory,
    ExecOutcome, HistoryEntry, ReplVariable, Started,
};
use rlm_env::{Host, Kernel, KernelSeed, Restartable};

/// Fence tags whose code runs here besides `repl`.
const FENCE_TAGS: &[&str] = &["js", "javascript"];

/// The reductions over records, with an example a format of its own each (JSON lines,
/// an access log), worded as no particular task is.
const RECORDS: &str = r#" Over records (one a line), a reduction also groups and ranks with no model: map {extract: '^.*$'} keeps each line whole, then reduce {op: 'group_by', key: '"host": "([^"]+)"', value: '"ms": (\\d+)', agg: 'max'} gives each host's slowest call over JSON lines (agg: count, sum, min or max; the patterns' first groups are the key and the number; k: 3 keeps the three largest), {op: 'argmax', value: '(\\d+)ms'} the line of an access log's slowest request, and {op: 'count_distinct'} after map {extract: '"host": "([^"]+)"'} how many distinct hosts; await ctx_reduce(results, {op: 'group_by', key, value, agg}) is the same step. A reduction that cannot read its records says which pattern matched nothing or which values are not numbers."#;

/// What the system prompt says about the JavaScript REPL and its helpers.
pub fn guide(features: PromptFeatures) -> EnvGuide {
    let chars = features.sub_context_chars;
    let mut delegate = format!(
        "await llm_query(prompt, piece) asks a sub-model about a piece of at most about {chars} characters (longer is refused; await llm_query(prompt, text, {{split: true}}) splits it for you and combines the answers); await llm_query_parallel([...]) asks about many pieces at once; await sub_rlm(query, piece) runs a nested RLM over a large piece and await sub_rlm_parallel([[query, piece], ...]) runs several at once"
    );
    if features.agents {
        delegate.push_str(
            "; await spawn_agent(task, [keys]) runs the external agent on stored variables",
        );
    }
    delegate.push_str(". For counts, sums and lists over the whole context, await map_reduce(plan) runs a whole plan for you — cut into pieces, each asked or counted, the results reduced — priced first and refused with the figures if over budget, e.g. await map_reduce({split: {by: 'chars', size: 20000}, map: {ask: 'How many failed payments are listed? Answer with a number.'}, reduce: {op: 'sum'}}); map {count: 'ERROR'} or {extract: 'id=(\\d+)'} needs no model; reduce ops: sum, count, min, max, concat, vote, union, top_k, join. The same step by step, each step a stored variable the next takes: const pieces = await ctx_split('context', {by: 'lines', size: 500}); const results = await ctx_map(pieces, {count: 'ERROR'}); const total = await ctx_reduce(results, {op: 'sum'}) (await ctx_filter(pieces, {regex: ...}) keeps some pieces).");
    delegate.push_str(RECORDS);
    let mut helpers = vec![
        format!("context, context_chunks (the context in pieces of {CHUNK_CHARS} characters: .length, [i], .slice(a, b), for…of), query, history"),
        "peek(value, start=0, end=10)  search(value, pattern, regex=false, max_results=10)  find_relevant(value, query, top_k=5)".to_owned(),
        "await map_reduce({split, filter, map, reduce})  (map_reduce.last: pieces, kept, calls)".to_owned(),
        "await ctx_split(input, {by, size}) → pieces  await ctx_filter(pieces, {regex}|{where}|{ask}) → pieces  await ctx_map(pieces, {ask[, schema]}|{count}|{extract}|{sub_rlm}) → results  await ctx_reduce(results, {op, k, key, value, agg}) → answer".to_owned(),
        "await summarize(value, max_tokens=500)  await llm_query(prompt, context=null, {split: false, schema: null})  await llm_query_parallel(prompts, {split: false, schema: null})  ({schema: {type: 'integer'}} or any JSON Schema: the answer is that value, not text)  await sub_rlm(query, context=null)  await sub_rlm_parallel(jobs)".to_owned(),
    ];
    if features.agents {
        helpers.push(
            "await spawn_agent(task, refs=null)  await spawn_agents([[task, refs], ...])"
                .to_owned(),
        );
    }
    helpers.push("await store.set(key, value)  await store.get(key)  await store.ref(key)  await store.list()  await store.delete(key)".to_owned());
    helpers.push("console.log(...)  SHOW_VARS()  FINAL_VAR(name)  SUBMIT(obj)".to_owned());
    EnvGuide {
        language: "JavaScript",
        how_code_runs: "Every block runs in the same persistent REPL (an engine with no file system or network) and you then see what console.log printed and the value of the block's last expression. Top-level const, let, function and class persist to the next block and may be declared again. Helpers that call the orchestrator return Promises: await them (top-level await works) and run several at once with Promise.all.".to_owned(),
        delegate,
        store_note:
            "await store.set(key, value) stores one where sub-agents can read it by reference."
                .to_owned(),
        helpers,
    }
}

/// Default for [`JsOptions::output_cap_bytes`].
pub const OUTPUT_CAP_BYTES: usize = 1 << 20;
/// The smallest default memory limit.
pub const MIN_MEMORY_BYTES: u64 = 1 << 30;
/// The default memory limit is this many times the context's size (or the minimum).
pub const MEMORY_PER_CONTEXT_BYTE: u64 = 4;
/// Default for [`JsOptions::js_stack_bytes`].
pub const JS_STACK_BYTES: usize = 4 << 20;
/// Default for [`JsOptions::thread_stack_bytes`].
pub const THREAD_STACK_BYTES: usize = 16 << 20;
/// How long a cancelled execution is given to stop before the engine is replaced.
const SETTLE_GRACE: Duration = Duration::from_secs(2);

/// How the engine is run.
#[derive(Debug, Clone)]
pub struct JsOptions {
    /// `--js-memory-mb`, in bytes; `None`: 4× the context's size, at least 1 GiB.
    pub memory_limit_bytes: Option<u64>,
    /// Bytes kept of each of stdout and stderr (console.log/error) per execution.
    pub output_cap_bytes: usize,
    /// JavaScript stack limit (deeper recursion is a `RangeError`).
    pub js_stack_bytes: usize,
    /// Stack of the engine's thread (must exceed `js_stack_bytes`).
    pub thread_stack_bytes: usize,
}

impl Default for JsOptions {
    fn default() -> Self {
        Self {
            memory_limit_bytes: None,
            output_cap_bytes: OUTPUT_CAP_BYTES,
            js_stack_bytes: JS_STACK_BYTES,
            thread_stack_bytes: THREAD_STACK_BYTES,
        }
    }
}

impl JsOptions {
    /// The memory limit for a context of `context_bytes`.
    pub fn memory_limit_bytes(&self, context_bytes: u64) -> u64 {
        self.memory_limit_bytes.unwrap_or_else(|| {
            context_bytes
                .saturating_mul(MEMORY_PER_CONTEXT_BYTE)
                .max(MIN_MEMORY_BYTES)
        })
    }
}

/// Starts [`JsEnv`]s with fixed [`JsOptions`].
#[derive(Debug, Clone, Default)]
pub struct JsFactory {
    options: JsOptions,
}

impl JsFactory {
    /// A factory of engines run with `options`.
    pub fn new(options: JsOptions) -> Self {
        Self { options }
    }
}

#[async_trait::async_trait]
impl EnvironmentFactory for JsFactory {
    fn kind(&self) -> EnvKind {
        EnvKind::Js
    }

    async fn start(&self, config: EnvConfig, host: Arc<dyn Host>) -> Result<Started, EnvError> {
        let env = JsEnv::start(config, host, self.options.clone()).await?;
        Ok(Started::Code(Box::new(env)))
    }
}

/// A persistent JavaScript REPL (see the module docs).
pub struct JsEnv {
    engine: Restartable<Engine>,
    /// The id of the last execution sent.
    last_exec: u64,
}

/// One engine thread, and the execution whose caller went away before its result (a
/// cancelled query), with its id.
struct Engine {
    handle: EngineHandle,
    running: Option<(u64, tokio::sync::oneshot::Receiver<ExecReply>)>,
}

#[async_trait::async_trait]
impl Kernel for Engine {
    type Options = JsOptions;
    type Error = EngineError;

    const KIND: EnvKind = EnvKind::Js;

    fn command(_: &JsOptions) -> String {
        "the embedded QuickJS engine".to_owned()
    }

    fn spawn(seed: &KernelSeed<JsOptions>) -> Result<Self, EngineError> {
        let handle = EngineHandle::spawn(
            &seed.config,
            &seed.history,
            &seed.more_contexts,
            &seed.options,
            Arc::clone(&seed.host),
        )?;
        Ok(Self {
            handle,
            running: None,
        })
    }

    fn has_died(&mut self) -> bool {
        self.handle.has_died()
    }

    async fn wait_ready(&mut self) -> Result<(), EngineError> {
        self.handle.wait_ready().await.map(|_| ())
    }

    /// The abandoned execution is cancelled and awaited for a grace period.
    async fn settle(&mut self) -> bool {
        let Some((id, running)) = self.running.take() else {
            return true;
        };
        self.handle.control.cancel(id);
        match tokio::time::timeout(SETTLE_GRACE, running).await {
            Ok(Ok(reply)) if !reply.broken => true,
            Ok(Ok(_)) | Ok(Err(_)) | Err(_) => {
                tracing::warn!(
                    "the JavaScript engine did not stop the cancelled code; replacing it"
                );
                false
            }
        }
    }
}

impl JsEnv {
    /// Starts the engine thread and returns without waiting for it to load `context`;
    /// the first request waits. Must be called within a tokio runtime: host calls run
    /// on it.
    pub async fn start(
        config: EnvConfig,
        host: Arc<dyn Host>,
        options: JsOptions,
    ) -> Result<Self, EnvError> {
        let engine = Restartable::start(KernelSeed {
            history: config.history.clone(),
            config,
            more_contexts: Vec::new(),
            options,
            host,
        })?;
        Ok(Self {
            engine,
            last_exec: 0,
        })
    }

    /// Waits until the engine has loaded `context` and reports what it said.
    pub async fn wait_ready(&mut self) -> Result<EngineInfo, EnvError> {
        self.ensure_ready().await?;
        self.engine
            .kernel()
            .and_then(|e| e.handle.info.clone())
            .ok_or_else(|| self.engine.broken("the engine is not running"))
    }

    /// How many times the engine was replaced.
    pub fn restarts(&self) -> u32 {
        self.engine.restarts()
    }

    /// Makes sure a live, ready engine exists. Returns whether the model still has to
    /// be told that its variables were lost.
    async fn ensure_ready(&mut self) -> Result<bool, EnvError> {
        let first = !self.engine.ever_ready();
        self.engine.ensure_ready().await?;
        if first {
            if let Some(info) = self.engine.kernel().and_then(|e| e.handle.info.as_ref()) {
                tracing::debug!(
                    load_seconds = info.load_seconds,
                    memory_limit_bytes = info.memory_limit_bytes,
                    "the JavaScript engine is ready"
                );
            }
        }
        Ok(self.engine.take_lost_state())
    }

    /// Sends a request to a ready engine and waits for its reply; `None` when the
    /// engine is gone (it is then replaced before the next request).
    async fn ask<T>(
        &mut self,
        build: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> Request,
    ) -> Option<T> {
        let engine = self.engine.live().await?;
        let (reply, receiver) = tokio::sync::oneshot::channel();
        engine.handle.requests.send(build(reply)).ok()?;
        receiver.await.ok()
    }
}

#[async_trait::async_trait]
impl Environment for JsEnv {
    fn kind(&self) -> EnvKind {
        EnvKind::Js
    }

    fn system_prompt(&self, features: PromptFeatures) -> String {
        system_prompt(&guide(features))
    }

    async fn push_history(&mut self, entry: HistoryEntry) -> Result<(), EnvError> {
        self.engine.seed_mut().history.push(entry.clone());
        // An engine started later gets the whole history when it starts.
        let _ = self
            .ask(|reply| Request::PushHistory { entry, reply })
            .await;
        Ok(())
    }

    async fn next_query(
        &mut self,
        query: &str,
        context: Option<ContextSource>,
    ) -> Result<(), EnvError> {
        let start = self.engine.begin_query(query, context.clone());
        let owed = match self.ensure_ready().await {
            Ok(owed) => owed,
            Err(error) => {
                self.engine.undo_query(&start);
                return Err(error);
            }
        };
        if owed {
            self.engine.owe_lost_state();
        }
        if self.engine.restarted_since(&start) {
            return Ok(()); // the new engine got the query and every slot when it started
        }
        let query = query.to_owned();
        match self
            .ask(|reply| Request::NextQuery {
                query,
                context,
                reply,
            })
            .await
        {
            Some(Ok(())) => Ok(()),
            Some(Err(error)) => Err(self.engine.refused(&start, error.to_string())),
            None => self.engine.replace(),
        }
    }

    async fn recover(&mut self) -> Result<(), EnvError> {
        self.engine.settle().await
    }

    async fn shutdown(&mut self) {
        self.engine.take();
    }
}

#[async_trait::async_trait]
impl CodeRepl for JsEnv {
    fn fence_tags(&self) -> &'static [&'static str] {
        FENCE_TAGS
    }

    async fn execute(&mut self, code: &str) -> Result<ExecOutcome, EnvError> {
        let started = Instant::now();
        let restarted = self.ensure_ready().await?;
        let timeout = self.engine.seed().config.exec_timeout;
        let Some(engine) = self.engine.kernel_mut() else {
            return Err(self.engine.broken("the engine is not running"));
        };
        let (reply, receiver) = tokio::sync::oneshot::channel();
        self.last_exec += 1;
        let id = self.last_exec;
        let sent = engine.handle.requests.send(Request::Exec {
            id,
            code: code.to_owned(),
            timeout,
            reply,
        });
        if sent.is_err() {
            self.engine.replace()?;
            return Ok(ExecOutcome {
                error: Some("The JavaScript engine had stopped; it has been restarted and every variable you defined is lost.".to_owned()),
                restarted: true,
                duration: started.elapsed(),
                ..ExecOutcome::default()
            });
        }
        // Still set if this future is dropped while waiting: settled before the next
        // request.
        engine.running = Some((id, receiver));
        let reply = match engine.running.as_mut() {
            Some((_, receiver)) => receiver.await,
            None => return Err(self.engine.broken("the execution was lost")),
        };
        engine.running = None;
        let reply = match reply {
            Ok(reply) => reply,
            Err(_) => {
                // The engine thread ended in the middle of the execution.
                self.engine.replace()?;
                return Ok(ExecOutcome {
                    error: Some("The JavaScript engine stopped while running this code; it has been restarted and every variable you defined is lost (`context` and the helpers are loaded again).".to_owned()),
                    duration: started.elapsed(),
                    ..ExecOutcome::default()
                });
            }
        };
        if let Some(message) = reply.fatal {
            return Err(EnvError::HostFatal {
                env: EnvKind::Js,
                message,
            });
        }
        if reply.broken {
            self.engine.replace()?;
            // Told now, through the error; not again at the next execution.
            self.engine.take_lost_state();
        }
        Ok(ExecOutcome {
            stdout: reply.stdout,
            stderr: reply.stderr,
            error: reply.error,
            final_answer: reply.final_answer,
            timed_out: reply.timed_out,
            restarted: restarted || reply.broken,
            duration: started.elapsed(),
        })
    }

    async fn final_var(&mut self, name: &str) -> Result<Option<String>, EnvError> {
        let name = name.to_owned();
        Ok(self
            .ask(|reply| Request::FinalVar { name, reply })
            .await
            .flatten())
    }

    async fn variables(&mut self) -> Result<Vec<ReplVariable>, EnvError> {
        Ok(self
            .ask(|reply| Request::Variables { reply })
            .await
            .unwrap_or_default())
    }
}

#[cfg(test)]
mod guide_tests {
    use super::*;

    /// The system prompt of the JavaScript REPL, whole: a change is a reviewed snapshot.
    #[test]
    fn the_system_prompt_keeps_its_text() {
        let features = PromptFeatures {
            agents: true,
            sub_context_chars: 20_000,
            text_tool_protocol: false,
            constrained_calls: false,
        };
        insta::assert_snapshot!(system_prompt(&guide(features)));
    }
}

//! The engine thread: one QuickJS runtime, owned by one OS thread for its whole life.
//!
//! QuickJS values are not `Send`, so the runtime lives on a thread of its own running a
//! current-thread tokio runtime; [`super::JsEnv`] talks to it with [`Request`]s over a
//! channel. Host calls from JavaScript (`__rlm_host`) are spawned onto the
//! orchestrator's runtime through a [`Handle`] — that is where providers, the store and
//! sub-agents live — and their Promises resolve when the tasks finish, so calls made
//! together (`Promise.all`, `llm_query_parallel`) really run at once.
//!
//! Guards: a memory limit and a stack limit on the runtime, and an interrupt handler
//! that stops running JavaScript once the execution's deadline passes or the execution
//! is cancelled. An execution waiting on host calls past its deadline is abandoned: its
//! calls are aborted and its continuation never resumes (its generation is over).

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rquickjs::context::EvalOptions;
use rquickjs::function::{Async, Func};
use rquickjs::{
    AsyncContext, AsyncRuntime, CatchResultExt, CaughtError, Ctx, Function, Promise, Value,
};
use serde::Deserialize;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::AbortHandle;

use super::cell::notebook_cell;
use super::JsOptions;
use rlm_env::{ContextShape, ContextSource, EnvConfig, FinalAnswer, HistoryEntry, ReplVariable};
use rlm_env::{Host, HostCall, HostError};

/// The prelude, split by purpose, run in order when a runtime starts.
const PRELUDE: [(&str, &str); 3] = [
    ("<rlm-core>", include_str!("prelude/core.js")),
    ("<rlm-explore>", include_str!("prelude/explore.js")),
    ("<rlm-helpers>", include_str!("prelude/helpers.js")),
];

/// Lines of a stack trace kept in an error the model sees.
const STACK_LINES: usize = 12;

/// Characters of an echoed string value.
const ECHO_CHARS: usize = 20_000;

/// What the engine is asked to do.
pub(super) enum Request {
    /// Run a cell; `id` grows with each execution ([`Control::cancel`]).
    Exec {
        id: u64,
        code: String,
        timeout: Duration,
        reply: oneshot::Sender<ExecReply>,
    },
    /// The rendered value of a global, for `FINAL_VAR(name)` written outside code.
    FinalVar {
        name: String,
        reply: oneshot::Sender<Option<String>>,
    },
    /// The model's variables.
    Variables {
        reply: oneshot::Sender<Vec<ReplVariable>>,
    },
    /// Append to `history`.
    PushHistory {
        entry: HistoryEntry,
        reply: oneshot::Sender<()>,
    },
    /// The next query of a session, maybe with a new context slot.
    NextQuery {
        query: String,
        context: Option<ContextSource>,
        reply: oneshot::Sender<Result<(), String>>,
    },
}

/// How a cell ran.
#[derive(Debug, Default)]
pub(super) struct ExecReply {
    pub stdout: String,
    pub stderr: String,
    pub error: Option<String>,
    pub final_answer: Option<FinalAnswer>,
    pub timed_out: bool,
    /// A host call failed fatally: the run must end.
    pub fatal: Option<String>,
    /// The runtime cannot be trusted any more (it failed a health check after an
    /// out-of-memory error): it must be rebuilt.
    pub broken: bool,
}

/// What the engine reports once it has loaded `context`.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineInfo {
    /// Seconds spent loading the context slots.
    pub load_seconds: f64,
    /// The runtime's memory limit, in bytes.
    pub memory_limit_bytes: u64,
}

/// Shared between [`super::JsEnv`] and the engine: the deadline the interrupt handler
/// checks, and cancellation of executions by id (ids grow with each execution, so a
/// cancellation sent before its execution started still applies to it, and never to a
/// later one).
#[derive(Debug)]
pub(super) struct Control {
    started: Instant,
    /// Milliseconds after `started` when running JavaScript is interrupted
    /// (`u64::MAX`: never).
    deadline_ms: AtomicU64,
    /// The id of the execution running (0: none).
    current: AtomicU64,
    /// Every execution with an id up to this one is cancelled.
    cancelled_upto: AtomicU64,
    cancel: Notify,
}

impl Control {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            deadline_ms: AtomicU64::new(u64::MAX),
            current: AtomicU64::new(0),
            cancelled_upto: AtomicU64::new(0),
            cancel: Notify::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn arm(&self, id: u64, timeout: Duration) {
        let limit = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self.current.store(id, Ordering::SeqCst);
        self.deadline_ms
            .store(self.now_ms().saturating_add(limit), Ordering::SeqCst);
    }

    fn disarm(&self) {
        self.deadline_ms.store(u64::MAX, Ordering::SeqCst);
        self.current.store(0, Ordering::SeqCst);
    }

    fn is_cancelled(&self, id: u64) -> bool {
        id != 0 && self.cancelled_upto.load(Ordering::SeqCst) >= id
    }

    fn should_interrupt(&self) -> bool {
        self.is_cancelled(self.current.load(Ordering::Relaxed))
            || self.now_ms() >= self.deadline_ms.load(Ordering::Relaxed)
    }

    fn timed_out(&self) -> bool {
        self.now_ms() >= self.deadline_ms.load(Ordering::SeqCst)
    }

    /// Waits until execution `id` is cancelled.
    async fn cancelled(&self, id: u64) {
        loop {
            let notified = self.cancel.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_cancelled(id) {
                return;
            }
            notified.await;
        }
    }

    /// Stops execution `id` (and any earlier one) as soon as possible, whether it runs
    /// now or has not started yet.
    pub(super) fn cancel(&self, id: u64) {
        self.cancelled_upto.fetch_max(id, Ordering::SeqCst);
        self.cancel.notify_waiters();
    }
}

/// A running engine thread.
pub(super) struct EngineHandle {
    pub requests: mpsc::UnboundedSender<Request>,
    pub control: Arc<Control>,
    pub ready: Option<oneshot::Receiver<Result<EngineInfo, String>>>,
    pub info: Option<EngineInfo>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EngineHandle {
    /// Starts an engine thread; it loads the context and reports through `ready`.
    pub fn spawn(
        config: &EnvConfig,
        history: &[HistoryEntry],
        more_contexts: &[ContextSource],
        options: &JsOptions,
        host: Arc<dyn Host>,
    ) -> Result<Self, String> {
        let (requests, receiver) = mpsc::unbounded_channel();
        let (ready_tx, ready) = oneshot::channel();
        let control = Arc::new(Control::new());
        let init = Init {
            config: config.clone(),
            history: history.to_vec(),
            more_contexts: more_contexts.to_vec(),
            options: options.clone(),
            host,
            main: Handle::try_current().map_err(|e| {
                format!("the JavaScript engine must be started from a tokio runtime: {e}")
            })?,
            control: Arc::clone(&control),
        };
        let thread = std::thread::Builder::new()
            .name("rlm-js".into())
            .stack_size(options.thread_stack_bytes)
            .spawn(move || engine_thread(init, receiver, ready_tx))
            .map_err(|e| format!("could not start the engine thread: {e}"))?;
        Ok(Self {
            requests,
            control,
            ready: Some(ready),
            info: None,
            thread: Some(thread),
        })
    }

    /// Waits until the engine has loaded `context` (or failed to).
    pub async fn wait_ready(&mut self) -> Result<&EngineInfo, String> {
        if let Some(ready) = self.ready.take() {
            let info = ready
                .await
                .map_err(|_| "the engine thread ended before it was ready".to_owned())??;
            self.info = Some(info);
        }
        self.info
            .as_ref()
            .ok_or_else(|| "the engine is not ready".to_owned())
    }

    /// Whether the engine thread has ended.
    pub fn has_died(&self) -> bool {
        self.requests.is_closed() || self.thread.as_ref().is_none_or(|t| t.is_finished())
    }
}

impl Drop for EngineHandle {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop; a running execution is stopped by
        // the interrupt handler. The thread is not joined: it finishes on its own.
        self.control.cancel(u64::MAX);
        self.thread.take();
    }
}

/// Everything the engine thread starts from.
struct Init {
    config: EnvConfig,
    history: Vec<HistoryEntry>,
    more_contexts: Vec<ContextSource>,
    options: JsOptions,
    host: Arc<dyn Host>,
    main: Handle,
    control: Arc<Control>,
}

fn engine_thread(
    init: Init,
    requests: mpsc::UnboundedReceiver<Request>,
    ready: oneshot::Sender<Result<EngineInfo, String>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = ready.send(Err(format!("could not start the engine's runtime: {e}")));
            return;
        }
    };
    runtime.block_on(async move {
        let mut engine = match Engine::start(init).await {
            Ok(engine) => engine,
            Err(message) => {
                let _ = ready.send(Err(message));
                return;
            }
        };
        let _ = ready.send(Ok(engine.info.clone()));
        engine.serve(requests).await;
    });
}

/// Output of the running execution, capped per stream.
#[derive(Debug, Default)]
struct Capture {
    cap: usize,
    stdout: String,
    stderr: String,
    dropped: usize,
}

impl Capture {
    fn write(&mut self, stream: i32, text: &str) {
        let cap = self.cap;
        let target = if stream == 2 {
            &mut self.stderr
        } else {
            &mut self.stdout
        };
        let room = cap.saturating_sub(target.len());
        if text.len() <= room {
            target.push_str(text);
        } else {
            let mut cut = room;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            target.push_str(&text[..cut]);
            self.dropped += text.len() - cut;
        }
    }

    fn take(&mut self) -> (String, String) {
        let mut stdout = std::mem::take(&mut self.stdout);
        let stderr = std::mem::take(&mut self.stderr);
        if self.dropped > 0 {
            stdout.push_str(&format!(
                "\n[output truncated: {} more bytes were written; the first {} of each stream are kept]",
                self.dropped, self.cap
            ));
            self.dropped = 0;
        }
        (stdout, stderr)
    }
}

/// Host calls of the running execution, and its generation: a call started by an
/// abandoned execution never resolves.
#[derive(Default)]
struct Calls {
    generation: u64,
    next_id: u64,
    in_flight: HashMap<u64, AbortHandle>,
    fatal: Option<String>,
}

struct Engine {
    rt: AsyncRuntime,
    ctx: AsyncContext,
    control: Arc<Control>,
    capture: Rc<RefCell<Capture>>,
    calls: Rc<RefCell<Calls>>,
    slots: usize,
    info: EngineInfo,
    /// Referenced files larger than this would be lazy, which QuickJS cannot do.
    lazy_above: Option<u64>,
}

impl Engine {
    async fn start(init: Init) -> Result<Self, String> {
        let started = Instant::now();
        let rt =
            AsyncRuntime::new().map_err(|e| format!("could not create a QuickJS runtime: {e}"))?;
        let context_bytes: u64 = init
            .config
            .context
            .iter()
            .chain(init.more_contexts.iter())
            .flat_map(|s| s.files.iter().chain(s.referenced.iter()))
            .filter_map(|f| fs::metadata(f).ok())
            .map(|m| m.len())
            .sum();
        let memory_limit = init.options.memory_limit_bytes(context_bytes);
        rt.set_memory_limit(usize::try_from(memory_limit).unwrap_or(usize::MAX))
            .await;
        rt.set_max_stack_size(init.options.js_stack_bytes).await;
        let control = Arc::clone(&init.control);
        rt.set_interrupt_handler(Some(Box::new(move || control.should_interrupt())))
            .await;
        let ctx = AsyncContext::full(&rt)
            .await
            .map_err(|e| format!("could not create a QuickJS context: {e}"))?;
        let capture = Rc::new(RefCell::new(Capture {
            cap: init.options.output_cap_bytes,
            ..Capture::default()
        }));
        let calls = Rc::new(RefCell::new(Calls::default()));
        let bridge = Bridge {
            host: Arc::clone(&init.host),
            main: init.main.clone(),
            calls: Rc::clone(&calls),
        };
        let writer = Rc::clone(&capture);
        ctx.with(|ctx| -> Result<(), String> {
            let globals = ctx.globals();
            let write = Func::from(move |stream: i32, text: String| {
                writer.borrow_mut().write(stream, &text);
            });
            globals
                .set("__rlm_write", write)
                .map_err(|e| e.to_string())?;
            let host = Func::from(Async(move |method: String, args: String| {
                let bridge = bridge.clone();
                async move { Ok::<String, rquickjs::Error>(bridge.call(method, args).await) }
            }));
            globals.set("__rlm_host", host).map_err(|e| e.to_string())?;
            for (name, source) in PRELUDE {
                let mut options = EvalOptions::default();
                options.filename = Some(name.to_owned());
                ctx.eval_with_options::<(), _>(source, options)
                    .catch(&ctx)
                    .map_err(|e| format!("the prelude {name} failed: {e}"))?;
            }
            call0(&ctx, "__rlm_seal")?;
            provide_json(&ctx, "query", &json_text(&init.config.query)?)?;
            provide_json(&ctx, "history", &json_text(&init.history)?)?;
            provide(
                &ctx,
                "contexts",
                rquickjs::Array::new(ctx.clone())
                    .map_err(|e| e.to_string())?
                    .into_value(),
            )?;
            provide(&ctx, "context", Value::new_null(ctx.clone()))?;
            Ok(())
        })
        .await?;
        let mut engine = Self {
            rt,
            ctx,
            control: init.control,
            capture,
            calls,
            slots: 0,
            info: EngineInfo {
                load_seconds: 0.0,
                memory_limit_bytes: memory_limit,
            },
            lazy_above: init.config.lazy_above,
        };
        for source in init.config.context.iter().chain(init.more_contexts.iter()) {
            engine.add_context(source).await?;
        }
        engine.info.load_seconds = started.elapsed().as_secs_f64();
        Ok(engine)
    }

    async fn serve(&mut self, mut requests: mpsc::UnboundedReceiver<Request>) {
        while let Some(request) = requests.recv().await {
            match request {
                Request::Exec {
                    id,
                    code,
                    timeout,
                    reply,
                } => {
                    let outcome = self.exec(id, code, timeout).await;
                    let broken = outcome.broken;
                    let _ = reply.send(outcome);
                    if broken {
                        return; // the handle sees the thread end and starts a new engine
                    }
                }
                Request::FinalVar { name, reply } => {
                    let _ = reply.send(self.final_var(&name).await);
                }
                Request::Variables { reply } => {
                    let _ = reply.send(self.variables().await);
                }
                Request::PushHistory { entry, reply } => {
                    self.push_history(&entry).await;
                    let _ = reply.send(());
                }
                Request::NextQuery {
                    query,
                    context,
                    reply,
                } => {
                    let _ = reply.send(self.next_query(query, context).await);
                }
            }
        }
    }

    /// Loads a context into the next slot: `contexts[i]`, `context_<i>`, `context` and
    /// `context_chunks`.
    async fn add_context(&mut self, source: &ContextSource) -> Result<(), String> {
        let mut values = Vec::with_capacity(source.files.len());
        for file in &source.files {
            values.push(read_value(file, self.lazy_above)?);
        }
        let slot = self.slots;
        let chunk_chars = source.chunk_chars;
        let shape = source.shape;
        self.ctx
            .with(move |ctx| -> Result<(), String> {
                let parse = |raw: Vec<u8>| {
                    ctx.json_parse(raw)
                        .catch(&ctx)
                        .map_err(|e| format!("could not load the context: {e}"))
                };
                let value = match shape {
                    ContextShape::Single => match values.into_iter().next() {
                        Some(raw) => parse(raw)?,
                        None => Value::new_null(ctx.clone()),
                    },
                    ContextShape::List => {
                        let list = rquickjs::Array::new(ctx.clone()).map_err(|e| e.to_string())?;
                        for (i, raw) in values.into_iter().enumerate() {
                            list.set(i, parse(raw)?).map_err(|e| e.to_string())?;
                        }
                        list.into_value()
                    }
                };
                let contexts: rquickjs::Array =
                    ctx.globals().get("contexts").map_err(|e| e.to_string())?;
                contexts
                    .set(slot, value.clone())
                    .map_err(|e| e.to_string())?;
                provide(&ctx, &format!("context_{slot}"), value.clone())?;
                provide(&ctx, "context", value.clone())?;
                let chunks: rquickjs::Constructor = ctx
                    .globals()
                    .get("__RLM_Chunks")
                    .map_err(|e| e.to_string())?;
                let view: Value = chunks
                    .construct((value, chunk_chars))
                    .catch(&ctx)
                    .map_err(|e| e.to_string())?;
                provide(&ctx, "context_chunks", view)
            })
            .await?;
        self.slots += 1;
        Ok(())
    }

    async fn next_query(
        &mut self,
        query: String,
        context: Option<ContextSource>,
    ) -> Result<(), String> {
        self.ctx
            .with(|ctx| provide_json(&ctx, "query", &json_text(&query)?))
            .await?;
        match context {
            Some(source) => self.add_context(&source).await,
            None => Ok(()),
        }
    }

    async fn push_history(&mut self, entry: &HistoryEntry) {
        let entry = serde_json::to_string(entry).unwrap_or_default();
        let pushed = self
            .ctx
            .with(|ctx| -> Result<(), String> {
                let history: Value = ctx.globals().get("history").map_err(|e| e.to_string())?;
                let value = ctx
                    .json_parse(entry)
                    .catch(&ctx)
                    .map_err(|e| e.to_string())?;
                if let Some(list) = history.as_array() {
                    list.set(list.len(), value).map_err(|e| e.to_string())?;
                }
                Ok(())
            })
            .await;
        if let Err(error) = pushed {
            tracing::warn!(%error, "could not add to the JavaScript `history`");
        }
    }

    async fn exec(&mut self, id: u64, code: String, timeout: Duration) -> ExecReply {
        let cell = notebook_cell(&code);
        let filename = format!("<cell {id}>");
        self.calls.borrow_mut().fatal = None;
        self.control.arm(id, timeout);
        let control = Arc::clone(&self.control);
        let run = self
            .ctx
            .async_with(async move |ctx| run_cell(&ctx, cell, filename).await);
        let outcome = tokio::select! {
            outcome = run => Some(outcome),
            () = tokio::time::sleep(timeout) => None,
            () = control.cancelled(id) => None,
        };
        let timed_out = self.control.timed_out();
        let cancelled = self.control.is_cancelled(id);
        self.control.disarm();
        if outcome.is_none() {
            self.abandon_calls();
        }
        let (stdout, stderr) = self.capture.borrow_mut().take();
        let fatal = self.calls.borrow_mut().fatal.take();
        let mut reply = ExecReply {
            stdout,
            stderr,
            timed_out: timed_out && !cancelled,
            fatal,
            ..ExecReply::default()
        };
        match outcome {
            Some(CellOutcome { echo, error }) => {
                if let Some(echo) = echo {
                    reply.stdout.push_str(&echo);
                    reply.stdout.push('\n');
                }
                if let Some(error) = &error {
                    if error.contains("out of memory") && !self.healthy().await {
                        reply.broken = true;
                    }
                }
                reply.error = error;
            }
            None => {
                reply.error = Some(if cancelled {
                    "the execution was cancelled".to_owned()
                } else {
                    "the execution was stopped at the timeout while it waited for host calls (llm_query, sub_rlm, …); they were cancelled".to_owned()
                });
            }
        }
        reply.final_answer = self.take_final().await;
        if reply.broken {
            reply.error = Some(format!(
                "{}\nThe JavaScript runtime ran out of memory and could not recover.",
                reply.error.unwrap_or_default()
            ));
        }
        reply
    }

    /// Ends every host call of the abandoned execution and starts a new generation, so
    /// that its continuation (waiting on those calls) never runs.
    fn abandon_calls(&self) {
        let mut calls = self.calls.borrow_mut();
        calls.generation += 1;
        for (_, handle) in calls.in_flight.drain() {
            handle.abort();
        }
    }

    /// After an out-of-memory error: whether the runtime still evaluates code.
    async fn healthy(&self) -> bool {
        self.rt.run_gc().await;
        self.ctx
            .with(|ctx| ctx.eval::<i32, _>("1 + 1").is_ok_and(|two| two == 2))
            .await
    }

    async fn take_final(&self) -> Option<FinalAnswer> {
        let text = self
            .ctx
            .with(|ctx| -> Option<String> {
                let globals = ctx.globals();
                let value: Value = globals.get("__rlm_final").ok()?;
                if value.is_null() || value.is_undefined() {
                    return None;
                }
                globals
                    .set("__rlm_final", Value::new_null(ctx.clone()))
                    .ok()?;
                let json: Function = globals.get("__rlm_json").ok()?;
                json.call::<_, String>((value,)).ok()
            })
            .await?;
        serde_json::from_str(&text).ok()
    }

    async fn final_var(&self, name: &str) -> Option<String> {
        let name = name
            .trim()
            .trim_matches(|c| c == '"' || c == '\'')
            .to_owned();
        if name.starts_with("__rlm") || name.is_empty() {
            return None;
        }
        self.ctx
            .with(move |ctx| -> Option<String> {
                let globals = ctx.globals();
                if !globals.contains_key(name.as_str()).ok()? {
                    return None;
                }
                let value: Value = globals.get(name.as_str()).ok()?;
                let render: Function = globals.get("__rlm_render").ok()?;
                render.call::<_, String>((value,)).ok()
            })
            .await
    }

    async fn variables(&self) -> Vec<ReplVariable> {
        let text = self
            .ctx
            .with(|ctx| -> Option<String> {
                let list: Function = ctx.globals().get("__rlm_user_variables").ok()?;
                let value: Value = list.call(()).ok()?;
                let json: Function = ctx.globals().get("__rlm_json").ok()?;
                json.call::<_, String>((value,)).ok()
            })
            .await;
        text.and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }
}

/// What one cell left: the echo of its last expression and its error.
struct CellOutcome {
    echo: Option<String>,
    error: Option<String>,
}

async fn run_cell(ctx: &Ctx<'_>, cell: String, filename: String) -> CellOutcome {
    let mut options = EvalOptions::default();
    options.promise = true;
    options.filename = Some(filename);
    let promise: Promise = match ctx.eval_with_options(cell, options).catch(ctx) {
        Ok(promise) => promise,
        Err(error) => {
            return CellOutcome {
                echo: None,
                error: Some(describe(error)),
            }
        }
    };
    match promise.into_future::<Value>().await.catch(ctx) {
        Ok(completion) => CellOutcome {
            echo: echo_of(ctx, completion),
            error: None,
        },
        Err(error) => CellOutcome {
            echo: None,
            error: Some(describe(error)),
        },
    }
}

/// The REPL echo of a cell's completion value (`{value}` in QuickJS's async eval):
/// nothing for `undefined`, strings quoted, anything else as JSON.
fn echo_of<'js>(ctx: &Ctx<'js>, completion: Value<'js>) -> Option<String> {
    let value: Value = completion.as_object()?.get("value").ok()?;
    if value.is_undefined() {
        return None;
    }
    if let Some(text) = value.as_string().and_then(|s| s.to_string().ok()) {
        let shown: String = text.chars().take(ECHO_CHARS).collect();
        let quoted = serde_json::to_string(&shown).unwrap_or(shown);
        let total = text.chars().count();
        return Some(if total > ECHO_CHARS {
            format!("{quoted} … [{total} chars]")
        } else {
            quoted
        });
    }
    let json: Function = ctx.globals().get("__rlm_json").ok()?;
    json.call::<_, String>((value,)).ok()
}

/// An exception as the model reads it: `Name: message` and the top of the stack.
fn describe(error: CaughtError<'_>) -> String {
    let text = match &error {
        CaughtError::Exception(exception) => {
            let message = exception.message().unwrap_or_default();
            let name: String = exception
                .get::<_, String>("name")
                .unwrap_or_else(|_| "Error".to_owned());
            let stack = exception.stack().unwrap_or_default();
            let stack: Vec<&str> = stack.lines().filter(|l| !l.contains("<rlm-")).collect();
            let mut text = format!("{name}: {message}");
            for line in stack.iter().take(STACK_LINES) {
                text.push('\n');
                text.push_str(line);
            }
            if stack.len() > STACK_LINES {
                text.push_str(&format!(
                    "\n    … {} more frames",
                    stack.len() - STACK_LINES
                ));
            }
            text
        }
        CaughtError::Value(value) => {
            let shown = value
                .as_string()
                .and_then(|s| s.to_string().ok())
                .unwrap_or_else(|| format!("{value:?}"));
            format!("Uncaught {shown}")
        }
        CaughtError::Error(error) => error.to_string(),
    };
    text
}

/// The JSON text of a value (fields in declaration order).
fn json_text(value: &impl serde::Serialize) -> Result<String, String> {
    serde_json::to_string(value).map_err(|e| e.to_string())
}

/// Sets a provided global (not listed as the model's) from JSON text.
fn provide_json(ctx: &Ctx<'_>, name: &str, json: &str) -> Result<(), String> {
    let parsed = ctx.json_parse(json).catch(ctx).map_err(|e| e.to_string())?;
    provide(ctx, name, parsed)
}

/// Sets a provided global.
fn provide<'js>(ctx: &Ctx<'js>, name: &str, value: Value<'js>) -> Result<(), String> {
    let provide: Function = ctx
        .globals()
        .get("__rlm_provide")
        .map_err(|e| e.to_string())?;
    provide
        .call::<_, ()>((name, value))
        .catch(ctx)
        .map_err(|e| format!("could not set `{name}`: {e}"))
}

/// Calls a global function without arguments.
fn call0(ctx: &Ctx<'_>, name: &str) -> Result<(), String> {
    let function: Function = ctx.globals().get(name).map_err(|e| e.to_string())?;
    function
        .call::<_, ()>(())
        .catch(ctx)
        .map_err(|e| format!("{name} failed: {e}"))
}

/// The text of a referenced file as a JSON string.
fn read_referenced(
    file: &rlm_context_store::FileRef,
    lazy_above: Option<u64>,
) -> Result<Vec<u8>, String> {
    if lazy_above.is_some_and(|above| file.size > above) {
        return Err(format!(
            "the context {} is {} bytes, above --lazy-above, so it would be read lazily, \
             which the js environment cannot do (QuickJS strings live in its memory): use \
             --env python, whose `context` is then a lazy view of the file, or load it \
             whole with a larger --lazy-above (or --lazy-context never)",
            file.path.display(),
            file.size
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(file.size).unwrap_or(0));
    file.copy_to(&mut bytes).map_err(|e| {
        format!(
            "the context file {} cannot be read: {e}; start the run again to reference it as it is now, or pass --copy-context",
            file.path.display()
        )
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "the context file {} is not valid UTF-8 at byte offset {}; convert it to UTF-8 first",
            file.path.display(),
            e.utf8_error().valid_up_to()
        )
    })?;
    serde_json::to_vec(&text).map_err(|e| format!("could not encode the context: {e}"))
}

/// The `"value"` of a variable file, as the JSON text QuickJS parses. A file in the
/// store's own layout is read from the value's offset (known from its header line) to
/// its closing brace, without parsing it here: QuickJS's `JSON.parse` does that once.
/// Files in another layout are parsed to find the value.
///
/// A `file` variable's value is the text of the file it refers to (checked unchanged),
/// as a JSON string; one that `--lazy-context` would read lazily is refused, naming
/// `--env python`, which can.
fn read_value(path: &Path, lazy_above: Option<u64>) -> Result<Vec<u8>, String> {
    let unreadable =
        |e: std::io::Error| format!("could not read the context {}: {e}", path.display());
    let header = rlm_context_store::format::read_header(path).map_err(|e| {
        format!(
            "the context file {} is not a variable file: {e}",
            path.display()
        )
    })?;
    if header.header.reference.var_type == rlm_context_store::VariableType::File {
        let file = rlm_context_store::file_ref_in_variable_file(path)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{} is not a file variable", path.display()))?;
        return read_referenced(&file, lazy_above);
    }
    if let Some(offset) = header.value_offset {
        let mut file = fs::File::open(path).map_err(unreadable)?;
        file.seek(SeekFrom::Start(offset)).map_err(unreadable)?;
        let mut bytes = Vec::with_capacity(
            usize::try_from(
                file.metadata()
                    .map_err(unreadable)?
                    .len()
                    .saturating_sub(offset),
            )
            .unwrap_or(0),
        );
        file.read_to_end(&mut bytes).map_err(unreadable)?;
        let end = bytes
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .unwrap_or(0);
        if bytes.get(end) == Some(&b'}') {
            bytes.truncate(end);
            return Ok(bytes);
        }
        return Err(format!(
            "the context file {} is cut short (no closing brace); write it again",
            path.display()
        ));
    }
    #[derive(Deserialize)]
    struct ValueOnly<'a> {
        #[serde(borrow)]
        value: &'a serde_json::value::RawValue,
    }
    let mut bytes = fs::read(path).map_err(unreadable)?;
    let (start, len) = {
        let parsed: ValueOnly = serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "the context file {} is not a variable file: {e}",
                path.display()
            )
        })?;
        let raw = parsed.value.get().as_bytes();
        (raw.as_ptr() as usize - bytes.as_ptr() as usize, raw.len())
    };
    bytes.truncate(start + len);
    bytes.drain(..start);
    Ok(bytes)
}

/// Serves `__rlm_host(method, argsJson)`: the call runs on the orchestrator's runtime;
/// the reply is `{"ok": true, "value": …}` or `{"ok": false, "error": …}`.
#[derive(Clone)]
struct Bridge {
    host: Arc<dyn Host>,
    main: Handle,
    calls: Rc<RefCell<Calls>>,
}

impl Bridge {
    async fn call(&self, method: String, args: String) -> String {
        let args = match serde_json::from_str(&args) {
            Ok(args) => args,
            Err(e) => {
                return reply(Err(HostError::RespondToModel(format!(
                    "invalid call of {method}: {e}"
                ))))
            }
        };
        let call = match HostCall::parse(&method, args) {
            Ok(call) => call,
            Err(error) => return reply(Err(error)),
        };
        let host = Arc::clone(&self.host);
        let task = self.main.spawn(async move { host.call(call).await });
        let (generation, id) = {
            let mut calls = self.calls.borrow_mut();
            calls.next_id += 1;
            let id = calls.next_id;
            calls.in_flight.insert(id, task.abort_handle());
            (calls.generation, id)
        };
        let outcome = match task.await {
            Ok(outcome) => outcome,
            Err(error) if error.is_cancelled() => Err(HostError::RespondToModel(
                "cancelled: the execution was stopped".to_owned(),
            )),
            Err(error) => Err(HostError::Fatal(format!("a host call panicked: {error}"))),
        };
        let current = {
            let mut calls = self.calls.borrow_mut();
            calls.in_flight.remove(&id);
            if let Err(HostError::Fatal(message)) = &outcome {
                calls.fatal.get_or_insert_with(|| message.clone());
            }
            calls.generation
        };
        if current != generation {
            // The execution that made this call was abandoned: never resume it.
            std::future::pending::<()>().await;
        }
        reply(outcome)
    }
}

fn reply(outcome: Result<serde_json::Value, HostError>) -> String {
    let value = match outcome {
        Ok(value) => serde_json::json!({ "ok": true, "value": value }),
        Err(error) => serde_json::json!({ "ok": false, "error": error.message_for_model() }),
    };
    value.to_string()
}

//! The engine thread: one QuickJS runtime, owned by one OS thread for its whole life.
//!
//! QuickJS values are not `Send`, so the runtime lives on a thread of its own running a
//! current-thread tokio runtime; [`super::JsEnv`] talks to it with [`Request`]s over a
//! channel. Host calls from JavaScript (`__rlm_host`) are spawned onto the
//! orchestrator's runtime through a [`Handle`] — that is where providers, the store and
//! sub-agents live — and their Promises resolve when the tasks finish, so calls made
//! together (`Promise.all`, `llm_query_parallel`) really run at once ([`bridge`]).
//! Context values come from the store ([`load`]); cells, echoes, exceptions and the
//! provided globals cross into QuickJS in [`values`]; console output is capped in
//! [`output`]; deadlines and cancellation live in [`control`].
//!
//! Guards: a memory limit and a stack limit on the runtime, and an interrupt handler
//! that stops running JavaScript once the execution's deadline passes or the execution
//! is cancelled. An execution waiting on host calls past its deadline is abandoned: its
//! calls are aborted and its continuation never resumes (its generation is over).
//!
//! The prelude takes private copies of the built-ins it relies on before any model code
//! runs (`__rlm_safe` in `prelude/core.js`), and `__rlm_seal` (`prelude/seal.js`) makes
//! its own `__rlm_*` functions unchangeable and closes the built-in prototypes to new
//! properties: model code may replace `Array.prototype.map`, `JSON` or `String` in its
//! own world, but what the host prints, stores and sends stays as it was, and nothing
//! it adds to a prototype reaches the objects the engine and the prelude make.

mod bridge;
mod closed;
mod control;
mod error;
mod lint;
mod load;
mod missing_part;
mod output;
mod values;

use std::cell::RefCell;
use std::fs;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rquickjs::context::EvalOptions;
use rquickjs::function::{Async, Func};
use rquickjs::{AsyncContext, AsyncRuntime, CatchResultExt, Function, Value};
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};

use self::bridge::{Bridge, Calls};
pub(crate) use self::control::Control;
pub(crate) use self::error::EngineError;
use self::load::read_value;
use self::output::Capture;
use self::values::{call0, json_text, provide, provide_json, run_cell, CellOutcome};
use super::cell::notebook_cell;
use super::JsOptions;
use rlm_env::Host;
use rlm_env::{ContextShape, ContextSource, EnvConfig, FinalAnswer, HistoryEntry, ReplVariable};

/// The prelude, split by purpose, run in order when a runtime starts.
const PRELUDE: [(&str, &str); 4] = [
    ("<rlm-core>", include_str!("prelude/core.js")),
    ("<rlm-explore>", include_str!("prelude/explore.js")),
    ("<rlm-helpers>", include_str!("prelude/helpers.js")),
    ("<rlm-seal>", include_str!("prelude/seal.js")),
];

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
        reply: oneshot::Sender<Result<(), EngineError>>,
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

/// A running engine thread.
pub(super) struct EngineHandle {
    pub requests: mpsc::UnboundedSender<Request>,
    pub control: Arc<Control>,
    pub ready: Option<oneshot::Receiver<Result<EngineInfo, EngineError>>>,
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
    ) -> Result<Self, EngineError> {
        let (requests, receiver) = mpsc::unbounded_channel();
        let (ready_tx, ready) = oneshot::channel();
        let control = Arc::new(Control::new());
        let init = Init {
            config: config.clone(),
            history: history.to_vec(),
            more_contexts: more_contexts.to_vec(),
            options: options.clone(),
            host,
            main: Handle::try_current().map_err(EngineError::NoTokioRuntime)?,
            control: Arc::clone(&control),
        };
        let thread = std::thread::Builder::new()
            .name("rlm-js".into())
            .stack_size(options.thread_stack_bytes)
            .spawn(move || engine_thread(init, receiver, ready_tx))
            .map_err(EngineError::Thread)?;
        Ok(Self {
            requests,
            control,
            ready: Some(ready),
            info: None,
            thread: Some(thread),
        })
    }

    /// Waits until the engine has loaded `context` (or failed to).
    pub async fn wait_ready(&mut self) -> Result<&EngineInfo, EngineError> {
        if let Some(ready) = self.ready.take() {
            let info = ready.await.map_err(|_| EngineError::EndedBeforeReady)??;
            self.info = Some(info);
        }
        self.info.as_ref().ok_or(EngineError::NotReady)
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
    ready: oneshot::Sender<Result<EngineInfo, EngineError>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = ready.send(Err(EngineError::ThreadRuntime(e)));
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
    async fn start(init: Init) -> Result<Self, EngineError> {
        let started = Instant::now();
        let rt = AsyncRuntime::new().map_err(EngineError::CreateRuntime)?;
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
            .map_err(EngineError::CreateContext)?;
        let capture = Rc::new(RefCell::new(Capture::new(init.options.output_cap_bytes)));
        let calls = Rc::new(RefCell::new(Calls::default()));
        let bridge = Bridge {
            host: Arc::clone(&init.host),
            main: init.main.clone(),
            calls: Rc::clone(&calls),
        };
        let writer = Rc::clone(&capture);
        ctx.with(|ctx| -> Result<(), EngineError> {
            let globals = ctx.globals();
            let write = Func::from(move |stream: i32, text: String| {
                writer.borrow_mut().write(stream, &text);
            });
            globals.set("__rlm_write", write)?;
            let host = Func::from(Async(move |method: String, args: String| {
                let bridge = bridge.clone();
                async move { Ok::<String, rquickjs::Error>(bridge.call(method, args).await) }
            }));
            globals.set("__rlm_host", host)?;
            for (name, source) in PRELUDE {
                let mut options = EvalOptions::default();
                options.filename = Some(name.to_owned());
                ctx.eval_with_options::<(), _>(source, options)
                    .catch(&ctx)
                    .map_err(|e| EngineError::Prelude {
                        name,
                        error: e.to_string(),
                    })?;
            }
            call0(&ctx, "__rlm_seal")?;
            provide_json(&ctx, "query", &json_text(&init.config.query)?)?;
            provide_json(&ctx, "history", &json_text(&init.history)?)?;
            provide(
                &ctx,
                "contexts",
                rquickjs::Array::new(ctx.clone())?.into_value(),
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
    async fn add_context(&mut self, source: &ContextSource) -> Result<(), EngineError> {
        let mut values = Vec::with_capacity(source.files.len());
        for file in &source.files {
            values.push(read_value(file, self.lazy_above)?);
        }
        let slot = self.slots;
        let chunk_chars = source.chunk_chars;
        let shape = source.shape;
        self.ctx
            .with(move |ctx| -> Result<(), EngineError> {
                let parse = |raw: Vec<u8>| {
                    ctx.json_parse(raw)
                        .catch(&ctx)
                        .map_err(|e| EngineError::ParseContext(e.to_string()))
                };
                let value = match shape {
                    ContextShape::Single => match values.into_iter().next() {
                        Some(raw) => parse(raw)?,
                        None => Value::new_null(ctx.clone()),
                    },
                    ContextShape::List => {
                        let list = rquickjs::Array::new(ctx.clone())?;
                        for (i, raw) in values.into_iter().enumerate() {
                            list.set(i, parse(raw)?)?;
                        }
                        list.into_value()
                    }
                };
                let contexts: rquickjs::Array = ctx.globals().get("contexts")?;
                contexts.set(slot, value.clone())?;
                provide(&ctx, &format!("context_{slot}"), value.clone())?;
                provide(&ctx, "context", value.clone())?;
                let chunks: rquickjs::Constructor = ctx.globals().get("__RLM_Chunks")?;
                let view: Value = chunks
                    .construct((value, chunk_chars))
                    .catch(&ctx)
                    .map_err(|e| EngineError::Thrown(e.to_string()))?;
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
    ) -> Result<(), EngineError> {
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
            .with(|ctx| -> Result<(), EngineError> {
                let history: Value = ctx.globals().get("history")?;
                let value = ctx
                    .json_parse(entry)
                    .catch(&ctx)
                    .map_err(|e| EngineError::Thrown(e.to_string()))?;
                if let Some(list) = history.as_array() {
                    list.set(list.len(), value)?;
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
                let oom = error.as_deref().is_some_and(|e| out_of_memory(e, &code));
                if let Some(note) = lint::exec_called_twice(&code).filter(|_| !oom) {
                    reply.stderr.push_str(&note);
                    reply.stderr.push('\n');
                }
                if oom && !self.healthy().await {
                    reply.broken = true;
                }
                reply.error = error.map(|error| {
                    if oom {
                        out_of_memory_explained(error, self.info.memory_limit_bytes)
                    } else {
                        let error = closed::explained(with_source_line(error, &code, id), &code);
                        missing_part::explained(without_modules_explained(error))
                    }
                });
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

/// `error` with the line of the cell's `code` it points at (`at <cell 4>:14:14`),
/// as Python's traceback shows it: QuickJS gives only the position, and a model shown
/// a bare "invalid redefinition of lexical identifier" cannot tell which declaration
/// of its block (`const [_, _, year]`) to change, so it sends the block again.
/// A cell's rewritten declarations (`let` → `var`) keep its lines where they were.
fn with_source_line(error: String, code: &str, id: u64) -> String {
    let marker = format!("<cell {id}>:");
    let line = error.split(&marker).nth(1).and_then(|rest| {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<usize>().ok()
    });
    let source = line
        .filter(|&line| line > 0)
        .and_then(|line| Some((line, code.lines().nth(line - 1)?.trim())));
    match source {
        Some((line, text)) if !text.is_empty() => {
            let shown: String = text.chars().take(SOURCE_LINE_CHARS).collect();
            let cut = if shown.len() < text.len() { " …" } else { "" };
            format!("{error}\n    line {line}: {shown}{cut}")
        }
        _ => error,
    }
}

/// `error` with a note when it says a module loader or host object is missing
/// (`require`, `process`, `fetch`, …): a model used to Node reaches for
/// `require('<a path>')` to read the context, and a bare `ReferenceError` does not tell
/// it that `context` already holds it.
fn without_modules_explained(error: String) -> String {
    const HOST_NAMES: [&str; 6] = ["require", "process", "fetch", "fs", "module", "Deno"];
    let missing = HOST_NAMES
        .iter()
        .any(|name| error.starts_with(&format!("ReferenceError: {name} is not defined")));
    if missing {
        format!(
            "{error}\nThis REPL has no modules, files or network: `context` already holds the whole context as text. Work on `context` directly."
        )
    } else {
        error
    }
}

/// The most characters of a code line shown under its error.
const SOURCE_LINE_CHARS: usize = 160;

/// Whether a cell's `error` is QuickJS running out of memory: its message says so, or
/// what was thrown could not be allocated — an `InternalError` with no message, or a
/// `null` from `code` that neither throws nor rejects (both what QuickJS gives after a
/// `while (re.exec(context))` loop that never ends), or QuickJS's stand-in for an error message
/// it could not allocate (`InternalError: Invalid error message`). A `null` a promise
/// rejects with (`Promise.reject(null)`, `reject(null)`) is the code's own.
fn out_of_memory(error: &str, code: &str) -> bool {
    let header = error.lines().next().unwrap_or_default().trim();
    error.contains("out of memory")
        || header == "InternalError:"
        || header == UNALLOCATED_MESSAGE
        || (header == "Uncaught null" && !code.contains("throw") && !code.contains("reject"))
}

/// What QuickJS makes an error's message when it cannot allocate the real one.
const UNALLOCATED_MESSAGE: &str = "InternalError: Invalid error message";

/// `error` with what running out of memory means and the usual cause, for a model
/// that otherwise reads an empty `InternalError:` and copies it back.
fn out_of_memory_explained(error: String, limit_bytes: u64) -> String {
    let error = match error.split_once('\n') {
        _ if error.trim() == "InternalError:" || error.trim() == "Uncaught null" => {
            "InternalError: out of memory".to_owned()
        }
        _ if error.trim() == UNALLOCATED_MESSAGE => "InternalError: out of memory".to_owned(),
        Some((header, rest))
            if header.trim() == "InternalError:" || header.trim() == UNALLOCATED_MESSAGE =>
        {
            format!("InternalError: out of memory\n{rest}")
        }
        _ => error,
    };
    format!(
        "{error}\nThe code used all of the runtime's {} MiB (`--js-memory-mb`): most often a loop that never ends and adds to an array each pass — `re.exec(context)` called twice per pass of a /g loop starts over at the start of `context` after the last match. Loop over `context.matchAll(re)` or `context.split('\\n')` instead.",
        limit_bytes / (1024 * 1024)
    )
}

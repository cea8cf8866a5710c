//! One running Python kernel process and the tasks that talk to it.
//!
//! Three tasks per kernel: a writer that owns its stdin (requests and host results
//! are queued to it, so nobody blocks on a full pipe), a reader that owns its stdout
//! (results go to the environment, `host_call`s are served by a task each), and a
//! stderr reader that keeps a bounded tail for error messages. Once ready, a watcher
//! bounds its capture files (see `capture.rs`). Dropping a [`Kernel`] aborts the tasks
//! and in-flight host calls and SIGKILLs the process group.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rlm_process::{drain_into_tail, spawn_in_group, GroupChild, Signal, SpawnOptions, TailBuffer};
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::timeout;

use rlm_process::{inherited_environment, AllowList, Cookie, SUPERVISION_COOKIE_ENV};

use super::capture::CaptureWatch;
use super::confine;
use super::error::KernelError;
use super::protocol::{self, HostResult, Init, Request};
use super::reader::{read_loop, Event, FatalSlot, InFlight, ReadLoop};
use super::PythonOptions;
use rlm_env::{EnvKind, HostError, KernelSeed};
use rlm_protocol::EnvVars;

/// The driver, embedded in the binary and sent to the kernel's stdin at start: its
/// parts, split by purpose, in the order they run.
const DRIVER: &str = concat!(
    include_str!("driver/protocol.py"),
    "\n",
    include_str!("driver/loader.py"),
    "\n",
    include_str!("driver/lazy.py"),
    "\n",
    include_str!("driver/explore.py"),
    "\n",
    include_str!("driver/helpers.py"),
    "\n",
    include_str!("driver/exec.py"),
);

/// How long a dead kernel's exit status and last stderr bytes are waited for.
const DEATH_REPORT_WAIT: Duration = Duration::from_millis(500);
/// How often an abandoned execution is interrupted again until it stops.
const INTERRUPT_REPEAT: Duration = Duration::from_millis(100);

/// What a kernel said about itself when it became ready.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelInfo {
    /// The kernel's process id (also its process group id).
    pub pid: u32,
    /// `sys.version` of the interpreter, e.g. `3.11.7`.
    pub python: String,
    /// How `context` was loaded: `fast` (chunked, straight into one str), `json`, `none`.
    pub load_method: String,
    /// Seconds spent loading `context`.
    pub load_seconds: f64,
    /// The kernel's peak resident memory once loaded, in KiB (Linux `ru_maxrss`).
    pub max_rss_kb: Option<u64>,
}

/// The outcome of waiting for a reply.
#[derive(Debug)]
pub(super) enum Waited {
    /// The reply's body.
    Reply(Value),
    /// The deadline passed.
    TimedOut,
    /// The kernel's stdout closed: it died.
    Closed,
    /// The kernel broke the protocol (an oversized, unreadable or forged message); it
    /// must be replaced. The text says what it sent.
    Broken(String),
}

/// A running kernel.
pub(super) struct Kernel {
    child: GroupChild,
    writer: mpsc::UnboundedSender<Vec<u8>>,
    events: mpsc::UnboundedReceiver<Event>,
    stderr_tail: Arc<Mutex<TailBuffer>>,
    stderr_task: Option<JoinHandle<()>>,
    tasks: Vec<JoinHandle<()>>,
    in_flight: InFlight,
    fatal: FatalSlot,
    closed: Arc<AtomicBool>,
    info: Option<KernelInfo>,
    next_id: u64,
    /// Ends, when dropped, every process that still carries the kernel's cookie.
    _cookie: Cookie,
    /// A confined kernel's private temporary directory, removed after it.
    _tmp: Option<tempfile::TempDir>,
    /// The watcher of the capture files, once the kernel reported them.
    capture: Option<CaptureWatch>,
    /// The most bytes a capture file may hold.
    capture_limit: u64,
    /// How long the kernel may take to start and load `context`.
    ready_timeout: Duration,
    /// How long abandoned code is interrupted before the kernel is given up.
    interrupt_grace: Duration,
    /// The id of an execution whose caller went away before its result (a cancelled
    /// query); it is interrupted before the kernel is used again.
    pub running: Option<u64>,
    /// How many entries of the session's `history` this kernel holds (from its `init`,
    /// or pushed since): one answered before it was ready is pushed once it is.
    pub history_len: usize,
}

impl Kernel {
    /// Starts a kernel and sends it the driver and `init`; does not wait for `ready`.
    fn start(seed: &KernelSeed<PythonOptions>) -> Result<Self, KernelError> {
        let KernelSeed {
            config,
            history,
            more_contexts,
            options,
            host,
        } = seed;
        let host = Arc::clone(host);
        let python_args = [OsString::from("-c"), bootstrap(DRIVER.len()).into()];
        let confined = confine::confine(
            &options.sandbox,
            config,
            &options.python,
            &python_args,
            more_contexts,
        )?;
        let memory = confine::KernelMemory::of(&options.sandbox, config, more_contexts);
        // The cookie marks everything the kernel starts, so that daemons which leave its
        // process group (`setsid`) are found and ended with it.
        let cookie = Cookie::new();
        let mut command = match &confined {
            Some(confined) => {
                let mut command = Command::new(&confined.program);
                command.args(&confined.args);
                command
            }
            None => {
                let mut command = Command::new(&options.python);
                command.args(&python_args);
                command
            }
        };
        command
            .env_clear()
            .envs(inherited_environment(&AllowList::PYTHON, &options.pass_env))
            .env(EnvVars::RLM_DATA_DIR, &config.data_dir)
            .env(SUPERVISION_COOKIE_ENV, cookie.chain())
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(confined) = &confined {
            command
                .env("TMPDIR", confined.tmp.path())
                .current_dir(confined.tmp.path());
        }
        if let Some(dir) = &options.working_dir {
            command.current_dir(dir);
        }
        let mut child = spawn_in_group(&mut command, &SpawnOptions::default())
            .map_err(|error| KernelError::Spawn { error })?;
        let stdin = child.child_mut().stdin.take();
        let stdout = child.child_mut().stdout.take();
        let stderr = child.child_mut().stderr.take();
        let (Some(mut stdin), Some(stdout), Some(stderr)) = (stdin, stdout, stderr) else {
            return Err(KernelError::Pipes);
        };

        let token = protocol::new_token();
        let init = protocol::line(&Init {
            kind: "init",
            query: &config.query,
            history,
            context: config.context.as_ref(),
            more_contexts,
            data_dir: &config.data_dir,
            output_cap: options.output_cap_bytes,
            load_chunk_bytes: options.load_chunk_bytes,
            token: &token,
            max_message: options.max_message_bytes,
            lazy_above: config.lazy_above,
            memory_bytes: memory.budget_bytes,
        })
        .map_err(|source| KernelError::Encode { source })?;

        let (writer, mut queue) = mpsc::unbounded_channel::<Vec<u8>>();
        let write_task = tokio::spawn(async move {
            if stdin.write_all(DRIVER.as_bytes()).await.is_err() {
                return;
            }
            while let Some(bytes) = queue.recv().await {
                if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
                    return;
                }
            }
        });
        let _ = writer.send(init);

        let stderr_tail = Arc::new(Mutex::new(TailBuffer::new(options.stderr_tail_bytes)));
        let stderr_task = tokio::spawn({
            let tail = Arc::clone(&stderr_tail);
            async move {
                let _ = drain_into_tail(stderr, tail).await;
            }
        });

        let (events_tx, events) = mpsc::unbounded_channel();
        let in_flight: InFlight = Arc::default();
        let fatal: FatalSlot = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        let read_task = tokio::spawn(read_loop(ReadLoop {
            stdout: BufReader::with_capacity(1 << 16, stdout),
            events: events_tx,
            writer: writer.clone(),
            host,
            in_flight: Arc::clone(&in_flight),
            fatal: Arc::clone(&fatal),
            closed: Arc::clone(&closed),
            token,
            max_message: options.max_message_bytes,
        }));

        Ok(Self {
            child,
            writer,
            events,
            stderr_tail,
            stderr_task: Some(stderr_task),
            tasks: vec![write_task, read_task],
            in_flight,
            fatal,
            closed,
            info: None,
            next_id: 1,
            _cookie: cookie,
            _tmp: confined.map(|confined| confined.tmp),
            capture: None,
            capture_limit: options.capture_limit(),
            ready_timeout: options.ready_timeout,
            interrupt_grace: options.interrupt_grace,
            running: None,
            history_len: history.len(),
        })
    }

    /// The kernel's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the kernel reported when ready, once it is.
    pub fn info(&self) -> Option<&KernelInfo> {
        self.info.as_ref()
    }

    /// Whether the kernel was seen ready (by [`Kernel::wait_ready_within`]).
    pub fn is_ready(&self) -> bool {
        self.info.is_some()
    }

    /// Waits for `ready`. `Err` carries the driver's error or the death report.
    async fn wait_ready_within(&mut self, limit: Duration) -> Result<(), KernelError> {
        if self.info.is_some() {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Err(_) => {
                    return Err(KernelError::ReadyTimeout {
                        secs: limit.as_secs(),
                        stderr: self.stderr_suffix(),
                    })
                }
                Ok(None | Some(Event::Closed)) => {
                    return Err(KernelError::Died {
                        report: self.death_report().await,
                    })
                }
                Ok(Some(Event::ProtocolError(problem))) => {
                    return Err(KernelError::Protocol { problem })
                }
                Ok(Some(Event::Result { .. })) => continue,
                Ok(Some(Event::Ready(ready))) => {
                    if !ready.ok {
                        let error = ready.error.unwrap_or_default();
                        return Err(KernelError::Driver {
                            error: error.trim_end().to_owned(),
                            stderr: self.stderr_suffix(),
                        });
                    }
                    let load = ready.load.unwrap_or(protocol::Load {
                        method: "none".into(),
                        seconds: 0.0,
                    });
                    let info = KernelInfo {
                        pid: ready.pid.unwrap_or_else(|| self.child.id()),
                        python: ready.python.unwrap_or_default(),
                        load_method: load.method,
                        load_seconds: load.seconds,
                        max_rss_kb: ready.max_rss_kb,
                    };
                    if let Some(files) = &ready.capture {
                        match CaptureWatch::start(files, self.capture_limit, self.child.id()) {
                            Ok(watch) => self.capture = Some(watch),
                            Err(error) => tracing::warn!(
                                %error,
                                "the Python kernel's captured output is not bounded"
                            ),
                        }
                    }
                    self.info = Some(info);
                    return Ok(());
                }
            }
        }
    }

    /// Sends a request and returns its id, or `None` if the kernel's stdin is gone.
    pub fn send<'a>(&mut self, build: impl FnOnce(u64) -> Request<'a>) -> Option<u64> {
        let id = self.next_id;
        self.next_id += 1;
        let bytes = protocol::line(&build(id)).ok()?;
        self.writer.send(bytes).ok().map(|()| id)
    }

    /// Waits up to `limit` for the result of request `id`.
    pub async fn wait_result(&mut self, id: u64, limit: Duration) -> Waited {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Err(_) => return Waited::TimedOut,
                Ok(None | Some(Event::Closed)) => return Waited::Closed,
                Ok(Some(Event::ProtocolError(problem))) => return Waited::Broken(problem),
                Ok(Some(Event::Result { id: got, body })) if got == id => {
                    return Waited::Reply(body)
                }
                Ok(Some(_)) => continue,
            }
        }
    }

    /// SIGINT to the kernel process only (its own subprocesses are left alone; Python's
    /// `subprocess` kills a child it waits for when interrupted).
    pub fn interrupt(&self) {
        if let Err(error) = self.child.signal(Signal::SIGINT) {
            tracing::warn!(pid = self.child.id(), %error, "could not interrupt the Python kernel");
        }
    }

    /// Bytes of captured stdout and stderr thrown away since the last call (the
    /// capture files grew past their limit).
    pub fn take_discarded(&self) -> [u64; 2] {
        self.capture
            .as_ref()
            .map_or([0, 0], CaptureWatch::take_discarded)
    }

    /// The most bytes a capture file may hold.
    pub fn capture_limit(&self) -> u64 {
        self.capture_limit
    }

    /// The fatal error a host call met since the last look, if any: the run must end.
    pub fn take_fatal(&self) -> Option<String> {
        self.fatal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Aborts every host call in flight and tells the kernel they failed, so no thread
    /// waits forever for an answer that will not come.
    pub fn cancel_host_calls(&self, reason: &str) {
        let cancelled: Vec<(u64, AbortHandle)> = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .collect();
        for (call_id, handle) in cancelled {
            handle.abort();
            let reply =
                HostResult::new(call_id, &Err(HostError::RespondToModel(reason.to_owned())));
            if let Ok(bytes) = protocol::line(&reply) {
                let _ = self.writer.send(bytes);
            }
        }
    }

    /// Why the kernel died: exit status and the tail of its stderr.
    pub async fn death_report(&mut self) -> String {
        let status = match timeout(DEATH_REPORT_WAIT, self.child.wait()).await {
            Ok(Ok(status)) => describe_status(status),
            Ok(Err(error)) => format!("its exit status is unknown ({error})"),
            Err(_) => "its output closed but it is still running".to_owned(),
        };
        if let Some(task) = self.stderr_task.take() {
            // Grandchildren may hold stderr open forever: wait a bounded time only.
            let abort = task.abort_handle();
            if timeout(DEATH_REPORT_WAIT, task).await.is_err() {
                abort.abort();
            }
        }
        format!("{status}{}", self.stderr_suffix())
    }

    fn stderr_suffix(&self) -> String {
        let tail = self
            .stderr_tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .to_string_lossy();
        let tail = tail.trim();
        if tail.is_empty() {
            String::new()
        } else {
            format!("; its stderr ended with:\n{tail}")
        }
    }

    /// Asks the kernel to exit, then ends its process group (SIGTERM, `grace`, SIGKILL).
    pub async fn shutdown(mut self, grace: Duration) {
        let _ = self.writer.send(protocol::SHUTDOWN_LINE.to_vec());
        let _ = timeout(grace, self.child.wait()).await;
        if let Err(error) = self.child.terminate(grace).await {
            tracing::warn!(pid = self.child.id(), %error, "could not end the Python kernel");
        }
    }
}

#[async_trait::async_trait]
impl rlm_env::Kernel for Kernel {
    type Options = PythonOptions;
    type Error = KernelError;

    const KIND: EnvKind = EnvKind::Python;

    fn command(options: &PythonOptions) -> String {
        options.python.display().to_string()
    }

    fn spawn(seed: &KernelSeed<PythonOptions>) -> Result<Self, KernelError> {
        Self::start(seed)
    }

    fn has_died(&mut self) -> bool {
        self.closed.load(Ordering::SeqCst) || !matches!(self.child.try_wait(), Ok(None))
    }

    async fn wait_ready(&mut self) -> Result<(), KernelError> {
        self.wait_ready_within(self.ready_timeout).await
    }

    /// The abandoned execution's result is awaited for the interrupt grace period,
    /// interrupting it again and again.
    async fn settle(&mut self) -> bool {
        let Some(id) = self.running.take() else {
            return true;
        };
        let deadline = Instant::now() + self.interrupt_grace;
        let mut waited = self.wait_result(id, Duration::ZERO).await;
        // Repeated: a SIGINT that arrives before the kernel has started the code is
        // ignored by the driver (it interrupts only running user code).
        while matches!(waited, Waited::TimedOut) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.interrupt();
            self.cancel_host_calls("cancelled: the query was cancelled");
            waited = self.wait_result(id, left.min(INTERRUPT_REPEAT)).await;
        }
        match waited {
            Waited::Reply(_) => true,
            Waited::Closed | Waited::TimedOut | Waited::Broken(_) => {
                tracing::warn!(
                    pid = self.pid(),
                    "the Python kernel did not stop the cancelled code; restarting it"
                );
                false
            }
        }
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        if let Some(task) = &self.stderr_task {
            task.abort();
        }
        for (_, handle) in self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
        {
            handle.abort();
        }
        // The GroupChild's guard SIGKILLs the process group.
    }
}

/// The `-c` program: reads exactly `len` bytes of driver source from stdin and runs
/// them, leaving the rest of stdin to the protocol.
fn bootstrap(len: usize) -> String {
    format!(
        "import os\nb=bytearray()\nwhile len(b)<{len}:\n c=os.read(0,{len}-len(b))\n if not c:raise SystemExit(3)\n b+=c\nexec(compile(bytes(b),'<rlm-driver>','exec'),{{'__name__':'_rlm_driver'}})\n"
    )
}

fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("it exited with code {code}"),
        (None, Some(signal)) => match Signal::try_from(signal) {
            Ok(name) => format!("it was killed by signal {signal} ({name})"),
            Err(_) => format!("it was killed by signal {signal}"),
        },
        _ => format!("it ended ({status})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bootstrap_reads_exactly_the_driver() {
        let boot = bootstrap(123);
        assert!(boot.contains("while len(b)<123:"));
        assert!(boot.contains("'<rlm-driver>'"));
    }
}

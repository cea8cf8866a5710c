//! Running one child to completion under supervision: bounded output, a deadline,
//! cancellation, and nothing left behind.
//!
//! [`run_supervised`] is what sub-agents and nested runs go through. The child leads
//! its own process group, is started on a thread that lives as long as the process (so
//! its parent-death signal fires only when the orchestrator dies) without copying the
//! orchestrator's memory (on Linux, see `launch.rs`), and gets exactly the environment
//! the caller gives plus a supervision cookie. One reader per pipe keeps bounded
//! memory (the head of stdout, the tail of stderr). The supervisor waits for the first
//! of: the child's exit, the timeout, the cancellation token. On timeout or
//! cancellation it sends `SIGTERM` to the group, waits out the grace period, then
//! sends `SIGKILL`. After the child exits it drains the pipes for a bounded time
//! (grandchildren may hold them open forever), then ends whatever is left of the group
//! and every process still carrying the cookie (grandchildren that left the group with
//! `setsid`): `SIGTERM`, grace, `SIGKILL`. Finding that nothing is left, the usual
//! case, costs a few reads of `/proc` (the processes created since the child started,
//! by pid), not a scan of every process's environment.
//!
//! `PR_SET_CHILD_SUBREAPER` is deliberately not used: it would make the orchestrator
//! the parent of every orphan below it, and reaping those would need `waitpid(-1)`,
//! which steals exit statuses from tokio's own child handling. The cookie sweep finds
//! escapees wherever they were re-parented. A descendant that clears its environment
//! before `setsid` carries no cookie: it is not found here, but stays in the run's
//! cgroup where one could be made (see `cgroup.rs`) and is ended with the run
//! ([`end_tree`](crate::end_tree), or the watchdog after `kill -9`).

use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout, Instant};
use tokio_util::sync::CancellationToken;

use crate::capture::{drain_into_tail, read_capped_into, Captured, TailBuffer};
#[cfg(target_os = "linux")]
use crate::group::on_spawner;
use crate::group::{spawn_in_group_on_spawner, GroupChild, SpawnError, SpawnOptions};
use crate::procfs;
use crate::registry;
use crate::signal::signal_group;

/// Default `SIGTERM` → `SIGKILL` grace period.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);
/// Default bytes of stdout kept.
pub const DEFAULT_STDOUT_CAP_BYTES: usize = 1024 * 1024;
/// Default bytes of stderr kept (the tail).
pub const DEFAULT_STDERR_TAIL_BYTES: usize = 16 * 1024;
/// Default bound on draining the pipes after the child exits.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(1);

/// Environment variable holding a supervised child's cookie chain: the cookies of all
/// supervised ancestors and its own, `:`-separated. Descendants inherit it, which is
/// how the supervisor finds those that left the process group.
pub const SUPERVISION_COOKIE_ENV: &str = "RLM_SUPERVISION_COOKIE";

/// How often the supervisor looks whether leftovers are gone.
const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// How long to wait for processes to vanish after `SIGKILL` (only a process stuck in
/// the kernel takes longer).
const KILL_WAIT: Duration = Duration::from_secs(2);
/// How long a process started since the child may show an empty environment (it is in
/// the middle of `execve`) before it is taken as started without one.
const EXEC_SETTLE: Duration = Duration::from_millis(100);
/// How often such a process is looked at again.
const EXEC_POLL: Duration = Duration::from_millis(1);

/// How to supervise a child.
#[derive(Debug, Clone)]
pub struct SuperviseOptions {
    /// Wall-clock limit; `None` for none.
    pub timeout: Option<Duration>,
    /// Time between `SIGTERM` and `SIGKILL` when ending the group.
    pub grace: Duration,
    /// Bytes of stdout kept (the first ones); the rest is read and counted.
    pub stdout_cap: usize,
    /// Bytes of stderr kept (the last ones).
    pub stderr_tail: usize,
    /// Bytes written to the child's stdin, which is then closed; `None` connects stdin
    /// to `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    /// Ends the child (as on timeout) when cancelled. A `CancellationToken` rather
    /// than a watch channel: one token (or its child tokens) can stop many agents.
    pub cancel: Option<CancellationToken>,
    /// How long the pipes are drained after the child exits before the group is
    /// ended (grandchildren may hold them open); at most this long again after that.
    pub drain_timeout: Duration,
}

impl Default for SuperviseOptions {
    fn default() -> Self {
        Self {
            timeout: None,
            grace: DEFAULT_GRACE,
            stdout_cap: DEFAULT_STDOUT_CAP_BYTES,
            stderr_tail: DEFAULT_STDERR_TAIL_BYTES,
            stdin: None,
            cancel: None,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
        }
    }
}

/// How a supervised child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// It exited by itself with this code.
    Exited(i32),
    /// A signal it did not expect ended it (not our timeout or cancellation; e.g. it
    /// crashed, or [`kill_all_groups`](crate::kill_all_groups) reached it).
    Signaled(i32),
    /// It ran past the timeout and was ended.
    TimedOut,
    /// The cancellation token fired and it was ended.
    Cancelled,
}

impl Termination {
    /// Exited with code 0.
    pub fn success(&self) -> bool {
        *self == Termination::Exited(0)
    }

    fn of(status: ExitStatus) -> Self {
        match (status.code(), status.signal()) {
            (Some(code), _) => Termination::Exited(code),
            (None, Some(signal)) => Termination::Signaled(signal),
            (None, None) => Termination::Exited(-1),
        }
    }
}

impl std::fmt::Display for Termination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Termination::Exited(code) => write!(f, "exited with code {code}"),
            Termination::Signaled(signal) => match Signal::try_from(*signal) {
                Ok(name) => write!(f, "was killed by signal {signal} ({name})"),
                Err(_) => write!(f, "was killed by signal {signal}"),
            },
            Termination::TimedOut => f.write_str("timed out"),
            Termination::Cancelled => f.write_str("was cancelled"),
        }
    }
}

/// What a supervised child did.
#[derive(Debug, Clone)]
pub struct Supervised {
    /// The child's pid (also its process group id).
    pub pid: u32,
    /// How it ended.
    pub termination: Termination,
    /// The first [`SuperviseOptions::stdout_cap`] bytes of its stdout.
    pub stdout: Vec<u8>,
    /// Stdout went past the cap.
    pub stdout_truncated: bool,
    /// Bytes it wrote to stdout in total.
    pub stdout_total_bytes: u64,
    /// The last [`SuperviseOptions::stderr_tail`] bytes of its stderr, as text, with a
    /// marker when older bytes were dropped.
    pub stderr_tail: String,
    /// Wall time from spawn to the end of the clean-up.
    pub duration: Duration,
    /// Something (the child or what it left behind) outlived `SIGTERM` and the grace
    /// period and had to be `SIGKILL`ed.
    pub forced_kill: bool,
}

/// Runs `spawn` to completion under `options` and returns what it did.
///
/// Fails only if the child cannot be started; everything that happens afterwards
/// (non-zero exit, signals, timeout, cancellation) is in [`Supervised::termination`].
/// When this returns, the child, its group and every process that still carried its
/// cookie have been ended. Dropping the future early kills them as well (`SIGKILL`,
/// without grace).
pub async fn run_supervised(
    spawn: SpawnOptions,
    options: SuperviseOptions,
) -> Result<Supervised, SpawnError> {
    let started = Instant::now();
    let mut cookie = Cookie::new();
    let window = procfs::PidWindow::open();
    let mut child = start(spawn, &cookie.chain, options.stdin.is_some()).await?;
    let pid = child.id();
    tracing::debug!(pid, "supervised child started");

    let stdin_pipe = child.take_stdin();
    let _stdin_writer = options.stdin.zip(stdin_pipe).map(|(bytes, mut pipe)| {
        Task::spawn(async move {
            // A child that does not read its stdin closes it: EPIPE is expected.
            pipe.write_all(&bytes).await?;
            pipe.shutdown().await
        })
    });
    let stdout = Arc::new(Mutex::new(Captured::default()));
    let stderr = Arc::new(Mutex::new(TailBuffer::new(options.stderr_tail)));
    let mut readers = Vec::new();
    if let Some(pipe) = child.take_stdout() {
        readers.push(Task::spawn(read_capped_into(
            pipe,
            options.stdout_cap,
            Arc::clone(&stdout),
        )));
    }
    if let Some(pipe) = child.take_stderr() {
        readers.push(Task::spawn(drain_into_tail(pipe, Arc::clone(&stderr))));
    }

    let deadline = async {
        match options.timeout {
            Some(limit) => sleep(limit).await,
            None => std::future::pending().await,
        }
    };
    let cancelled = async {
        match &options.cancel {
            Some(token) => token.cancelled().await,
            None => std::future::pending().await,
        }
    };
    let ended = tokio::select! {
        status = child.wait() => Ok(status),
        () = deadline => Err(Termination::TimedOut),
        () = cancelled => Err(Termination::Cancelled),
    };
    let mut forced_kill = false;
    let termination = match ended {
        Ok(Ok(status)) => {
            // Output may still be in the pipes, or be written by grandchildren.
            join_all(&mut readers, options.drain_timeout).await;
            Termination::of(status)
        }
        Ok(Err(error)) => {
            tracing::warn!(pid, %error, "could not wait for a supervised child; killing it");
            child.kill_group();
            match timeout(KILL_WAIT, child.wait()).await {
                Ok(Ok(status)) => Termination::of(status),
                _ => Termination::Signaled(Signal::SIGKILL as i32),
            }
        }
        Err(reason) => {
            tracing::debug!(pid, %reason, "ending a supervised child");
            forced_kill = stop_leader(&mut child, &cookie, options.grace).await;
            reason
        }
    };
    forced_kill |= end_leftovers(pid, &cookie, window, options.grace).await;
    cookie.swept = true;
    if !join_all(&mut readers, options.drain_timeout).await {
        tracing::warn!(
            pid,
            "a process outside the child's group still holds its output pipes; not waiting for it"
        );
    }
    drop(readers);
    child.disarm_if_gone();

    let stdout = std::mem::take(&mut *stdout.lock().unwrap_or_else(PoisonError::into_inner));
    let stderr_tail = stderr
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .to_string_lossy();
    Ok(Supervised {
        pid,
        termination,
        stdout_truncated: stdout.truncated(),
        stdout_total_bytes: stdout.total,
        stdout: stdout.bytes,
        stderr_tail,
        duration: started.elapsed(),
        forced_kill,
    })
}

/// Starts the child with the supervision cookie, its stdout and stderr piped, and stdin
/// piped or `/dev/null`, on the spawner thread: without copying the orchestrator where
/// the system allows it ([`launch`](crate::launch)), else with `std`'s `Command`.
async fn start(
    spawn: SpawnOptions,
    cookie_chain: &OsString,
    pipe_stdin: bool,
) -> Result<Supervisee, SpawnError> {
    #[cfg(target_os = "linux")]
    if crate::launch::available() && tokio::runtime::Handle::try_current().is_ok() {
        use crate::launch::{launch, LaunchError, LaunchSpec};
        let failed = |source| SpawnError {
            command: spawn.program_name(),
            source,
        };
        let extra_env = [(OsString::from(SUPERVISION_COOKIE_ENV), cookie_chain.clone())];
        let spec = LaunchSpec::new(&spawn, &extra_env, pipe_stdin).map_err(failed)?;
        match on_spawner(move || launch(&spec)).await {
            Some(Ok(child)) => return Ok(Supervisee::Launched(child)),
            Some(Err(LaunchError::Failed(source))) => return Err(failed(source)),
            Some(Err(LaunchError::Unsupported(error))) => {
                tracing::debug!(%error, "clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD) refused; forking instead");
            }
            None => {
                return Err(failed(io::Error::other(
                    "the spawner thread dropped the request",
                )))
            }
        }
    }
    let mut command = spawn.command();
    command
        .env(SUPERVISION_COOKIE_ENV, cookie_chain)
        .stdin(if pipe_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    spawn_in_group_on_spawner(command, spawn)
        .await
        .map(Supervisee::Grouped)
}

/// A supervised child, however it was started.
enum Supervisee {
    /// Started by [`launch`](crate::launch) (Linux).
    #[cfg(target_os = "linux")]
    Launched(crate::launch::Launched),
    /// Started by `std`'s `Command` (elsewhere, or where `clone` is refused).
    Grouped(GroupChild),
}

type BoxedWrite = Box<dyn AsyncWrite + Send + Unpin>;
type BoxedRead = Box<dyn AsyncRead + Send + Unpin>;

impl Supervisee {
    fn id(&self) -> u32 {
        match self {
            #[cfg(target_os = "linux")]
            Supervisee::Launched(child) => child.id(),
            Supervisee::Grouped(child) => child.id(),
        }
    }

    async fn wait(&mut self) -> io::Result<ExitStatus> {
        match self {
            #[cfg(target_os = "linux")]
            Supervisee::Launched(child) => child.wait().await,
            Supervisee::Grouped(child) => child.wait().await,
        }
    }

    fn kill_group(&self) {
        match self {
            #[cfg(target_os = "linux")]
            Supervisee::Launched(child) => child.kill_group(),
            Supervisee::Grouped(child) => child.kill_group(),
        }
    }

    fn disarm_if_gone(&mut self) {
        match self {
            #[cfg(target_os = "linux")]
            Supervisee::Launched(child) => child.disarm_if_gone(),
            Supervisee::Grouped(child) => {
                child.disarm_if_gone();
            }
        }
    }

    fn take_stdin(&mut self) -> Option<BoxedWrite> {
        match self {
            #[cfg(target_os = "linux")]
            Supervisee::Launched(child) => child.stdin.take().map(|p| Box::new(p) as BoxedWrite),
            Supervisee::Grouped(child) => child
                .child_mut()
                .stdin
                .take()
                .map(|p| Box::new(p) as BoxedWrite),
        }
    }

    fn take_stdout(&mut self) -> Option<BoxedRead> {
        match self {
            #[cfg(target_os = "linux")]
            Supervisee::Launched(child) => child.stdout.take().map(|p| Box::new(p) as BoxedRead),
            Supervisee::Grouped(child) => child
                .child_mut()
                .stdout
                .take()
                .map(|p| Box::new(p) as BoxedRead),
        }
    }

    fn take_stderr(&mut self) -> Option<BoxedRead> {
        match self {
            #[cfg(target_os = "linux")]
            Supervisee::Launched(child) => child.stderr.take().map(|p| Box::new(p) as BoxedRead),
            Supervisee::Grouped(child) => child
                .child_mut()
                .stderr
                .take()
                .map(|p| Box::new(p) as BoxedRead),
        }
    }
}

/// Ends the group's leader (and its group): `SIGTERM` to the group and the cookie's
/// carriers, up to `grace` for the leader to exit, then `SIGKILL`. Returns whether
/// `SIGKILL` was needed.
async fn stop_leader(child: &mut Supervisee, cookie: &Cookie, grace: Duration) -> bool {
    signal_everything(child.id(), cookie, Signal::SIGTERM);
    if timeout(grace, child.wait()).await.is_ok() {
        return false;
    }
    signal_everything(child.id(), cookie, Signal::SIGKILL);
    if timeout(KILL_WAIT, child.wait()).await.is_err() {
        tracing::warn!(
            pid = child.id(),
            "a child survived SIGKILL (stuck in the kernel?)"
        );
    }
    true
}

/// Ends whatever is left of the group `pgid` and the cookie's carriers once the leader
/// is gone: `SIGTERM`, up to `grace`, `SIGKILL`. Returns whether `SIGKILL` was needed.
///
/// The usual case, nothing left, is shown cheaply from the processes created since
/// `window` ([`procfs::quick_check`]); otherwise all of `/proc` is scanned. A process
/// caught in the middle of `execve` shows no environment for a moment, so whether it
/// carries the cookie is looked at again, for up to [`EXEC_SETTLE`].
async fn end_leftovers(
    pgid: u32,
    cookie: &Cookie,
    window: Option<procfs::PidWindow>,
    grace: Duration,
) -> bool {
    let settle_by = Instant::now() + EXEC_SETTLE;
    loop {
        match procfs::quick_check(pgid, &cookie.own, window) {
            procfs::Quick::NothingLeft => return false,
            procfs::Quick::Unsettled if Instant::now() < settle_by => sleep(EXEC_POLL).await,
            procfs::Quick::Unsettled | procfs::Quick::Unknown => break,
        }
    }
    let since = window.map(|w| w.start_ticks);
    loop {
        let found = procfs::leftovers(pgid, &cookie.own, since);
        if !found.is_empty() {
            break;
        }
        if found.unsettled.is_empty() || Instant::now() >= settle_by {
            // Still no environment: started without one, so not carrying the cookie.
            return false;
        }
        sleep(EXEC_POLL).await;
    }
    signal_everything(pgid, cookie, Signal::SIGTERM);
    if wait_until_gone(pgid, cookie, grace).await {
        return false;
    }
    signal_everything(pgid, cookie, Signal::SIGKILL);
    if !wait_until_gone(pgid, cookie, KILL_WAIT).await {
        tracing::warn!(
            pgid,
            "processes of a child survived SIGKILL (stuck in the kernel?)"
        );
    }
    true
}

/// Polls until nothing is left of the group and the cookie, or `limit` passes.
async fn wait_until_gone(pgid: u32, cookie: &Cookie, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if procfs::leftovers(pgid, &cookie.own, None).is_empty() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        sleep(POLL_INTERVAL).await;
    }
}

/// Sends `signal` to the group and to every carrier of the cookie outside it.
fn signal_everything(pgid: u32, cookie: &Cookie, signal: Signal) {
    if signal == Signal::SIGTERM {
        registry::note_terminated(pgid, &cookie.own);
    }
    if let Err(error) = signal_group(pgid, signal) {
        tracing::warn!(pgid, %error, "could not signal a child process group");
    }
    let cookies = [cookie.own.clone()];
    for pid in procfs::leftovers(pgid, &cookie.own, None).escaped {
        if procfs::signal_carrier(pid, &cookies, signal) {
            tracing::debug!(pid, %signal, "signalled a process that left its child's group");
        }
    }
}

/// Waits up to `limit` for every task to finish; `true` if they all did.
async fn join_all(tasks: &mut [Task], limit: Duration) -> bool {
    timeout(limit, async {
        for task in tasks.iter_mut() {
            task.join().await;
        }
    })
    .await
    .is_ok()
}

/// A pipe task that is aborted when dropped.
struct Task {
    handle: Option<JoinHandle<io::Result<()>>>,
}

impl Task {
    fn spawn(future: impl std::future::Future<Output = io::Result<()>> + Send + 'static) -> Self {
        Self {
            handle: Some(tokio::spawn(future)),
        }
    }

    async fn join(&mut self) {
        if let Some(handle) = self.handle.as_mut() {
            if let Ok(Err(error)) = handle.await {
                if error.kind() != io::ErrorKind::BrokenPipe {
                    tracing::debug!(%error, "a child's pipe failed");
                }
            }
            self.handle = None;
        }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if let Some(handle) = &self.handle {
            handle.abort();
        }
    }
}

/// Source of unique cookies within this process.
static NEXT_COOKIE: AtomicU64 = AtomicU64::new(1);

/// One supervised child's cookie, listed for [`kill_all_groups`](crate::kill_all_groups)
/// while it lives. Dropped before the sweep ran (the supervising future was dropped),
/// it `SIGKILL`s every carrier.
///
/// Long-lived children that are not run to completion (the Python kernel) carry one
/// too: give the child [`SUPERVISION_COOKIE_ENV`] = [`Cookie::chain`] and keep the
/// cookie as long as the child; dropping it ends every process that inherited it,
/// including daemons that left the child's process group with `setsid`.
pub struct Cookie {
    /// This child's cookie: `<our pid>.<counter>`, unique on the machine while we live.
    own: String,
    /// Our own chain (if we are supervised) followed by `own`.
    chain: OsString,
    /// The leftovers were swept by the supervisor.
    swept: bool,
}

impl Default for Cookie {
    fn default() -> Self {
        Self::new()
    }
}

impl Cookie {
    /// A new cookie, unique on the machine while this process lives.
    pub fn new() -> Self {
        let own = format!(
            "{}.{}",
            std::process::id(),
            NEXT_COOKIE.fetch_add(1, Ordering::Relaxed)
        );
        let mut chain = std::env::var_os(SUPERVISION_COOKIE_ENV).unwrap_or_default();
        if !chain.is_empty() {
            chain.push(":");
        }
        chain.push(&own);
        registry::add_cookie(&own);
        Self {
            own,
            chain,
            swept: false,
        }
    }

    /// The value of [`SUPERVISION_COOKIE_ENV`] to give the child: our own chain
    /// followed by this cookie.
    pub fn chain(&self) -> &std::ffi::OsStr {
        &self.chain
    }
}

impl Drop for Cookie {
    fn drop(&mut self) {
        // A graceful stop of the whole process gives the carriers their grace period.
        if !self.swept && registry::spare_cookie(&self.own) {
            registry::remove_cookie(&self.own);
            return;
        }
        if !self.swept {
            let cookies = [self.own.clone()];
            let mut signalled = false;
            for pid in procfs::carriers(&cookies) {
                signalled |= procfs::signal_carrier(pid, &cookies, Signal::SIGKILL);
            }
            // SIGKILL is delivered asynchronously: wait (briefly, bounded) until they are
            // gone, so that "the run ended" means "nothing of it is left".
            let deadline = std::time::Instant::now() + KILL_WAIT;
            while signalled
                && !procfs::carriers(&cookies).is_empty()
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(POLL_INTERVAL);
            }
        }
        registry::remove_cookie(&self.own);
    }
}

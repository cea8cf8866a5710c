//! Starting a child in its own process group, and ending that group.
//!
//! A child started here is the leader of a new process group (`process_group(0)`), so
//! everything it forks (a shell's pipeline, a kernel's `subprocess.run`) can be
//! signalled at once. On Linux it also gets `PR_SET_PDEATHSIG(SIGKILL)`: if the
//! orchestrator is SIGKILLed and cannot clean up, the kernel kills the leader. Note
//! that the parent-death signal fires when the spawning *thread* exits, so spawn from
//! long-lived threads (tokio workers, the main thread), never from `spawn_blocking`.
//! [`run_supervised`](crate::run_supervised) removes that trap altogether: it starts
//! its children on a dedicated thread that lives as long as the process.

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::{Child, Command};
use tokio::time::{sleep, timeout, Instant};

use crate::guard::GroupGuard;
use crate::signal::{group_exists, send_signal, signal_group, SignalError};

/// How often [`GroupChild::terminate`] checks whether the rest of the group has gone.
const GROUP_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// What to run and how: the program, its arguments, its **whole** environment, its
/// working directory and the parent-death signal.
///
/// [`run_supervised`](crate::run_supervised) uses every field: the environment is
/// cleared and only [`SpawnOptions::env`] is set (plus the supervision cookie, see
/// [`SUPERVISION_COOKIE_ENV`](crate::SUPERVISION_COOKIE_ENV)). [`spawn_in_group`] runs
/// a [`Command`] the caller built and reads only `parent_death_signal`.
#[derive(Clone)]
pub struct SpawnOptions {
    /// The program (a path, or a name looked up in the child's `PATH`).
    pub program: OsString,
    /// Its arguments, each passed as one argument (no shell involved).
    pub args: Vec<OsString>,
    /// The child's complete environment: nothing else is inherited.
    pub env: Vec<(OsString, OsString)>,
    /// Working directory; `None` inherits the orchestrator's.
    pub cwd: Option<PathBuf>,
    /// Arm `PR_SET_PDEATHSIG(SIGKILL)` (Linux only; ignored elsewhere).
    pub parent_death_signal: bool,
}

/// Environment *values* are left out: they may hold a key the user passed on.
impl std::fmt::Debug for SpawnOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env_names: Vec<_> = self.env.iter().map(|(name, _)| name).collect();
        f.debug_struct("SpawnOptions")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &env_names)
            .field("cwd", &self.cwd)
            .field("parent_death_signal", &self.parent_death_signal)
            .finish()
    }
}

impl Default for SpawnOptions {
    fn default() -> Self {
        Self {
            program: OsString::new(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            parent_death_signal: true,
        }
    }
}

impl SpawnOptions {
    /// Options running `program` with no arguments and an empty environment.
    pub fn new(program: impl Into<OsString>) -> Self {
        Self {
            program: program.into(),
            ..Self::default()
        }
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<I, A>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Adds one environment variable.
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Sets the working directory.
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// A [`Command`] for these options: environment cleared, then exactly
    /// [`SpawnOptions::env`]; stdio left to the caller.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &self.cwd {
            command.current_dir(cwd);
        }
        command
    }

    /// The program as text, for messages.
    pub fn program_name(&self) -> String {
        self.program.to_string_lossy().into_owned()
    }
}

/// A child could not be started.
#[derive(Debug, thiserror::Error)]
#[error("failed to start `{command}`")]
pub struct SpawnError {
    /// The program that was run.
    pub command: String,
    /// What went wrong.
    #[source]
    pub source: io::Error,
}

/// Starts `command` as the leader of a new process group.
///
/// The caller sets the environment and stdio first (clear the environment and pass
/// only what the child needs; stdin null unless it reads from it). `kill_on_drop` is
/// set as well, and the returned [`GroupChild`] kills the whole group when dropped.
/// Only `options.parent_death_signal` is read; the program, arguments and environment
/// are the `command`'s. The group is listed by [`live_groups`](crate::live_groups)
/// until it is known to be gone.
pub fn spawn_in_group(
    command: &mut Command,
    options: &SpawnOptions,
) -> Result<GroupChild, SpawnError> {
    let program = command
        .as_std()
        .get_program()
        .to_string_lossy()
        .into_owned();
    command.process_group(0).kill_on_drop(true);
    if options.parent_death_signal {
        arm_parent_death_signal(command);
    }
    let child = command.spawn().map_err(|source| SpawnError {
        command: program.clone(),
        source,
    })?;
    let pid = child.id().ok_or_else(|| SpawnError {
        command: program,
        source: io::Error::other("the child exited before its id was read"),
    })?;
    Ok(GroupChild {
        child,
        pid,
        guard: GroupGuard::new(pid),
    })
}

/// Work for the spawner thread: a closure run inside the caller's runtime.
type SpawnJob = Box<dyn FnOnce() + Send>;

/// The spawner thread's inbox; `None` if the thread could not be started.
static SPAWNER: OnceLock<Option<mpsc::Sender<(SpawnJob, tokio::runtime::Handle)>>> =
    OnceLock::new();

/// Starts `command` like [`spawn_in_group`], but forks on a dedicated thread that lives
/// as long as the process (see [`on_spawner`]).
pub(crate) async fn spawn_in_group_on_spawner(
    mut command: Command,
    options: SpawnOptions,
) -> Result<GroupChild, SpawnError> {
    let program = command
        .as_std()
        .get_program()
        .to_string_lossy()
        .into_owned();
    on_spawner(move || spawn_in_group(&mut command, &options))
        .await
        .unwrap_or_else(|| {
            Err(SpawnError {
                command: program,
                source: io::Error::other("the spawner thread dropped the request"),
            })
        })
}

/// Runs `job` (which starts a child) on a dedicated thread that lives as long as the
/// process, inside the caller's runtime, and returns what it returned (`None` if the
/// thread died meanwhile).
///
/// `PR_SET_PDEATHSIG` fires when the thread that forked the child exits, not the
/// process. Tokio's blocking-pool threads exit when idle, and a worker that enters
/// `block_in_place` may end up in that pool, so a child forked from an arbitrary task
/// could be killed long before the orchestrator exits. The spawner thread never exits,
/// so the signal fires only when the orchestrator dies. Falls back to the calling
/// thread when there is no runtime or the spawner thread could not start. If the
/// caller went away meanwhile, what `job` returned is dropped on the spawner thread
/// (inside the runtime), which kills a child it started.
pub(crate) async fn on_spawner<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (reply, answer) = tokio::sync::oneshot::channel();
    let job: SpawnJob = Box::new(move || drop(reply.send(job())));
    match (tokio::runtime::Handle::try_current(), spawner()) {
        (Ok(runtime), Some(spawner)) => {
            if let Err(mpsc::SendError((job, _))) = spawner.send((job, runtime)) {
                tracing::warn!("the spawner thread is gone; forking on the calling thread");
                job();
            }
        }
        _ => job(),
    }
    answer.await.ok()
}

fn spawner() -> Option<&'static mpsc::Sender<(SpawnJob, tokio::runtime::Handle)>> {
    SPAWNER
        .get_or_init(|| {
            let (sender, inbox) = mpsc::channel::<(SpawnJob, tokio::runtime::Handle)>();
            match std::thread::Builder::new()
                .name("rlm-spawner".to_owned())
                .spawn(move || serve_spawn_requests(&inbox))
            {
                Ok(_) => Some(sender),
                Err(error) => {
                    tracing::warn!(%error, "could not start the spawner thread");
                    None
                }
            }
        })
        .as_ref()
}

fn serve_spawn_requests(inbox: &mpsc::Receiver<(SpawnJob, tokio::runtime::Handle)>) {
    while let Ok((job, runtime)) = inbox.recv() {
        // The child registers with the caller's runtime (child handling, pipes).
        let _runtime = runtime.enter();
        // A panicking job must not end this thread: every child it started would get
        // its parent-death signal. The caller sees its request dropped.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
            tracing::error!("starting a child panicked");
        }
    }
}

#[cfg(target_os = "linux")]
#[expect(
    unsafe_code,
    reason = "pre_exec is the only way to run prctl in the child before exec"
)]
fn arm_parent_death_signal(command: &mut Command) {
    let parent = nix::unistd::getpid();
    let hook = move || -> io::Result<()> {
        // Only async-signal-safe calls here (we are between fork and exec): two raw
        // syscalls and an error built from an errno, which does not allocate.
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
        // The parent may have died before the signal was armed: then nobody would
        // ever send it, so give up instead of running unsupervised.
        if nix::unistd::getppid() != parent {
            return Err(io::Error::from_raw_os_error(nix::libc::ESRCH));
        }
        Ok(())
    };
    // SAFETY: the hook runs in the forked child before exec. It calls only prctl(2)
    // and getppid(2), both async-signal-safe, takes no locks, and does not allocate
    // (io::Error::from(Errno) and from_raw_os_error store the code inline).
    unsafe {
        command.pre_exec(hook);
    }
}

#[cfg(not(target_os = "linux"))]
fn arm_parent_death_signal(_command: &mut Command) {}

/// A running child that leads its own process group.
///
/// Dropping it SIGKILLs the whole group (and `tokio` reaps the leader).
#[derive(Debug)]
pub struct GroupChild {
    child: Child,
    pid: u32,
    guard: GroupGuard,
}

impl GroupChild {
    /// The leader's pid, which is also the group id.
    pub fn id(&self) -> u32 {
        self.pid
    }

    /// The underlying child, e.g. to take its stdio handles.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Sends `signal` to the leader only (e.g. SIGINT to interrupt a REPL without
    /// touching the programs it started). `Ok(false)` if it is gone.
    pub fn signal(&self, signal: Signal) -> Result<bool, SignalError> {
        send_signal(self.pid, signal)
    }

    /// Sends `signal` to every process of the group.
    pub fn signal_group(&self, signal: Signal) -> Result<bool, SignalError> {
        signal_group(self.pid, signal)
    }

    /// SIGKILLs the whole group now, without waiting.
    pub fn kill_group(&self) {
        self.guard.kill_now();
    }

    /// Disarms the guard if the group is empty (nothing left to kill, and the id must
    /// not be signalled once it may be recycled). Returns whether it was disarmed.
    pub(crate) fn disarm_if_gone(&mut self) -> bool {
        if group_exists(self.pid) {
            return false;
        }
        self.guard.disarm();
        true
    }

    /// The leader's exit status if it has exited.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// Waits for the leader to exit (the rest of the group may live on).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Ends the group politely: SIGTERM to the group, up to `grace` for the leader and
    /// the rest of the group to exit, then SIGKILL to whatever is left. Returns the
    /// leader's exit status.
    pub async fn terminate(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        let deadline = Instant::now() + grace;
        if self.child.try_wait()?.is_none() {
            if let Err(error) = self.signal_group(Signal::SIGTERM) {
                tracing::warn!(pgid = self.pid, %error, "could not SIGTERM a process group");
            }
        }
        let status = match timeout(grace, self.child.wait()).await {
            Ok(status) => status?,
            Err(_) => {
                self.kill_group();
                self.child.wait().await?
            }
        };
        // The leader is gone; give the rest of the group what is left of the grace.
        while group_exists(self.pid) && Instant::now() < deadline {
            sleep(GROUP_POLL_INTERVAL).await;
        }
        self.kill_group();
        self.disarm_if_gone();
        Ok(status)
    }
}

#[cfg(test)]
mod tests {
    use std::process::Stdio;

    use rlm_test_support::procs;

    use super::*;

    fn sh(script: &str) -> Command {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        command
    }

    async fn read_pids(child: &mut GroupChild, count: usize) -> Vec<u32> {
        use tokio::io::{AsyncBufReadExt, BufReader};
        let stdout = child.child_mut().stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let mut pids = Vec::new();
        while pids.len() < count {
            let line = lines.next_line().await.unwrap().unwrap();
            pids.push(line.trim().parse().unwrap());
        }
        pids
    }

    /// Upper bound of a wait for a process to end (only reached when a test fails).
    const GONE_LIMIT: Duration = Duration::from_secs(10);

    /// Fails unless `pid` ends (or is a zombie) within [`GONE_LIMIT`].
    async fn wait_gone(pid: u32) {
        assert!(
            procs::wait_gone_async(pid, GONE_LIMIT).await,
            "process {pid} is still running"
        );
    }

    #[tokio::test]
    async fn terminate_ends_background_jobs_too() {
        let mut child = spawn_in_group(
            &mut sh("sleep 100 & echo $!; sleep 100 & echo $!; wait"),
            &SpawnOptions::default(),
        )
        .unwrap();
        let pids = read_pids(&mut child, 2).await;
        let status = child.terminate(Duration::from_secs(5)).await.unwrap();
        assert!(!status.success());
        for pid in pids {
            wait_gone(pid).await;
        }
    }

    #[tokio::test]
    async fn sigterm_ignorers_are_killed_after_the_grace() {
        let mut child = spawn_in_group(
            &mut sh("trap '' TERM; sleep 100 & echo $!; wait"),
            &SpawnOptions::default(),
        )
        .unwrap();
        let pids = read_pids(&mut child, 1).await;
        child.terminate(Duration::from_millis(200)).await.unwrap();
        wait_gone(pids[0]).await;
    }

    #[tokio::test]
    async fn dropping_the_child_kills_the_group() {
        let mut child = spawn_in_group(
            &mut sh("sleep 100 & echo $!; wait"),
            &SpawnOptions::default(),
        )
        .unwrap();
        let leader = child.id();
        let pids = read_pids(&mut child, 1).await;
        drop(child);
        wait_gone(pids[0]).await;
        wait_gone(leader).await;
    }

    #[test]
    fn the_child_dies_with_its_spawning_thread() {
        let pid = std::thread::spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let mut command = sh("sleep 100");
                command.stdout(Stdio::null());
                let child = spawn_in_group(&mut command, &SpawnOptions::default()).unwrap();
                let pid = child.id();
                // No guard and no kill_on_drop: only the parent-death signal can end it.
                std::mem::forget(child);
                pid
            })
        })
        .join()
        .unwrap();
        assert!(
            procs::wait_gone(pid, GONE_LIMIT),
            "process {pid} is still running"
        );
    }

    #[test]
    fn debug_output_shows_environment_names_not_values() {
        let options = SpawnOptions::new("agent")
            .arg("-p")
            .env("OPENAI_API_KEY", "sk-secret")
            .cwd("/tmp");
        let shown = format!("{options:?}");
        assert!(shown.contains("OPENAI_API_KEY"));
        assert!(!shown.contains("sk-secret"));
        let command = options.command();
        let std = command.as_std();
        assert_eq!(std.get_program(), "agent");
        assert_eq!(std.get_args().collect::<Vec<_>>(), ["-p"]);
        assert_eq!(std.get_current_dir(), Some(std::path::Path::new("/tmp")));
        let envs: Vec<_> = std.get_envs().filter(|(_, v)| v.is_some()).collect();
        assert_eq!(envs.len(), 1);
    }

    #[tokio::test]
    async fn a_missing_program_names_itself() {
        let error = spawn_in_group(
            &mut Command::new("/nonexistent/rlm-no-such-program"),
            &SpawnOptions::default(),
        )
        .unwrap_err();
        assert!(error.to_string().contains("rlm-no-such-program"));
        assert_eq!(error.source.kind(), io::ErrorKind::NotFound);
    }
}

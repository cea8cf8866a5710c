//! Starting a supervised child without copying the orchestrator (Linux).
//!
//! `std`'s `Command` forks as soon as a `pre_exec` hook is set (ours arms the
//! parent-death signal), and also whenever the child's `PATH` is not ours. `fork()`
//! copies the page tables of the whole orchestrator, write-protects every page of it
//! for copy-on-write (the parent then takes a fault, and a TLB shoot-down, on its next
//! write to each), and the child throws all of it away at `exec`: about 1 ms of CPU per
//! child for an 18 MiB orchestrator, on the one spawner thread. 200 trivial agents
//! spent more time in `fork` than in running.
//!
//! [`launch`] does what `posix_spawn` does, `clone(CLONE_VM | CLONE_VFORK)`, plus the
//! one step `posix_spawn` cannot: `PR_SET_PDEATHSIG`. The child borrows the parent's
//! memory until `execve` (the spawning thread is suspended meanwhile), so the cost no
//! longer grows with the orchestrator. Between `clone` and `execve` the child runs on
//! a small stack of its own inside the parent's address space, so it makes raw system
//! calls only: no allocation, no locks, no Rust runtime. Everything it needs (the
//! resolved program path, argv, envp, file descriptors) is prepared beforehand by the
//! parent, and a failure is reported by storing `errno` in memory the parent reads
//! when `clone` returns.
//!
//! The exit is awaited through a pidfd (`CLONE_PIDFD`) registered with tokio, and the
//! child is reaped with `waitpid(pid)`: nothing here needs `SIGCHLD` or `waitpid(-1)`.
//! Where pidfds are missing (Linux < 5.3) or `clone` refuses these flags (a seccomp
//! filter), [`available`] turns false and callers use `std`'s `Command`.

use std::cell::RefCell;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;

use nix::libc::{self, c_char, c_int, c_void};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::net::unix::pipe;

use crate::group::SpawnOptions;
use crate::guard::GroupGuard;
use crate::signal::group_exists;

/// Bytes of stack for the child between `clone` and `execve` (it needs a few hundred;
/// a guard page below catches an overflow).
const CHILD_STACK_BYTES: usize = 64 * 1024;

/// `PATH` used when the child's environment has none (glibc's `execvp` default).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// The shell that runs a file `execve` rejects with `ENOEXEC` (a script without a
/// `#!` line), as `execvp` does.
const FALLBACK_SHELL: &CStr = c"/bin/sh";

/// Set when `clone` rejected our flags: later children use `std`'s `Command`.
static CLONE_REFUSED: AtomicBool = AtomicBool::new(false);

/// Whether [`launch`] can be used here: pidfds exist and `clone` has not refused.
pub(crate) fn available() -> bool {
    static PIDFDS: OnceLock<bool> = OnceLock::new();
    !CLONE_REFUSED.load(Ordering::Relaxed) && *PIDFDS.get_or_init(pidfds_work)
}

fn pidfds_work() -> bool {
    crate::procfs::open_pidfd(std::process::id()).is_ok()
}

/// Why [`launch`] failed.
#[derive(Debug)]
pub(crate) enum LaunchError {
    /// This system refuses the way [`launch`] starts children (a seccomp filter, an old
    /// kernel): start it with `std`'s `Command` instead. [`available`] is false from
    /// now on.
    Unsupported(io::Error),
    /// This child cannot be started (not found, not executable, out of resources…).
    Failed(io::Error),
}

impl From<io::Error> for LaunchError {
    fn from(error: io::Error) -> Self {
        LaunchError::Failed(error)
    }
}

/// A child ready to be started: everything converted to C strings up front, because
/// the child may not allocate.
pub(crate) struct LaunchSpec {
    /// The program as found on `PATH`.
    path: CString,
    /// `argv[0]` is the program as given.
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: Option<CString>,
    parent_death_signal: bool,
    pipe_stdin: bool,
}

impl LaunchSpec {
    /// `spawn`'s program, arguments, environment (plus `extra_env`, which wins over a
    /// variable of the same name) and working directory. Fails like `execvp` would
    /// (`NotFound`, `PermissionDenied`) if the program is not on the child's `PATH`,
    /// or with `InvalidInput` for a NUL byte.
    pub(crate) fn new(
        spawn: &SpawnOptions,
        extra_env: &[(OsString, OsString)],
        pipe_stdin: bool,
    ) -> io::Result<Self> {
        let mut env: Vec<(&OsStr, &OsStr)> = Vec::with_capacity(spawn.env.len() + 1);
        for (name, value) in spawn.env.iter().chain(extra_env) {
            match env.iter_mut().find(|(n, _)| *n == name.as_os_str()) {
                Some(entry) => entry.1 = value,
                None => env.push((name, value)),
            }
        }
        let search_path = env
            .iter()
            .find(|(name, _)| *name == "PATH")
            .map_or(OsStr::new(DEFAULT_PATH), |(_, value)| value);
        let path = find_program(&spawn.program, search_path, spawn.cwd.as_deref())?;
        let mut argv = Vec::with_capacity(spawn.args.len() + 1);
        argv.push(c_string(spawn.program.as_bytes())?);
        for arg in &spawn.args {
            argv.push(c_string(arg.as_bytes())?);
        }
        let envp = env
            .iter()
            .map(|(name, value)| {
                let mut entry = Vec::with_capacity(name.len() + value.len() + 1);
                entry.extend_from_slice(name.as_bytes());
                entry.push(b'=');
                entry.extend_from_slice(value.as_bytes());
                c_string(&entry)
            })
            .collect::<io::Result<_>>()?;
        let cwd = match &spawn.cwd {
            Some(dir) => Some(c_string(dir.as_os_str().as_bytes())?),
            None => None,
        };
        Ok(Self {
            path: c_string(path.as_os_str().as_bytes())?,
            argv,
            envp,
            cwd,
            parent_death_signal: spawn.parent_death_signal,
            pipe_stdin,
        })
    }
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "nul byte found in provided data",
        )
    })
}

/// The file `execvp` would run for `program`: itself if it contains a `/`, else the
/// first executable regular file named so in a directory of `search_path` (relative
/// directories, and the empty one meaning `.`, count from the child's `cwd`).
fn find_program(program: &OsStr, search_path: &OsStr, cwd: Option<&Path>) -> io::Result<PathBuf> {
    if program.is_empty() {
        return Err(io::Error::from(io::ErrorKind::NotFound));
    }
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    let mut denied = false;
    for dir in std::env::split_paths(search_path) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = match cwd {
            Some(cwd) if dir.is_relative() => cwd.join(dir).join(program),
            _ => dir.join(program),
        };
        match std::fs::metadata(&candidate) {
            Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o111 != 0 => {
                return Ok(candidate)
            }
            Ok(meta) if meta.is_file() => denied = true,
            _ => {}
        }
    }
    Err(io::Error::from(if denied {
        io::ErrorKind::PermissionDenied
    } else {
        io::ErrorKind::NotFound
    }))
}

/// A child started by [`launch`]: leader of its own process group, with its pipes.
///
/// Dropped before its exit was collected, it `SIGKILL`s the group and reaps the
/// leader in the background (as `tokio`'s `kill_on_drop` does for its children).
#[derive(Debug)]
pub(crate) struct Launched {
    pid: u32,
    pidfd: Option<AsyncFd<OwnedFd>>,
    guard: GroupGuard,
    status: Option<ExitStatus>,
    /// The write end of its stdin, if it was asked for.
    pub stdin: Option<pipe::Sender>,
    /// The read end of its stdout.
    pub stdout: Option<pipe::Receiver>,
    /// The read end of its stderr.
    pub stderr: Option<pipe::Receiver>,
}

impl Launched {
    /// The leader's pid, which is also the group id.
    pub(crate) fn id(&self) -> u32 {
        self.pid
    }

    /// Waits for the leader to exit and reaps it (the rest of the group may live on).
    /// Cancel-safe.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.status {
                return Ok(status);
            }
            let Some(pidfd) = &self.pidfd else {
                return Err(io::Error::other("the child's pidfd is gone"));
            };
            let mut ready = pidfd.readable().await?;
            match reap(self.pid, false)? {
                Some(status) => self.status = Some(status),
                None => ready.clear_ready(),
            }
        }
    }

    /// `SIGKILL`s the whole group now, without waiting.
    pub(crate) fn kill_group(&self) {
        self.guard.kill_now();
    }

    /// Disarms the guard if the group is empty. Only meaningful once the leader has
    /// been reaped (its zombie keeps the group alive).
    pub(crate) fn disarm_if_gone(&mut self) {
        if !group_exists(self.pid) {
            self.guard.disarm();
        }
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        // During a graceful stop the guard's drop ends the group politely instead.
        if !crate::registry::stopping() {
            self.guard.kill_now();
        }
        if let Ok(Some(_)) = reap(self.pid, false) {
            // Reaped: the id may be recycled once the group is empty.
            self.disarm_if_gone();
            return;
        }
        let (pid, pidfd) = (self.pid, self.pidfd.take());
        if let (Ok(runtime), Some(pidfd)) = (tokio::runtime::Handle::try_current(), pidfd) {
            runtime.spawn(async move {
                while reap(pid, false).ok().flatten().is_none() {
                    match pidfd.readable().await {
                        Ok(mut ready) => ready.clear_ready(),
                        Err(_) => break,
                    }
                }
            });
        } else {
            // No runtime to wait on: block a short-lived thread instead (it was just
            // sent SIGKILL, so this ends as soon as the kernel lets it).
            let spawned = std::thread::Builder::new()
                .name("rlm-reaper".to_owned())
                .spawn(move || reap(pid, true));
            if let Err(error) = spawned {
                tracing::warn!(pid, %error, "could not reap a killed child; it stays a zombie");
            }
        }
    }
}

/// `waitpid(pid)`: the exit status once the child has exited (and is reaped), `None`
/// while it runs (unless `block`).
fn reap(pid: u32, block: bool) -> io::Result<Option<ExitStatus>> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    let flags = if block { 0 } else { libc::WNOHANG };
    let mut status: c_int = 0;
    loop {
        // SAFETY: waitpid writes one int through a valid pointer.
        #[expect(unsafe_code, reason = "waitpid on our own child by pid")]
        let reaped = unsafe { libc::waitpid(pid, &mut status, flags) };
        match reaped {
            0 => return Ok(None),
            -1 => {
                let error = io::Error::last_os_error();
                if error.kind() != io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
            _ => return Ok(Some(ExitStatus::from_raw(status))),
        }
    }
}

/// Starts `spec` as the leader of a new process group, with stdout and stderr piped
/// and stdin piped or `/dev/null`. Must run inside a tokio runtime, on a thread that
/// outlives the child (the parent-death signal fires when the spawning thread exits).
pub(crate) fn launch(spec: &LaunchSpec) -> Result<Launched, LaunchError> {
    let (stdin_child, stdin_parent) = if spec.pipe_stdin {
        let (read, write) = pipe_cloexec()?;
        (read, Some(write))
    } else {
        (OwnedFd::from(std::fs::File::open("/dev/null")?), None)
    };
    let (stdout_parent, stdout_child) = pipe_cloexec()?;
    let (stderr_parent, stderr_child) = pipe_cloexec()?;
    // dup2 onto 0, 1, 2 in order must not overwrite a source: keep sources above 2.
    let stdio = [
        above_stdio(stdin_child)?,
        above_stdio(stdout_child)?,
        above_stdio(stderr_child)?,
    ];

    let argv = null_terminated(spec.argv.iter().map(|a| a.as_ptr()));
    let envp = null_terminated(spec.envp.iter().map(|e| e.as_ptr()));
    let shell_argv = null_terminated(
        [FALLBACK_SHELL.as_ptr(), spec.path.as_ptr()]
            .into_iter()
            .chain(spec.argv.iter().skip(1).map(|a| a.as_ptr())),
    );
    let args = ChildArgs {
        path: spec.path.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        shell_argv: shell_argv.as_ptr(),
        cwd: spec.cwd.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
        stdio: [
            stdio[0].as_raw_fd(),
            stdio[1].as_raw_fd(),
            stdio[2].as_raw_fd(),
        ],
        parent: nix::unistd::getpid().as_raw(),
        parent_death_signal: spec.parent_death_signal,
        errno: AtomicI32::new(0),
    };
    let (pid, pidfd) = clone_child(&args)?;
    let guard = GroupGuard::new(pid);
    drop(stdio);

    let failed = args.errno.load(Ordering::Relaxed);
    if failed != 0 {
        // The child gave up before exec and has exited (vfork returns only then).
        let mut child = Launched {
            pid,
            pidfd: None,
            guard,
            status: None,
            stdin: None,
            stdout: None,
            stderr: None,
        };
        child.status = reap(pid, true)?;
        child.disarm_if_gone();
        return Err(io::Error::from_raw_os_error(failed).into());
    }
    // SAFETY: an OwnedFd stays open, and is the same descriptor, until the AsyncFd
    // drops it.
    #[expect(
        unsafe_code,
        reason = "tokio's AsyncFd::register is unsafe (the descriptor must stay open)"
    )]
    let registered = unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) };
    let mut child = Launched {
        pid,
        pidfd: None,
        guard,
        status: None,
        stdin: None,
        stdout: None,
        stderr: None,
    };
    match registered {
        Ok(pidfd) => child.pidfd = Some(pidfd),
        Err(error) => {
            let (_, error) = error.into_parts();
            child.kill_group();
            child.status = reap(pid, true)?;
            child.disarm_if_gone();
            return Err(error.into());
        }
    }
    // From here on, dropping `child` kills and reaps it.
    child.stdin = stdin_parent.map(pipe::Sender::from_owned_fd).transpose()?;
    child.stdout = Some(pipe::Receiver::from_owned_fd(stdout_parent)?);
    child.stderr = Some(pipe::Receiver::from_owned_fd(stderr_parent)?);
    Ok(child)
}

fn null_terminated<'a>(items: impl Iterator<Item = *const c_char> + 'a) -> Vec<*const c_char> {
    items.chain(std::iter::once(std::ptr::null())).collect()
}

fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds: [c_int; 2] = [-1, -1];
    // SAFETY: pipe2 writes two descriptors into a valid array.
    #[expect(
        unsafe_code,
        reason = "pipe2 without a safe wrapper in our nix features"
    )]
    let result = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned these descriptors; nothing else owns them.
    #[expect(unsafe_code, reason = "taking ownership of new descriptors")]
    let pair = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok(pair)
}

/// `fd` itself if it is above 2, else a close-on-exec duplicate that is.
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > libc::STDERR_FILENO {
        return Ok(fd);
    }
    // SAFETY: fcntl on a descriptor we own; it returns a new one or -1.
    #[expect(unsafe_code, reason = "fcntl F_DUPFD_CLOEXEC")]
    let dup = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor; nothing else owns it.
    #[expect(unsafe_code, reason = "taking ownership of a new descriptor")]
    let dup = unsafe { OwnedFd::from_raw_fd(dup) };
    Ok(dup)
}

/// What the child reads between `clone` and `execve` (all prepared by the parent).
struct ChildArgs {
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    shell_argv: *const *const c_char,
    /// Null for "stay where the parent is".
    cwd: *const c_char,
    /// Descriptors (all above 2) that become the child's 0, 1 and 2.
    stdio: [c_int; 3],
    parent: libc::pid_t,
    parent_death_signal: bool,
    /// Set by the child to the `errno` of the step that failed.
    errno: AtomicI32,
}

/// A page-aligned stack with a guard page below, reused by every child started from
/// the same thread (the thread is suspended until the child no longer uses it).
struct ChildStack {
    base: *mut c_void,
    len: usize,
}

impl ChildStack {
    #[expect(
        unsafe_code,
        reason = "mmap and mprotect of a private anonymous mapping"
    )]
    fn new() -> io::Result<Self> {
        // SAFETY: sysconf reads a constant.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|&p| p > 0)
            .unwrap_or(4096);
        let len = CHILD_STACK_BYTES + page;
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Self { base, len };
        // SAFETY: the lowest page of the mapping we just made becomes inaccessible, so
        // an overflowing child faults instead of writing below its stack.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The initial stack pointer (stacks grow down), 16-byte aligned.
    fn top(&self) -> *mut c_void {
        let top = self.base as usize + self.len;
        (top & !15) as *mut c_void
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; no child uses it any more
        // (each one ran until exec or exit before `clone` returned).
        #[expect(unsafe_code, reason = "munmap of our own mapping")]
        unsafe {
            libc::munmap(self.base, self.len);
        }
    }
}

thread_local! {
    static CHILD_STACK: RefCell<Option<ChildStack>> = const { RefCell::new(None) };
}

/// Clones the child, which runs [`child_main`] until `execve` or `_exit`. Returns its
/// pid and pidfd.
fn clone_child(args: &ChildArgs) -> Result<(u32, OwnedFd), LaunchError> {
    CHILD_STACK.with(|cell| {
        let mut slot = cell.borrow_mut();
        let stack = match &mut *slot {
            Some(stack) => stack,
            empty => empty.insert(ChildStack::new()?),
        };
        let mut pidfd: c_int = -1;
        let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD;
        #[expect(
            unsafe_code,
            reason = "clone(CLONE_VM | CLONE_VFORK) is what posix_spawn does"
        )]
        // SAFETY: all signals are blocked around clone so no handler of ours runs in
        // the child (it shares our memory); the child resets dispositions before
        // unblocking. The stack is ours alone (this thread is suspended until the
        // child execs or exits, and the stack is per thread). `args` and everything it
        // points to outlive the call for the same reason. The child only makes
        // async-signal-safe system calls (see child_main).
        let (pid, clone_error) = unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut previous: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
            let pid = libc::clone(
                child_main,
                stack.top(),
                flags,
                std::ptr::from_ref(args).cast_mut().cast::<c_void>(),
                &mut pidfd as *mut c_int,
            );
            let clone_error = io::Error::last_os_error();
            libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
            (pid, clone_error)
        };
        if pid < 0 {
            if matches!(
                clone_error.raw_os_error(),
                Some(libc::ENOSYS | libc::EINVAL | libc::EPERM)
            ) {
                CLONE_REFUSED.store(true, Ordering::Relaxed);
                return Err(LaunchError::Unsupported(clone_error));
            }
            return Err(clone_error.into());
        }
        // SAFETY: CLONE_PIDFD stored a new descriptor that nothing else owns.
        #[expect(unsafe_code, reason = "taking ownership of the pidfd clone returned")]
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
        let pid = u32::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
        Ok((pid, pidfd))
    })
}

/// The child, from `clone` to `execve`. Runs in the parent's memory on its own stack
/// with every signal blocked: only async-signal-safe system calls, no allocation, no
/// locks, no unwinding. Never returns.
#[expect(unsafe_code, reason = "the child side of clone(CLONE_VM)")]
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the ChildArgs the parent passed; it stays valid because the
    // parent's thread is suspended until this child execs or exits.
    let args = unsafe { &*arg.cast::<ChildArgs>() };
    // SAFETY: see prepare_and_exec.
    let errno = unsafe { prepare_and_exec(args) };
    args.errno.store(errno.max(1), Ordering::Relaxed);
    // SAFETY: _exit ends the child without running anything of the parent's.
    unsafe { libc::_exit(127) }
}

/// Returns only on failure, with the `errno` of the failed step.
///
/// # Safety
/// Only from [`child_main`]: everything `args` points to must be valid.
#[expect(unsafe_code, reason = "raw system calls in the vforked child")]
unsafe fn prepare_and_exec(args: &ChildArgs) -> c_int {
    // SAFETY (for the block): plain system calls on memory of this stack or prepared
    // by the parent; errno is read from the (suspended) parent thread's slot.
    unsafe {
        // Handlers of the parent must never run here (they would run on the parent's
        // memory): back to the default for every handled signal, and for SIGPIPE,
        // which Rust ignores but children expect at its default (as std does).
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        for signal in 1..65 {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let mut current: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut current) != 0 {
                continue;
            }
            let handled =
                current.sa_sigaction != libc::SIG_DFL && current.sa_sigaction != libc::SIG_IGN;
            if handled || signal == libc::SIGPIPE {
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
        if libc::setpgid(0, 0) != 0 {
            return errno();
        }
        if args.parent_death_signal {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return errno();
            }
            // The parent may have died before the signal was armed: then nobody would
            // ever send it, so give up instead of running unsupervised.
            if libc::getppid() != args.parent {
                return libc::ESRCH;
            }
        }
        for (target, source) in args.stdio.iter().enumerate() {
            if libc::dup2(*source, target as c_int) < 0 {
                return errno();
            }
        }
        if !args.cwd.is_null() && libc::chdir(args.cwd) != 0 {
            return errno();
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execve(args.path, args.argv, args.envp);
        let failed = errno();
        if failed == libc::ENOEXEC {
            libc::execve(FALLBACK_SHELL.as_ptr(), args.shell_argv, args.envp);
        }
        failed
    }
}

/// The calling thread's `errno`.
fn errno() -> c_int {
    nix::errno::Errno::last_raw()
}

#[cfg(test)]
mod tests {
    use rlm_test_support::procs;

    use super::*;

    #[test]
    fn programs_are_found_like_execvp_finds_them() {
        let sh = find_program(
            OsStr::new("sh"),
            OsStr::new("/nonexistent:/bin:/usr/bin"),
            None,
        )
        .unwrap();
        assert!(sh.ends_with("sh"));
        assert!(sh.is_absolute());
        assert_eq!(
            find_program(OsStr::new("./x"), OsStr::new("/bin"), None).unwrap(),
            PathBuf::from("./x")
        );
        let missing = find_program(OsStr::new("rlm-no-such-program"), OsStr::new("/bin"), None);
        assert_eq!(missing.unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_non_executable_file_is_permission_denied() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tool"), "#!/bin/sh\n").unwrap();
        let found = find_program(OsStr::new("tool"), dir.path().as_os_str(), None);
        assert_eq!(found.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
    }

    #[test]
    fn later_environment_entries_win() {
        let spawn = SpawnOptions::new("sh")
            .env("A", "1")
            .env("PATH", "/bin:/usr/bin");
        let spec = LaunchSpec::new(&spawn, &[("A".into(), "2".into())], false).unwrap();
        let envp: Vec<_> = spec.envp.iter().map(|e| e.to_str().unwrap()).collect();
        assert_eq!(envp, ["A=2", "PATH=/bin:/usr/bin"]);
        assert_eq!(spec.argv[0].to_str().unwrap(), "sh");
    }

    #[test]
    fn a_launched_child_dies_with_its_spawning_thread() {
        let pid = std::thread::spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let spawn = SpawnOptions::new("sleep")
                    .arg("100")
                    .env("PATH", DEFAULT_PATH);
                let child = launch(&LaunchSpec::new(&spawn, &[], false).unwrap()).unwrap();
                let pid = child.id();
                // No guard, no reaping: only the parent-death signal can end it.
                std::mem::forget(child);
                pid
            })
        })
        .join()
        .unwrap();
        assert!(
            procs::wait_gone(pid, std::time::Duration::from_secs(20)),
            "{pid} survived"
        );
        assert!(reap(pid, true).unwrap().is_some());
    }

    #[tokio::test]
    async fn a_dropped_child_is_killed_and_reaped() {
        let spawn = SpawnOptions::new("sleep")
            .arg("100")
            .env("PATH", DEFAULT_PATH);
        let child = launch(&LaunchSpec::new(&spawn, &[], true).unwrap()).unwrap();
        let pid = child.id();
        drop(child);
        let start = std::time::Instant::now();
        // Gone from /proc entirely: killed and reaped (not left a zombie).
        while std::path::Path::new(&format!("/proc/{pid}")).exists() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(20),
                "{pid} not reaped"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn stdio_reaches_the_child() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let spawn = SpawnOptions::new("sh")
            .args(["-c", "read line; echo \"got $line\"; echo oops >&2; exit 7"])
            .env("PATH", DEFAULT_PATH);
        let mut child = launch(&LaunchSpec::new(&spawn, &[], true).unwrap()).unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"hello\n").await.unwrap();
        drop(stdin);
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .await
            .unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .await
            .unwrap();
        let status = child.wait().await.unwrap();
        assert_eq!(
            (out.as_str(), err.as_str(), status.code()),
            ("got hello\n", "oops\n", Some(7))
        );
        child.disarm_if_gone();
    }
}

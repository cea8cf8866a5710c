//! The watchdog: what ends a run's processes when the orchestrator itself is killed.
//!
//! Parent-death signals reach only direct children, and the orchestrator's own clean-up
//! does not run after `kill -9`. So a run marks its whole tree with a *tree cookie*
//! (added to [`SUPERVISION_COOKIE_ENV`](crate::SUPERVISION_COOKIE_ENV) before anything
//! starts, inherited by the kernel, agents, nested runs and whatever they start) and
//! starts a small watchdog process, `rlm-orchestrate watchdog COOKIE`, holding the
//! write end of a pipe to it. However the orchestrator ends, the pipe closes; the
//! watchdog then `SIGKILL`s every process still carrying the cookie (including those
//! that left their group with `setsid`), repeats until none is left, and exits. After a
//! normal end there is nothing left to find.
//!
//! The watchdog carries no cookie itself and leads its own process group, so neither a
//! supervisor's sweep nor a terminal's Ctrl-C ends it early. Where a cgroup v2
//! hierarchy is writable the run also lives in a cgroup of its own (see
//! [`cgroup`](crate::cgroup)), given to the watchdog as a second argument and emptied
//! (`cgroup.kill`) and removed after the sweep: that also finds a process that cleared
//! its environment before escaping, which the cookie sweep cannot.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::procfs;
use crate::supervise::SUPERVISION_COOKIE_ENV;

/// The binary's hidden sub-command that runs [`watchdog_main`].
pub const WATCHDOG_SUBCOMMAND: &str = "watchdog";

/// How long the watchdog keeps sweeping after the orchestrator is gone.
const SWEEP_FOR: Duration = Duration::from_secs(5);
/// Pause between sweeps.
const SWEEP_PAUSE: Duration = Duration::from_millis(20);

/// The pipe to the watchdog, held for the life of the process.
static WATCHDOG: OnceLock<Mutex<Option<std::process::ChildStdin>>> = OnceLock::new();
/// This process's tree cookie, once its watchdog started.
static OWN_COOKIE: OnceLock<String> = OnceLock::new();
/// How long the watchdog waits for one clean-up command.
const CLEANUP_WAIT: Duration = Duration::from_secs(5);

/// The file of clean-up commands the watchdog of `cookie` runs once it has swept.
fn cleanup_file(cookie: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rlm-watchdog-{cookie}.cleanup"))
}

/// Asks this process's watchdog to run `argv` once this process is gone (after its
/// sweep), for what no signal reaches: a Slurm job whose `srun` was killed with us
/// (`scancel --name=…`). Commands run whatever way the process ended, so they must be
/// harmless when there is nothing left to clean. Does nothing without a watchdog.
pub fn run_at_exit(argv: &[&str]) {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let Some(cookie) = OWN_COOKIE.get() else {
        return;
    };
    // One command a line, its arguments separated by NUL.
    if argv.is_empty() || argv.iter().any(|arg| arg.contains(['\0', '\n'])) {
        return;
    }
    let line = argv.join("\0");
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(cleanup_file(cookie))
        .and_then(|mut file| writeln!(file, "{line}"));
    if let Err(error) = appended {
        tracing::warn!(%error, "could not register a clean-up command with the watchdog");
    }
}

/// Marks this process's future children with a tree cookie and starts the watchdog
/// (`program` is the `rlm-orchestrate` executable). Call it first thing in `main`, while
/// the process has one thread (it changes the environment). Returns the tree cookie.
pub fn start_watchdog(program: &Path) -> std::io::Result<String> {
    // Unique even if our pid was used before: the pid and the start time.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let cookie = format!("{}.t{nanos}", std::process::id());
    let mut chain = std::env::var_os(SUPERVISION_COOKIE_ENV).unwrap_or_default();
    if !chain.is_empty() {
        chain.push(":");
    }
    chain.push(&cookie);
    std::env::set_var(SUPERVISION_COOKIE_ENV, &chain);
    // The run's cgroup: made before the watchdog starts (it is told where), entered
    // after (the watchdog stays outside, so killing the cgroup spares it).
    let tree = crate::cgroup::create(&cookie);
    let mut command = Command::new(program);
    command.arg(WATCHDOG_SUBCOMMAND).arg(&cookie);
    if let Some(dir) = &tree {
        command.arg(dir);
    }
    let spawned = command
        .env_remove(SUPERVISION_COOKIE_ENV)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => {
            if let Some(dir) = &tree {
                crate::cgroup::discard(dir);
            }
            return Err(error);
        }
    };
    if let Some(dir) = &tree {
        if let Err(error) = crate::cgroup::enter(dir) {
            tracing::debug!(path = %dir.display(), %error, "could not enter the run's cgroup; escaped descendants are found by their cookie only");
            // The watchdog removes the (empty) directory when we are gone.
        }
    }
    let stdin = child.stdin.take();
    *WATCHDOG
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = stdin;
    // The watchdog outlives us by design; it is reaped by whoever adopts it.
    drop(child);
    let _ = OWN_COOKIE.set(cookie.clone());
    Ok(cookie)
}

/// The watchdog itself: waits until its stdin closes (the orchestrator is gone), then
/// ends every process carrying the cookie given as its argument. Returns the exit code.
pub fn watchdog_main(args: &[OsString]) -> u8 {
    let (cookie, tree) = match args {
        [cookie] => (cookie, None),
        [cookie, tree] => (cookie, Some(Path::new(tree))),
        _ => return 2,
    };
    let cookie = cookie.to_string_lossy().into_owned();
    let mut sink = [0u8; 512];
    let mut stdin = std::io::stdin().lock();
    loop {
        match stdin.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    sweep(&cookie);
    if let Some(tree) = tree {
        // Whatever is left in the run's cgroup escaped with a cleared environment.
        crate::cgroup::kill_and_remove(tree);
    }
    run_cleanups(&cookie);
    0
}

/// Runs the commands registered with [`run_at_exit`], each once and for at most
/// [`CLEANUP_WAIT`], then removes their file.
fn run_cleanups(cookie: &str) {
    let path = cleanup_file(cookie);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return;
    };
    let mut seen = std::collections::HashSet::new();
    for line in text.lines().filter(|line| seen.insert(*line)) {
        let argv: Vec<&str> = line.split('\0').collect();
        let Some((program, args)) = argv.split_first() else {
            continue;
        };
        let Ok(mut child) = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        else {
            continue;
        };
        let started = Instant::now();
        while started.elapsed() < CLEANUP_WAIT {
            if !matches!(child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(SWEEP_PAUSE);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = std::fs::remove_file(path);
}

/// `SIGKILL`s every carrier of `cookie` until two sweeps in a row find none, or
/// [`SWEEP_FOR`] passes.
fn sweep(cookie: &str) {
    let cookies = [cookie.to_owned()];
    let deadline = Instant::now() + SWEEP_FOR;
    let mut quiet = 0;
    while quiet < 2 && Instant::now() < deadline {
        let found = procfs::carriers(&cookies);
        if found.is_empty() {
            quiet += 1;
        } else {
            quiet = 0;
            for pid in found {
                procfs::signal_carrier(pid, &cookies, Signal::SIGKILL);
            }
        }
        std::thread::sleep(SWEEP_PAUSE);
    }
}

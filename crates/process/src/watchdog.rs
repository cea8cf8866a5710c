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
//! supervisor's sweep nor a terminal's Ctrl-C ends it early. Limits: a process that
//! clears its environment before escaping is not found (as for the supervisor).

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
    let mut child = Command::new(program)
        .arg(WATCHDOG_SUBCOMMAND)
        .arg(&cookie)
        .env_remove(SUPERVISION_COOKIE_ENV)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    let stdin = child.stdin.take();
    *WATCHDOG
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = stdin;
    // The watchdog outlives us by design; it is reaped by whoever adopts it.
    drop(child);
    Ok(cookie)
}

/// The watchdog itself: waits until its stdin closes (the orchestrator is gone), then
/// ends every process carrying the cookie given as its argument. Returns the exit code.
pub fn watchdog_main(args: &[OsString]) -> u8 {
    let [cookie] = args else {
        return 2;
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
    0
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

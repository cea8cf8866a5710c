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
//! its environment before escaping, which the cookie sweep cannot. Where there is none,
//! the root of a run tree says so once.
//!
//! What no signal reaches (a Slurm job, a kernel's temporary directory) the run tells
//! the watchdog over that same pipe ([`orders`]): nothing on disk is read, nothing runs
//! through a shell, and clean-up commands run inside the run's cgroup, which is killed
//! after them. Should the watchdog be `kill -9`ed too, the run's live record under the
//! data directory ([`record`]) lets a later run or `runs prune` end what is left
//! ([`reap`]).

mod cleanup;
mod orders;
mod reap;
mod record;

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::procfs;
use crate::supervise::SUPERVISION_COOKIE_ENV;
use orders::Order;
use record::{LiveDir, LiveRecord, OwnRecord, ProcessId};

pub use reap::{reap_dead_runs, ReapOptions, Reaped, ReapedRun};
pub use record::{RecordError, LIVE_DIR};

/// The binary's hidden sub-command that runs [`watchdog_main`].
pub const WATCHDOG_SUBCOMMAND: &str = "watchdog";

/// The name every directory given to [`remove_at_exit`] starts with.
pub const TEMP_DIR_PREFIX: &str = "rlm-";

/// How long the watchdog keeps sweeping after the orchestrator is gone.
const SWEEP_FOR: Duration = Duration::from_secs(5);
/// Pause between sweeps.
const SWEEP_PAUSE: Duration = Duration::from_millis(20);

/// The pipe to the watchdog, held for the life of the process.
static WATCHDOG: OnceLock<Mutex<Option<std::process::ChildStdin>>> = OnceLock::new();
/// This process's live record, once written.
static RECORD: OnceLock<Mutex<OwnRecord>> = OnceLock::new();

/// Marks this process's future children with a tree cookie and starts the watchdog
/// (`program` is the `rlm-orchestrate` executable). With `data_dir`, the run is also
/// recorded under `<data_dir>/live/` until its watchdog is done, for [`reap_dead_runs`].
/// Call it first thing in `main`, while the process has one thread (it changes the
/// environment). Returns the tree cookie.
pub fn start_watchdog(program: &Path, data_dir: Option<&Path>) -> std::io::Result<String> {
    // Unique even if our pid was used before: the pid and the start time.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let cookie = format!("{}.t{nanos}", std::process::id());
    let mut chain = std::env::var_os(SUPERVISION_COOKIE_ENV).unwrap_or_default();
    let root_of_tree = chain.is_empty();
    if !root_of_tree {
        chain.push(":");
    }
    chain.push(&cookie);
    std::env::set_var(SUPERVISION_COOKIE_ENV, &chain);
    // The run's cgroup: made before the watchdog starts (it is told where), entered
    // after (the watchdog stays outside, so killing the cgroup spares it).
    let made = crate::cgroup::create(&cookie);
    let mut command = Command::new(program);
    command.arg(WATCHDOG_SUBCOMMAND).arg(&cookie);
    if let Ok(dir) = &made {
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
            if let Ok(dir) = &made {
                crate::cgroup::discard(dir);
            }
            return Err(error);
        }
    };
    // A cgroup we cannot enter holds nothing: removed at once (the watchdog, told of
    // it, then finds nothing there).
    let tree = made.and_then(|dir| {
        crate::cgroup::enter(&dir)
            .map(|()| dir.clone())
            .inspect_err(|_| {
                crate::cgroup::discard(&dir);
            })
    });
    if let Err(why) = &tree {
        if root_of_tree {
            tracing::warn!(
                "{why}; processes of this run that clear their environment and leave its process groups cannot be caught when it ends: run as root, or give this user a writable cgroup v2 subtree"
            );
        } else {
            tracing::debug!(%why, "no cgroup for this nested run");
        }
    }
    let watchdog = ProcessId::of(child.id());
    *WATCHDOG
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = child.stdin.take();
    // The watchdog outlives us by design; it is reaped by whoever adopts it.
    drop(child);
    if let Some(data_dir) = data_dir {
        record_run(data_dir, &cookie, watchdog, tree.ok());
    }
    Ok(cookie)
}

/// Writes this run's live record and tells the watchdog to remove it when done.
fn record_run(data_dir: &Path, cookie: &str, watchdog: Option<ProcessId>, tree: Option<PathBuf>) {
    let written = LiveDir::create(data_dir)
        .and_then(|dir| OwnRecord::create(dir, LiveRecord::new(cookie, watchdog, tree)));
    match written {
        Ok(own) => {
            send(&Order::Record { path: own.path() });
            let _ = RECORD.set(Mutex::new(own));
        }
        Err(error) => tracing::debug!(
            %error,
            "no live-run record: if this run and its watchdog are both killed, nothing will find what they leave"
        ),
    }
}

/// Asks this process's watchdog to run `argv` (no shell) once this process is gone,
/// after its sweep, for what no signal reaches: a Slurm job whose `srun` was killed with
/// us (`scancel --name=…`). Commands run whatever way the process ended, so they must be
/// harmless when there is nothing left to clean. Does nothing without a watchdog.
pub fn run_at_exit(argv: &[&str]) {
    if argv.is_empty() || argv.iter().any(|arg| arg.contains('\0')) {
        return;
    }
    send(&Order::Run {
        argv: argv.iter().map(|arg| (*arg).to_owned()).collect(),
    });
}

/// Asks this process's watchdog to remove `dir` (a temporary directory whose name
/// starts with [`TEMP_DIR_PREFIX`]) once this process is gone, and records it so a
/// later run removes it should the watchdog be killed too. Removing it first is fine.
pub fn remove_at_exit(dir: &Path) {
    let named = dir
        .file_name()
        .is_some_and(|name| name.to_string_lossy().starts_with(TEMP_DIR_PREFIX));
    let Some(dir) = std::path::absolute(dir).ok().filter(|_| named) else {
        tracing::debug!(path = %dir.display(), "not a temporary directory of rlm's: not removed at exit");
        return;
    };
    send(&Order::RemoveDir { path: dir.clone() });
    if let Some(own) = RECORD.get() {
        let added = own
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .add_temp_dir(&dir);
        if let Err(error) = added {
            tracing::debug!(%error, "could not add a temporary directory to the live-run record");
        }
    }
}

/// Removes this run's live record: for the normal end of `main`, once everything of
/// the run has been ended ([`end_tree`](crate::end_tree)), so that a watchdog killed
/// while it cleans up leaves no record of a run that left nothing. The watchdog still
/// carries out its orders.
pub fn forget_live_record() {
    if let Some(own) = RECORD.get() {
        own.lock().unwrap_or_else(PoisonError::into_inner).remove();
    }
}

/// Writes `order` to the watchdog, if there is one.
fn send(order: &Order) {
    let Some(pipe) = WATCHDOG.get() else {
        return;
    };
    let mut pipe = pipe.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(stdin) = pipe.as_mut() {
        if let Err(error) = orders::write_order(stdin, order) {
            // Said once: a killed watchdog would fail every later order the same way.
            static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
            if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                tracing::warn!(%error, "could not give the watchdog a clean-up order: if this run is killed, a later run or `runs prune` ends what it leaves");
            }
        }
    }
}

/// The watchdog itself: reads its orders until its stdin closes (the orchestrator is
/// gone), ends every process carrying the cookie given as its argument, empties the
/// run's cgroup, carries out the orders, and removes the cgroup and the live record.
/// Returns the exit code.
pub fn watchdog_main(args: &[OsString]) -> u8 {
    // Other processes of the user (the run's own among them) may not open our fds
    // (the read end of the pipe) or read our memory through /proc.
    let _ = nix::sys::prctl::set_dumpable(false);
    let (cookie, tree) = match args {
        [cookie] => (cookie, None),
        [cookie, tree] => (cookie, Some(Path::new(tree))),
        _ => return 2,
    };
    let cookie = cookie.to_string_lossy().into_owned();
    let (orders, _problem) = orders::read_until_closed(&mut std::io::stdin().lock());
    sweep(&cookie);
    if let Some(tree) = tree {
        // Whatever is left in the run's cgroup escaped with a cleared environment.
        crate::cgroup::kill_members(tree);
    }
    cleanup::carry_out(&orders, tree);
    if let Some(tree) = tree {
        // And whatever the clean-up commands started.
        crate::cgroup::kill_and_remove(tree);
    }
    cleanup::remove_records(&orders);
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

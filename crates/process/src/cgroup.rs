//! A cgroup (v2) holding every process of a run, so descendants are found whatever
//! they did to escape: a new session (`setsid`), a double fork that reparents them to
//! PID 1, *and* a cleared environment (which drops the supervision cookie the `/proc`
//! sweeps look for). Membership of a cgroup is inherited on fork and cannot be left
//! without write access to the cgroup file system.
//!
//! [`start_watchdog`](crate::start_watchdog) creates `rlm-<tree cookie>` under the
//! process's own cgroup, starts the watchdog outside it, then moves the process in;
//! every child inherits it. [`end_tree`] (the end of `main`, the second Ctrl-C)
//! `SIGKILL`s every member but the process itself; the watchdog, after the process is
//! gone however it ended (`kill -9` included), writes `cgroup.kill` and removes the
//! directory. A nested run makes its cgroup inside its parent's, so a parent's
//! clean-up reaches its children's trees too.
//!
//! Where no cgroup v2 hierarchy is mounted writable (not root, a read-only
//! `/sys/fs/cgroup`), nothing here is used and the cookie sweeps are all there is.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

/// This process's run cgroup, once [`enter`] moved it in.
static TREE: OnceLock<PathBuf> = OnceLock::new();

/// How long [`end_tree`] and [`kill_and_remove`] keep killing until the cgroup empties.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// Pause between two looks at the cgroup.
const POLL: Duration = Duration::from_millis(10);

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` on hybrid systems), from `/proc/self/mountinfo`.
fn mount_point() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|line| {
        let (fields, rest) = line.split_once(" - ")?;
        let fstype = rest.split_whitespace().next()?;
        (fstype == "cgroup2").then(|| fields.split_whitespace().nth(4).map(PathBuf::from))?
    })
}

/// This process's cgroup v2 path (the `0::` line of `/proc/self/cgroup`).
fn own_path() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(|path| path.trim().to_owned())
}

/// Creates the run's cgroup `rlm-<cookie>` under this process's own; `None` (logged)
/// where cgroup v2 is not available or not writable.
pub(crate) fn create(cookie: &str) -> Option<PathBuf> {
    let mount = mount_point()?;
    let own = own_path()?;
    let dir = mount
        .join(own.trim_start_matches('/'))
        .join(format!("rlm-{cookie}"));
    match std::fs::create_dir(&dir) {
        Ok(()) => Some(dir),
        Err(error) => {
            tracing::debug!(path = %dir.display(), %error, "no cgroup for the run; escaped descendants are found by their cookie only");
            None
        }
    }
}

/// Moves this process into `dir` (made by [`create`]); its children are born there.
pub(crate) fn enter(dir: &Path) -> io::Result<()> {
    std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string())?;
    let _ = TREE.set(dir.to_owned());
    Ok(())
}

/// Removes a cgroup made by [`create`] that could not be used.
pub(crate) fn discard(dir: &Path) {
    let _ = std::fs::remove_dir(dir);
}

/// The pids in `dir` and every cgroup below it.
fn members(dir: &Path) -> Vec<u32> {
    let mut pids: Vec<u32> = std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect();
    for sub in subdirs(dir) {
        pids.extend(members(&sub));
    }
    pids
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// `SIGKILL`s every process of this run's cgroup (nested runs' cgroups included) but
/// this process, until none is left or a few seconds pass. Call it when the run is
/// over (the end of `main`, a second Ctrl-C): whatever is still there escaped every
/// supervisor. Does nothing where the run has no cgroup. Returns how many were killed.
pub fn end_tree() -> usize {
    let Some(dir) = TREE.get() else {
        return 0;
    };
    let own = std::process::id();
    let deadline = Instant::now() + KILL_WAIT;
    let mut killed = 0;
    loop {
        let others: Vec<u32> = members(dir).into_iter().filter(|&pid| pid != own).collect();
        if others.is_empty() || Instant::now() >= deadline {
            break;
        }
        for pid in others {
            // A member that is our own unreaped child stays listed until it is reaped
            // by us; it is dead already, and SIGKILL does no harm.
            if let Ok(true) = crate::signal::send_signal(pid, Signal::SIGKILL) {
                killed += 1;
            }
        }
        if members(dir).iter().all(|&pid| pid == own || is_zombie(pid)) {
            break;
        }
        std::thread::sleep(POLL);
    }
    if killed > 0 {
        tracing::debug!(killed, "ended processes that escaped every supervisor");
    }
    killed
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_none_or(|state| state == "Z" || state == "X")
    })
}

/// For the watchdog once the run is gone: kills everything in `dir` (with
/// `cgroup.kill` where the kernel has it, else member by member), waits until it is
/// empty, and removes it with the cgroups nested in it.
pub(crate) fn kill_and_remove(dir: &Path) {
    let deadline = Instant::now() + KILL_WAIT;
    loop {
        let left = members(dir);
        if left.is_empty() || Instant::now() >= deadline {
            break;
        }
        if std::fs::write(dir.join("cgroup.kill"), "1").is_err() {
            for pid in left {
                let _ = crate::signal::send_signal(pid, Signal::SIGKILL);
            }
        }
        std::thread::sleep(POLL);
    }
    remove_all(dir);
}

/// Removes `dir` and the cgroups below it, deepest first.
fn remove_all(dir: &Path) {
    for sub in subdirs(dir) {
        remove_all(&sub);
    }
    let _ = std::fs::remove_dir(dir);
}

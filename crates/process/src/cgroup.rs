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
//! directory; should the watchdog be killed too, a later run or `runs prune` does
//! ([`reap_dead_runs`](crate::reap_dead_runs)). A nested run makes its cgroup inside
//! its parent's, so a parent's clean-up reaches its children's trees too.
//!
//! Where no cgroup v2 hierarchy is mounted writable (not root, a read-only
//! `/sys/fs/cgroup`), nothing here is used and the cookie sweeps are all there is; the
//! root of the run tree says so once ([`Unavailable`] says why).

use std::collections::HashSet;
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
pub(crate) fn mount_point() -> Option<PathBuf> {
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

/// Why a run has no cgroup of its own.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unavailable {
    /// No cgroup v2 hierarchy is mounted.
    #[error("no cgroup v2 hierarchy is mounted")]
    NotMounted,
    /// `/proc/self/cgroup` names no cgroup v2 path.
    #[error("this process's cgroup v2 path is unknown")]
    NoOwnPath,
    /// The directory could not be made (a read-only hierarchy, no permission).
    #[error("failed to create {} (is cgroup v2 read-only, or not delegated to this user?): {source}", path.display())]
    Create {
        /// The run's cgroup.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// This process could not move into it.
    #[error("failed to move into {}: {source}", path.display())]
    Enter {
        /// The run's cgroup.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// Creates the run's cgroup `rlm-<cookie>` under this process's own, or says why
/// there is none (cgroup v2 not mounted, or not writable).
pub(crate) fn create(cookie: &str) -> Result<PathBuf, Unavailable> {
    let mount = mount_point().ok_or(Unavailable::NotMounted)?;
    let own = own_path().ok_or(Unavailable::NoOwnPath)?;
    let dir = mount
        .join(own.trim_start_matches('/'))
        .join(format!("rlm-{cookie}"));
    match std::fs::create_dir(&dir) {
        Ok(()) => Ok(dir),
        Err(source) => Err(Unavailable::Create { path: dir, source }),
    }
}

/// Moves this process into `dir` (made by [`create`]); its children are born there.
pub(crate) fn enter(dir: &Path) -> Result<(), Unavailable> {
    enter_inner(dir).map_err(|source| Unavailable::Enter {
        path: dir.to_owned(),
        source,
    })
}

fn enter_inner(dir: &Path) -> io::Result<()> {
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

/// Once the run is gone (its watchdog, or a later run reaping a dead one): kills
/// everything in `dir` and below (with `cgroup.kill` where the kernel has it, else
/// member by member) until it is empty or a few seconds pass. Returns the pids that
/// were in it.
pub(crate) fn kill_members(dir: &Path) -> HashSet<u32> {
    let deadline = Instant::now() + KILL_WAIT;
    let mut seen = HashSet::new();
    loop {
        let left: Vec<u32> = members(dir)
            .into_iter()
            .filter(|&pid| !is_zombie(pid))
            .collect();
        if left.is_empty() || Instant::now() >= deadline {
            break;
        }
        seen.extend(left.iter().copied());
        if std::fs::write(dir.join("cgroup.kill"), "1").is_err() {
            for pid in left {
                let _ = crate::signal::send_signal(pid, Signal::SIGKILL);
            }
        }
        std::thread::sleep(POLL);
    }
    seen
}

/// [`kill_members`], then removes `dir` with the cgroups nested in it. Returns the
/// pids that were in it and whether the directory is gone.
pub(crate) fn kill_and_remove(dir: &Path) -> (HashSet<u32>, bool) {
    let killed = kill_members(dir);
    remove_all(dir);
    (killed, !dir.exists())
}

/// Removes `dir` and the cgroups below it, deepest first.
fn remove_all(dir: &Path) {
    for sub in subdirs(dir) {
        remove_all(&sub);
    }
    let _ = std::fs::remove_dir(dir);
}

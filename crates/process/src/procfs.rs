//! Finding a child's leftovers in `/proc`, and signalling them without hitting a
//! stranger.
//!
//! A process group is not a container: a grandchild that calls `setsid()` (a daemon, a
//! double fork) leaves the group, and `killpg` no longer reaches it. Every supervised
//! child therefore carries a *cookie* in its environment
//! ([`SUPERVISION_COOKIE_ENV`](crate::SUPERVISION_COOKIE_ENV)), which its descendants
//! inherit whatever group or session they move to. After the child is done, the
//! supervisor scans `/proc/<pid>/environ` for processes still carrying that cookie and
//! ends them (the technique of Jenkins' `ProcessTreeKiller`). A process that clears its
//! environment escapes this; that is the documented limit.
//!
//! Scanning every process costs about 1.5 ms for 90 processes, which was more than a
//! trivial agent's whole run; [`quick_check`] usually shows that nothing is left by
//! reading only the pids handed out since the child started. A process in the middle of
//! `execve` briefly shows an empty environment; such processes are reported as
//! unsettled so the supervisor looks again rather than miss a carrier.
//!
//! Between the scan and the signal a pid could be recycled, so signals go through a
//! pidfd: the pid is opened first, the cookie checked again, and the signal sent to the
//! opened process (a recycled pid then gets nothing).

use std::fs;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::signal::send_signal;

/// A process seen in `/proc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcessInfo {
    /// Its pid.
    pub pid: u32,
    /// What its `stat` says.
    pub stat: Stat,
}

/// The fields of `/proc/<pid>/stat` used here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    /// Its process group.
    pub pgrp: u32,
    /// Dead and waiting for its parent to reap it: it runs nothing.
    pub zombie: bool,
    /// A kernel thread (no memory, so no environment, of its own).
    pub kthread: bool,
    /// When it started, in clock ticks since boot.
    pub start_ticks: u64,
}

/// `PF_KTHREAD` in the `flags` field of `stat`.
const PF_KTHREAD: u64 = 0x0020_0000;

/// Every process currently listed in `/proc` (empty where there is no `/proc`).
pub(crate) fn processes() -> Vec<ProcessInfo> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            Some(ProcessInfo {
                pid,
                stat: stat(pid)?,
            })
        })
        .collect()
}

/// The `stat` of `pid`; `None` once it is gone.
pub(crate) fn stat(pid: u32) -> Option<Stat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The fields of a `/proc/<pid>/stat` line: `pid (comm) state ppid pgrp session tty
/// tpgid flags … starttime …`, where `comm` may itself contain spaces and parentheses.
fn parse_stat(stat: &str) -> Option<Stat> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().take(20).collect();
    let state = *fields.first()?;
    Some(Stat {
        pgrp: fields.get(2)?.parse().ok()?,
        zombie: state == "Z" || state == "X",
        kthread: fields
            .get(6)
            .and_then(|f| f.parse::<u64>().ok())
            .is_some_and(|flags| flags & PF_KTHREAD != 0),
        start_ticks: fields.get(19).and_then(|f| f.parse().ok()).unwrap_or(0),
    })
}

/// The value of `name` in the environment `pid` was started with.
pub(crate) fn environ_var(pid: u32, name: &str) -> Option<Vec<u8>> {
    let environ = fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{name}=");
    environ
        .split(|b| *b == 0)
        .find_map(|entry| entry.strip_prefix(prefix.as_bytes()))
        .map(<[u8]>::to_vec)
}

/// Whether a cookie chain (`a:b:c`, ancestors first) contains `cookie`.
pub(crate) fn chain_contains(chain: &[u8], cookie: &str) -> bool {
    chain.split(|b| *b == b':').any(|c| c == cookie.as_bytes())
}

/// Whether `pid` was started with a cookie chain containing any of `cookies`.
pub(crate) fn carries_any(pid: u32, cookies: &[String]) -> bool {
    environ_var(pid, crate::SUPERVISION_COOKIE_ENV)
        .is_some_and(|chain| cookies.iter().any(|c| chain_contains(&chain, c)))
}

/// What a process's environment says about a cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CookieCheck {
    /// It carries the cookie.
    Carried,
    /// It does not (or it is gone, or a zombie, or unreadable).
    Absent,
    /// A live user process whose environment reads empty: it is in the middle of
    /// `execve` (the new memory is in place, the environment not yet), or it was
    /// started with no environment at all. Look again shortly.
    Unsettled,
}

/// Reads the environment of `pid` for `cookie`; `stat` if already read.
pub(crate) fn cookie_of(pid: u32, cookie: &str, stat: Option<Stat>) -> CookieCheck {
    let Ok(environ) = fs::read(format!("/proc/{pid}/environ")) else {
        return CookieCheck::Absent;
    };
    if environ.is_empty() {
        return match stat.or_else(|| self::stat(pid)) {
            Some(stat) if !stat.zombie && !stat.kthread => CookieCheck::Unsettled,
            _ => CookieCheck::Absent,
        };
    }
    let prefix = format!("{}=", crate::SUPERVISION_COOKIE_ENV);
    let carried = environ
        .split(|b| *b == 0)
        .filter_map(|entry| entry.strip_prefix(prefix.as_bytes()))
        .any(|chain| chain_contains(chain, cookie));
    if carried {
        CookieCheck::Carried
    } else {
        CookieCheck::Absent
    }
}

/// What is still running of a supervised child: members of its group and carriers of
/// its cookie (not zombies, never this process).
#[derive(Debug, Default)]
pub(crate) struct Leftovers {
    /// Running processes whose group is the child's.
    pub in_group: Vec<u32>,
    /// Running processes outside the group that carry the cookie.
    pub escaped: Vec<u32>,
    /// Processes started since the child whose environment cannot be read yet
    /// ([`CookieCheck::Unsettled`]): they may turn out to be carriers.
    pub unsettled: Vec<u32>,
}

impl Leftovers {
    /// Nothing is known to be left (there may be [`Leftovers::unsettled`] ones).
    pub fn is_empty(&self) -> bool {
        self.in_group.is_empty() && self.escaped.is_empty()
    }
}

/// Scans `/proc` for what is left of the group `pgid` and the carriers of `cookie`.
/// Processes started at or after `since` (clock ticks since boot) with an environment
/// that cannot be read yet are listed as unsettled.
pub(crate) fn leftovers(pgid: u32, cookie: &str, since: Option<u64>) -> Leftovers {
    let own = std::process::id();
    let mut found = Leftovers::default();
    let all = processes();
    if all.is_empty() {
        // No /proc: only the group can be checked.
        if crate::group_exists(pgid) {
            found.in_group.push(pgid);
        }
        return found;
    }
    for ProcessInfo { pid, stat } in all {
        if stat.zombie || pid == own {
            continue;
        }
        if stat.pgrp == pgid {
            found.in_group.push(pid);
            continue;
        }
        match cookie_of(pid, cookie, Some(stat)) {
            CookieCheck::Carried => found.escaped.push(pid),
            CookieCheck::Unsettled if since.is_some_and(|since| stat.start_ticks >= since) => {
                found.unsettled.push(pid);
            }
            CookieCheck::Unsettled | CookieCheck::Absent => {}
        }
    }
    found
}

/// What the pid allocator had done before a child was started, so that the processes
/// created since can be told apart by pid alone ([`quick_check`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PidWindow {
    /// Tasks (processes and threads) ever created on the machine (`processes` in
    /// `/proc/stat`).
    forks: u64,
    /// Tasks alive (the total in `/proc/loadavg`).
    tasks: u64,
    /// The time, in the clock ticks of `stat`'s `starttime`.
    pub start_ticks: u64,
}

/// pids below this are not handed out again once the allocator has wrapped (the
/// kernel's `RESERVED_PIDS`).
const RESERVED_PIDS: u64 = 300;

/// A [`PidWindow`] younger than this is reused for the next child. An older snapshot
/// is as valid, only more cautious: the bound of [`quick_check`] counts every task
/// created since it was taken, which includes the tasks alive at the child's start
/// that it did not see.
const PID_WINDOW_REUSE: Duration = Duration::from_millis(50);

/// At most this many pids are looked at one by one; past it (a long-lived child on a
/// busy machine) the full scan is about as cheap.
const MAX_PROBED_PIDS: u64 = 512;

/// Times the interval is extended to catch processes created while it was probed.
const MAX_PROBE_PASSES: usize = 8;

impl PidWindow {
    /// Reads the counters (or reuses a recent reading); call it before the child
    /// exists. `None` without `/proc`.
    pub(crate) fn open() -> Option<Self> {
        static RECENT: Mutex<Option<(Instant, PidWindow)>> = Mutex::new(None);
        let mut recent = RECENT.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((taken, window)) = *recent {
            if taken.elapsed() < PID_WINDOW_REUSE {
                return Some(window);
            }
        }
        let window = Self {
            start_ticks: boot_ticks()?,
            forks: forks_since_boot()?,
            tasks: tasks_alive()?,
        };
        *recent = Some((Instant::now(), window));
        Some(window)
    }
}

/// What [`quick_check`] could tell.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Quick {
    /// Nothing of the child is left.
    NothingLeft,
    /// Nothing, except processes whose environment could not be read yet
    /// ([`CookieCheck::Unsettled`]): check again shortly.
    Unsettled,
    /// Something may be left: scan everything with [`leftovers`].
    Unknown,
}

/// Whether anything of a supervised child can still be running: processes of the
/// group `pgid` (its reaped leader's pid), or processes created since `window` that
/// carry `cookie`.
///
/// This keeps the clean-up after every agent cheap. [`leftovers`] reads `stat` and
/// `environ` of every process on the machine (about 1.5 ms for 90 processes). But a
/// descendant of the child was created after it, and Linux hands out pids in
/// increasing order, wrapping at `pid_max`: unless the allocator came all the way
/// round, every process created since the child has a pid in the cyclic interval
/// (`pgid`, `ns_last_pid`], and only those few pids need their environment read. The
/// interval is probed, then extended to the new `ns_last_pid` until no pid was handed
/// out during a pass, so a descendant that forks and exits meanwhile is caught through
/// its child (as a scan of `/proc` in pid order would).
///
/// Whether the allocator came round is bounded from two counters. In the window its
/// cursor moved once per allocation plus once per id it skipped as in use; ids in use
/// belong to tasks (alive at the start, or created since) or to dead group and session
/// leaders that live tasks still name, at most two per task. So it moved at most
/// `4 × allocations + 3 × tasks alive at the start` positions, and allocations are at
/// most the tasks created on the machine. Below the span of a cycle, no wrap happened.
///
/// Limit: a process created with a chosen pid (`clone3` with `set_tid`, or a write to
/// `ns_last_pid`; both need `CAP_CHECKPOINT_RESTORE`) is outside this ordering, as a
/// process that clears its environment is outside the cookie.
pub(crate) fn quick_check(pgid: u32, cookie: &str, window: Option<PidWindow>) -> Quick {
    if crate::group_exists(pgid) {
        return Quick::Unknown;
    }
    let (Some(window), Some(pid_max)) = (window, read_number("/proc/sys/kernel/pid_max")) else {
        return Quick::Unknown;
    };
    let own = u64::from(std::process::id());
    let next = |pid: u64| {
        if pid + 1 >= pid_max {
            RESERVED_PIDS
        } else {
            pid + 1
        }
    };
    let mut probed_to = u64::from(pgid);
    let mut probed = 0;
    let mut unsettled = false;
    for _ in 0..MAX_PROBE_PASSES {
        let Some(last) = read_number("/proc/sys/kernel/ns_last_pid") else {
            return Quick::Unknown;
        };
        if last == probed_to {
            // Nothing was created during the last pass. Counted after reading `last`,
            // the forks include every allocation up to it.
            let Some(forks) = forks_since_boot() else {
                return Quick::Unknown;
            };
            let allocations = forks.saturating_sub(window.forks);
            let travel = allocations
                .saturating_mul(4)
                .saturating_add(window.tasks.saturating_mul(3));
            return match (travel < pid_max.saturating_sub(RESERVED_PIDS), unsettled) {
                (false, _) => Quick::Unknown,
                (true, false) => Quick::NothingLeft,
                (true, true) => Quick::Unsettled,
            };
        }
        let span = if last > probed_to {
            last - probed_to
        } else if last >= RESERVED_PIDS && probed_to < pid_max {
            // Wrapped: up to pid_max - 1, then from RESERVED_PIDS.
            (pid_max - 1 - probed_to) + (last + 1 - RESERVED_PIDS)
        } else {
            return Quick::Unknown;
        };
        probed += span;
        if probed > MAX_PROBED_PIDS || last >= pid_max {
            return Quick::Unknown;
        }
        let mut pid = probed_to;
        for _ in 0..span {
            pid = next(pid);
            if pid == own {
                continue;
            }
            let Ok(pid) = u32::try_from(pid) else {
                return Quick::Unknown;
            };
            // Threads' ids answer too, with their process's environment: harmless.
            match cookie_of(pid, cookie, None) {
                CookieCheck::Carried => return Quick::Unknown,
                CookieCheck::Unsettled => unsettled = true,
                CookieCheck::Absent => {}
            }
        }
        probed_to = last;
    }
    Quick::Unknown
}

/// Now, in the clock ticks (`USER_HZ`) of `stat`'s `starttime`: the boot-time clock,
/// rounded down.
#[cfg(target_os = "linux")]
fn boot_ticks() -> Option<u64> {
    let mut now = nix::libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer; sysconf reads
    // a constant.
    #[expect(
        unsafe_code,
        reason = "CLOCK_BOOTTIME and CLK_TCK have no safe wrapper in our nix features"
    )]
    let (status, hz) = unsafe {
        (
            nix::libc::clock_gettime(nix::libc::CLOCK_BOOTTIME, &mut now),
            nix::libc::sysconf(nix::libc::_SC_CLK_TCK),
        )
    };
    let hz = u64::try_from(hz).ok().filter(|&hz| hz > 0)?;
    if status != 0 {
        return None;
    }
    let nanos = u128::from(u64::try_from(now.tv_sec).ok()?) * 1_000_000_000
        + u128::from(u64::try_from(now.tv_nsec).ok()?);
    u64::try_from(nanos * u128::from(hz) / 1_000_000_000).ok()
}

#[cfg(not(target_os = "linux"))]
fn boot_ticks() -> Option<u64> {
    None
}

fn read_number(path: &str) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// `processes` of `/proc/stat`: tasks created since boot.
fn forks_since_boot() -> Option<u64> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|line| line.strip_prefix("processes "))?
        .trim()
        .parse()
        .ok()
}

/// The task total of `/proc/loadavg` (`0.00 0.01 0.05 1/123 4567`).
fn tasks_alive() -> Option<u64> {
    let loadavg = fs::read_to_string("/proc/loadavg").ok()?;
    loadavg
        .split_ascii_whitespace()
        .nth(3)?
        .split_once('/')?
        .1
        .parse()
        .ok()
}

/// Opens a pidfd for `pid` (Linux 5.3+).
#[cfg(target_os = "linux")]
pub(crate) fn open_pidfd(pid: u32) -> std::io::Result<std::os::fd::OwnedFd> {
    pidfd::open(pid)
}

/// Every running process (not this one) carrying any of `cookies`.
pub(crate) fn carriers(cookies: &[String]) -> Vec<u32> {
    if cookies.is_empty() {
        return Vec::new();
    }
    let own = std::process::id();
    processes()
        .into_iter()
        .filter(|p| !p.stat.zombie && p.pid != own && carries_any(p.pid, cookies))
        .map(|p| p.pid)
        .collect()
}

/// Sends `signal` to `pid` if it (still) carries one of `cookies`. `true` if sent.
pub(crate) fn signal_carrier(pid: u32, cookies: &[String], signal: Signal) -> bool {
    match pidfd::open(pid) {
        Ok(fd) => {
            // Checked after opening: the pidfd names the process that had the pid at
            // open time, so if this check sees a newer process the pidfd's target is
            // already dead and the signal below goes nowhere.
            if !carries_any(pid, cookies) {
                return false;
            }
            match pidfd::send_signal(&fd, signal) {
                Ok(()) => true,
                Err(error) if error.raw_os_error() == Some(nix::libc::ESRCH) => false,
                Err(error) => {
                    tracing::warn!(pid, %error, "could not signal a stray process");
                    false
                }
            }
        }
        Err(error) if error.raw_os_error() == Some(nix::libc::ESRCH) => false,
        Err(_) => {
            // No pidfds (old kernel): check and signal by pid.
            carries_any(pid, cookies) && send_signal(pid, signal).unwrap_or(false)
        }
    }
}

#[cfg(target_os = "linux")]
mod pidfd {
    //! `pidfd_open(2)` and `pidfd_send_signal(2)`, which neither `nix` nor `std` wrap.

    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

    use nix::libc;
    use nix::sys::signal::Signal;

    /// Opens a pidfd for `pid`.
    #[expect(unsafe_code, reason = "raw syscall without a safe wrapper")]
    pub(super) fn open(pid: u32) -> io::Result<OwnedFd> {
        let pid =
            libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
        // SAFETY: pidfd_open takes two integers and returns a new descriptor or -1; no
        // memory is shared with the kernel.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0 as libc::c_uint) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = RawFd::try_from(fd).map_err(|_| io::Error::other("pidfd out of range"))?;
        // SAFETY: the kernel just returned this descriptor; nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Sends `signal` to the process behind `fd`.
    #[expect(unsafe_code, reason = "raw syscall without a safe wrapper")]
    pub(super) fn send_signal(fd: &OwnedFd, signal: Signal) -> io::Result<()> {
        // SAFETY: a valid descriptor, a signal number, a null siginfo (allowed: the
        // kernel fills in a default one) and zero flags.
        let result = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd.as_raw_fd(),
                signal as libc::c_int,
                std::ptr::null::<libc::siginfo_t>(),
                0 as libc::c_uint,
            )
        };
        if result < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
mod pidfd {
    //! No pidfds here: callers fall back to checking and signalling by pid.

    use std::io;

    use nix::sys::signal::Signal;

    pub(super) struct Fd;

    pub(super) fn open(_pid: u32) -> io::Result<Fd> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }

    pub(super) fn send_signal(_fd: &Fd, _signal: Signal) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let line = "123 (a) b) c) S 1 456 456 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 98765 0";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                pgrp: 456,
                zombie: false,
                kthread: false,
                start_ticks: 98765
            })
        );
        let kworker = "9 (kworker/0:1) I 2 0 0 0 -1 69238880 0 0 0 0 0 0 0 0 20 0 1 0 5 0";
        assert!(parse_stat(kworker).unwrap().kthread);
        assert!(parse_stat("7 (sh) Z 1 7 7").unwrap().zombie);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn cookie_chains_match_whole_elements() {
        assert!(chain_contains(b"1.2:3.4", "3.4"));
        assert!(chain_contains(b"3.4", "3.4"));
        assert!(!chain_contains(b"13.4", "3.4"));
        assert!(!chain_contains(b"", "3.4"));
    }

    #[test]
    fn this_process_is_listed() {
        let own = std::process::id();
        assert!(processes().iter().any(|p| p.pid == own && !p.stat.zombie));
    }
}

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
//! Between the scan and the signal a pid could be recycled, so signals go through a
//! pidfd: the pid is opened first, the cookie checked again, and the signal sent to the
//! opened process (a recycled pid then gets nothing).

use std::fs;

use nix::sys::signal::Signal;

use crate::signal::send_signal;

/// A process seen in `/proc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcessInfo {
    /// Its pid.
    pub pid: u32,
    /// Its process group.
    pub pgrp: u32,
    /// Dead and waiting for its parent to reap it: it runs nothing.
    pub zombie: bool,
}

/// Every process currently listed in `/proc` (empty where there is no `/proc`).
pub(crate) fn processes() -> Vec<ProcessInfo> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (zombie, pgrp) = parse_stat(&stat)?;
            Some(ProcessInfo { pid, pgrp, zombie })
        })
        .collect()
}

/// `(zombie, pgrp)` from a `/proc/<pid>/stat` line: `pid (comm) state ppid pgrp …`,
/// where `comm` may itself contain spaces and parentheses.
fn parse_stat(stat: &str) -> Option<(bool, u32)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state == "Z" || state == "X", pgrp))
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

/// What is still running of a supervised child: members of its group and carriers of
/// its cookie (not zombies, never this process).
#[derive(Debug, Default)]
pub(crate) struct Leftovers {
    /// Running processes whose group is the child's.
    pub in_group: Vec<u32>,
    /// Running processes outside the group that carry the cookie.
    pub escaped: Vec<u32>,
}

impl Leftovers {
    /// Nothing is left.
    pub fn is_empty(&self) -> bool {
        self.in_group.is_empty() && self.escaped.is_empty()
    }
}

/// Scans `/proc` for what is left of the group `pgid` and the carriers of `cookie`.
pub(crate) fn leftovers(pgid: u32, cookie: &str) -> Leftovers {
    let own = std::process::id();
    let cookies = [cookie.to_owned()];
    let mut found = Leftovers::default();
    let all = processes();
    if all.is_empty() {
        // No /proc: only the group can be checked.
        if crate::group_exists(pgid) {
            found.in_group.push(pgid);
        }
        return found;
    }
    for process in all {
        if process.zombie || process.pid == own {
            continue;
        }
        if process.pgrp == pgid {
            found.in_group.push(process.pid);
        } else if carries_any(process.pid, &cookies) {
            found.escaped.push(process.pid);
        }
    }
    found
}

/// Every running process (not this one) carrying any of `cookies`.
pub(crate) fn carriers(cookies: &[String]) -> Vec<u32> {
    if cookies.is_empty() {
        return Vec::new();
    }
    let own = std::process::id();
    processes()
        .into_iter()
        .filter(|p| !p.zombie && p.pid != own && carries_any(p.pid, cookies))
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
        assert_eq!(
            parse_stat("123 (a) b) c) S 1 456 456 0 -1"),
            Some((false, 456))
        );
        assert_eq!(parse_stat("7 (sh) Z 1 7 7"), Some((true, 7)));
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
        assert!(processes().iter().any(|p| p.pid == own && !p.zombie));
    }
}

//! Looking at processes from a test: is this pid still running, wait (bounded) until
//! some pids are gone, which processes of a group or a session are still alive.
//!
//! rlm's promise that no child outlives it is checked by tests that start real
//! processes and then look for survivors. They all need the same two subtleties, so
//! they live here once:
//!
//! - A zombie counts as gone. It has ended and runs nothing; it only waits for its
//!   parent to reap it, and an orphan's new parent may never do so (PID 1 in a
//!   container is often a program that does not reap orphans).
//! - "Gone" is polled for with a time limit, never assumed after a fixed sleep: the
//!   limit is only reached when the test is about to fail, and the caller reports
//!   which pids survived.
//!
//! On Linux everything is read from `/proc`; elsewhere [`running`] falls back to
//! `kill(pid, 0)`, which cannot tell a zombie from a running process.

use std::time::{Duration, Instant};

/// How long the `wait_*` functions sleep between two looks.
pub const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// True when `pid` exists and is not a zombie (or dead, state `X`).
pub fn running(pid: u32) -> bool {
    #[cfg(target_os = "linux")]
    {
        stat(pid).is_some_and(|stat| !stat.ended())
    }
    #[cfg(not(target_os = "linux"))]
    {
        use nix::errno::Errno;
        use nix::sys::signal::kill;
        use nix::unistd::Pid;
        let Ok(raw) = i32::try_from(pid) else {
            return false;
        };
        matches!(kill(Pid::from_raw(raw), None), Ok(()) | Err(Errno::EPERM))
    }
}

/// The pids of `pids` that are still [`running`], in the order given.
pub fn survivors(pids: &[u32]) -> Vec<u32> {
    pids.iter().copied().filter(|&pid| running(pid)).collect()
}

/// Blocks until `pid` is no longer [`running`] or `timeout` has passed; true when it
/// is gone.
pub fn wait_gone(pid: u32, timeout: Duration) -> bool {
    wait_all_gone(&[pid], timeout).is_empty()
}

/// Blocks until none of `pids` is [`running`] or `timeout` has passed; returns the
/// survivors (empty when all are gone).
pub fn wait_all_gone(pids: &[u32], timeout: Duration) -> Vec<u32> {
    let start = Instant::now();
    loop {
        let left = survivors(pids);
        if left.is_empty() || start.elapsed() >= timeout {
            return left;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// [`wait_gone`] for async tests: sleeps on the tokio timer instead of blocking the
/// runtime's thread.
pub async fn wait_gone_async(pid: u32, timeout: Duration) -> bool {
    wait_all_gone_async(&[pid], timeout).await.is_empty()
}

/// [`wait_all_gone`] for async tests: sleeps on the tokio timer instead of blocking
/// the runtime's thread.
pub async fn wait_all_gone_async(pids: &[u32], timeout: Duration) -> Vec<u32> {
    let start = Instant::now();
    loop {
        let left = survivors(pids);
        if left.is_empty() || start.elapsed() >= timeout {
            return left;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// The running (non-zombie) processes whose process group is `pgid`, sorted.
#[cfg(target_os = "linux")]
pub fn group_members(pgid: u32) -> Vec<u32> {
    live_where(|stat| stat.pgrp == pgid)
}

/// The running (non-zombie) processes whose session is `sid`, sorted. A child that
/// left its process group with `setsid` starts a session of its own, so it is not
/// among them either.
#[cfg(target_os = "linux")]
pub fn session_members(sid: u32) -> Vec<u32> {
    live_where(|stat| stat.session == sid)
}

/// The fields of `/proc/<pid>/stat` used here.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    state: char,
    pgrp: u32,
    session: u32,
}

#[cfg(target_os = "linux")]
impl Stat {
    /// A zombie (`Z`) or dead (`X`) process: it has ended.
    fn ended(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

#[cfg(target_os = "linux")]
fn stat(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Parses `pid (comm) state ppid pgrp session …`. The command name may contain spaces
/// and parentheses, so the fields are counted from its last `)`.
#[cfg(target_os = "linux")]
fn parse_stat(line: &str) -> Option<Stat> {
    let (_, rest) = line.rsplit_once(')')?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    Some(Stat {
        state,
        pgrp: fields.next()?.parse().ok()?,
        session: fields.next()?.parse().ok()?,
    })
}

/// Running processes whose stat passes `keep`, sorted by pid.
#[cfg(target_os = "linux")]
fn live_where(keep: impl Fn(&Stat) -> bool) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = dir
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&pid| stat(pid).is_some_and(|stat| !stat.ended() && keep(&stat)))
        .collect();
    pids.sort_unstable();
    pids
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    use super::*;

    const LIMIT: Duration = Duration::from_secs(20);

    fn sleeper(own_group: bool) -> std::process::Child {
        let mut command = Command::new("sleep");
        command.arg("1000").stdin(Stdio::null());
        if own_group {
            command.process_group(0);
        }
        command.spawn().unwrap()
    }

    #[test]
    fn this_process_runs_and_a_reaped_child_does_not() {
        assert!(running(std::process::id()));
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!running(pid));
        assert!(wait_gone(pid, Duration::ZERO));
    }

    #[test]
    fn a_zombie_counts_as_gone() {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Not reaped yet: the pid stays in /proc as a zombie until `wait` below.
        assert!(wait_gone(pid, LIMIT), "{pid} never ended");
        #[cfg(target_os = "linux")]
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
        child.wait().unwrap();
    }

    #[test]
    fn waiting_for_a_running_process_times_out_and_names_it() {
        let mut child = sleeper(false);
        let pid = child.id();
        assert!(!wait_gone(pid, Duration::from_millis(30)));
        assert_eq!(
            wait_all_gone(&[pid, u32::MAX], Duration::from_millis(30)),
            [pid]
        );
        child.kill().unwrap();
        assert!(wait_gone(pid, LIMIT));
        child.wait().unwrap();
    }

    #[tokio::test]
    async fn the_async_waits_agree() {
        let mut child = sleeper(false);
        let pid = child.id();
        assert!(!wait_gone_async(pid, Duration::from_millis(30)).await);
        child.kill().unwrap();
        assert!(wait_all_gone_async(&[pid], LIMIT).await.is_empty());
        assert!(wait_gone_async(pid, LIMIT).await);
        child.wait().unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn group_members_are_the_live_processes_of_the_group() {
        let mut child = sleeper(true);
        let pid = child.id();
        assert_eq!(group_members(pid), [pid]);
        assert!(!group_members(std::process::id()).contains(&pid));
        child.kill().unwrap();
        // Killed but not reaped: a zombie, no longer a member.
        let start = Instant::now();
        while !group_members(pid).is_empty() {
            assert!(start.elapsed() < LIMIT, "{pid} still in its group");
            std::thread::sleep(POLL_INTERVAL);
        }
        child.wait().unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn session_members_include_this_process_and_its_children() {
        let own = stat(std::process::id()).unwrap();
        let mut child = sleeper(true);
        let members = session_members(own.session);
        assert!(members.contains(&std::process::id()), "{members:?}");
        assert!(members.contains(&child.id()), "{members:?}");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn stat_lines_parse_past_odd_command_names() {
        let stat = parse_stat("42 (a) b (c) Z 1 42 7 0 -1 4194560").unwrap();
        assert_eq!(
            stat,
            Stat {
                state: 'Z',
                pgrp: 42,
                session: 7
            }
        );
        assert!(stat.ended());
        assert!(parse_stat("42 (cut").is_none());
        assert!(parse_stat("42 (x) S 1 notanumber 7").is_none());
    }
}

//! Delivering signals to one process or a whole process group, and the guard that
//! SIGKILLs a group when it goes out of scope.
//!
//! Every id is checked first: `kill(0, …)`, `kill(-1, …)` and `killpg` of our own
//! group would hit the orchestrator itself (or everything it may signal), so such ids
//! are refused instead of being passed to the kernel.

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::{getpgrp, Pid};

/// Why a signal was not delivered.
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    /// The id could address the orchestrator itself (0, 1, our own group) or is out of range.
    #[error("failed to signal {target} {id}: refusing an id that is not a child's")]
    InvalidId {
        /// `process` or `process group`.
        target: &'static str,
        /// The refused id.
        id: u32,
    },
    /// The kernel refused the signal (e.g. `EPERM`).
    #[error("failed to send {signal} to {target} {id}")]
    Send {
        /// `process` or `process group`.
        target: &'static str,
        /// The pid or pgid.
        id: u32,
        /// The signal.
        signal: Signal,
        /// What the kernel said.
        #[source]
        source: Errno,
    },
}

const PROCESS: &str = "process";
const GROUP: &str = "process group";

fn checked(target: &'static str, id: u32) -> Result<Pid, SignalError> {
    let invalid = SignalError::InvalidId { target, id };
    let raw = i32::try_from(id).map_err(|_| SignalError::InvalidId { target, id })?;
    if raw <= 1 {
        return Err(invalid);
    }
    let pid = Pid::from_raw(raw);
    if target == GROUP && pid == getpgrp() {
        return Err(invalid);
    }
    Ok(pid)
}

/// Sends `signal` to the process `pid`. `Ok(false)` when no such process exists (it
/// already exited and was reaped).
pub fn send_signal(pid: u32, signal: Signal) -> Result<bool, SignalError> {
    let target = checked(PROCESS, pid)?;
    match kill(target, signal) {
        Ok(()) => Ok(true),
        Err(Errno::ESRCH) => Ok(false),
        Err(source) => Err(SignalError::Send {
            target: PROCESS,
            id: pid,
            signal,
            source,
        }),
    }
}

/// Sends `signal` to every process of the group `pgid`. `Ok(false)` when the group is
/// empty. Our own group is refused.
pub fn signal_group(pgid: u32, signal: Signal) -> Result<bool, SignalError> {
    let target = checked(GROUP, pgid)?;
    match killpg(target, signal) {
        Ok(()) => Ok(true),
        Err(Errno::ESRCH) => Ok(false),
        Err(source) => Err(SignalError::Send {
            target: GROUP,
            id: pgid,
            signal,
            source,
        }),
    }
}

/// Whether any process (zombies included) is still in the group `pgid`; `false` for
/// ids [`signal_group`] refuses.
pub fn group_exists(pgid: u32) -> bool {
    match checked(GROUP, pgid) {
        Ok(target) => !matches!(killpg(target, None), Err(Errno::ESRCH)),
        Err(_) => false,
    }
}

/// SIGKILLs a process group when dropped, unless disarmed.
///
/// Held by [`crate::GroupChild`]; usable on its own for groups started elsewhere.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: Option<u32>,
}

impl GroupGuard {
    /// Arms a guard for the group `pgid` and lists the group in
    /// [`live_groups`](crate::live_groups) until the guard is disarmed or dropped.
    pub fn new(pgid: u32) -> Self {
        crate::registry::add_group(pgid);
        Self { pgid: Some(pgid) }
    }

    /// The guarded group, `None` once disarmed.
    pub fn pgid(&self) -> Option<u32> {
        self.pgid
    }

    /// SIGKILLs the group now; the guard stays armed.
    pub fn kill_now(&self) {
        if let Some(pgid) = self.pgid {
            kill_quietly(pgid);
        }
    }

    /// Forgets the group: dropping the guard then does nothing. Call it only once the
    /// group is known to be empty, so a recycled id is never signalled.
    pub fn disarm(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            crate::registry::remove_group(pgid);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            kill_quietly(pgid);
            crate::registry::remove_group(pgid);
        }
    }
}

fn kill_quietly(pgid: u32) {
    if let Err(error) = signal_group(pgid, Signal::SIGKILL) {
        tracing::warn!(pgid, %error, "could not kill a child process group");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_would_hit_us_are_refused() {
        for id in [0, 1, u32::MAX] {
            assert!(matches!(
                send_signal(id, Signal::SIGTERM),
                Err(SignalError::InvalidId { .. })
            ));
        }
        let own = u32::try_from(getpgrp().as_raw()).unwrap();
        assert!(matches!(
            signal_group(own, Signal::SIGKILL),
            Err(SignalError::InvalidId { .. })
        ));
        assert!(!group_exists(own));
    }
}

//! Delivering signals to one process or a whole process group.
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

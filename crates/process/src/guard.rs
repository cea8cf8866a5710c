//! The guard that SIGKILLs a process group when it goes out of scope, and lists the
//! group in the registry the run's clean-up sweeps while it lives.

use nix::sys::signal::Signal;

use crate::registry;
use crate::signal::signal_group;

/// SIGKILLs a process group when dropped, unless disarmed; while a graceful stop of
/// the process is under way ([`begin_stop`](crate::begin_stop)) it sends `SIGTERM`
/// instead and leaves the group to [`finish_stop`](crate::finish_stop).
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
        registry::add_group(pgid);
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
            registry::remove_group(pgid);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // A graceful stop of the whole process gives the group its grace period
            // (`registry::finish_stop` kills what is left at its end).
            if !registry::spare_group(pgid) {
                kill_quietly(pgid);
            }
            registry::remove_group(pgid);
        }
    }
}

fn kill_quietly(pgid: u32) {
    if let Err(error) = signal_group(pgid, Signal::SIGKILL) {
        tracing::warn!(pgid, %error, "could not kill a child process group");
    }
}

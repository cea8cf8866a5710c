//! The process-wide list of live child groups, so one Ctrl-C reaches all of them.
//!
//! Every [`GroupGuard`](crate::GroupGuard) (so every child started by
//! [`spawn_in_group`](crate::spawn_in_group) or [`run_supervised`](crate::run_supervised))
//! lists its group here until the group is known to be gone; every supervised child
//! also lists its supervision cookie. The binary's signal handler calls
//! [`kill_all_groups`]: `SIGTERM` on the first Ctrl-C (each supervisor then sees its
//! child exit and cleans up as usual), `SIGKILL` on the second.
//!
//! A graceful stop of the whole process ([`begin_stop`] … [`finish_stop`]) keeps its
//! promise of a grace period even when the futures supervising children are dropped
//! (cancelling a run drops its loop, and with it every agent's supervisor): while a
//! stop is under way, a dropped guard or cookie sends `SIGTERM` (once) instead of
//! `SIGKILL` and leaves its group listed; [`finish_stop`] waits out what is left of the
//! grace period and `SIGKILL`s whatever is still running.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::time::{sleep, Instant};

use crate::procfs;
use crate::signal::signal_group;

struct Registry {
    /// Live group ids, with how many guards hold each.
    groups: BTreeMap<u32, usize>,
    /// Cookies of supervised children whose leftovers have not been swept yet.
    cookies: BTreeMap<String, usize>,
    /// When a graceful stop is under way: its `SIGKILL` deadline.
    stop_deadline: Option<std::time::Instant>,
    /// Groups already sent `SIGTERM` during the stop (never twice: a shell runs its
    /// trap again for a second one).
    terminated_groups: BTreeSet<u32>,
    /// Cookies whose carriers were already sent `SIGTERM` during the stop.
    terminated_cookies: BTreeSet<String>,
    /// Work to do once the stop has ended everything (see [`after_stop`]).
    after_stop: Vec<AfterStop>,
}

/// A job run by [`finish_stop`] once every child is gone.
type AfterStop = Box<dyn FnOnce() + Send>;

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    groups: BTreeMap::new(),
    cookies: BTreeMap::new(),
    stop_deadline: None,
    terminated_groups: BTreeSet::new(),
    terminated_cookies: BTreeSet::new(),
    after_stop: Vec::new(),
});

fn registry() -> MutexGuard<'static, Registry> {
    // Every mutation is a single insert or remove, so a poisoned lock holds valid data.
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn add_group(pgid: u32) {
    *registry().groups.entry(pgid).or_insert(0) += 1;
}

pub(crate) fn remove_group(pgid: u32) {
    let mut registry = registry();
    if let Some(count) = registry.groups.get_mut(&pgid) {
        *count -= 1;
        if *count == 0 {
            registry.groups.remove(&pgid);
        }
    }
}

pub(crate) fn add_cookie(cookie: &str) {
    *registry().cookies.entry(cookie.to_owned()).or_insert(0) += 1;
}

pub(crate) fn remove_cookie(cookie: &str) {
    let mut registry = registry();
    if let Some(count) = registry.cookies.get_mut(cookie) {
        *count -= 1;
        if *count == 0 {
            registry.cookies.remove(cookie);
        }
    }
}

/// Starts a graceful stop of every child of this process, to end within `grace`: from
/// now until [`finish_stop`], a supervisor or guard that is dropped sends its group
/// (and its cookie's carriers) `SIGTERM` instead of `SIGKILL`, and its group stays
/// listed so [`finish_stop`] and [`kill_all_groups`] still reach it. Call it before
/// cancelling the work (the binary's first Ctrl-C / SIGTERM), then [`finish_stop`]
/// before the process exits. A second call keeps the first deadline.
pub fn begin_stop(grace: Duration) {
    let mut registry = registry();
    if registry.stop_deadline.is_none() {
        registry.stop_deadline = Some(std::time::Instant::now() + grace);
    }
}

/// Whether a graceful stop ([`begin_stop`]) is under way.
pub fn stopping() -> bool {
    registry().stop_deadline.is_some()
}

/// Runs `job` now, or, while a graceful stop is under way, once [`finish_stop`] has
/// ended every child: for clean-ups that would cut the grace period short (cancelling
/// a Slurm job whose `srun` is still ending it).
pub fn after_stop(job: impl FnOnce() + Send + 'static) {
    let mut registry = registry();
    if registry.stop_deadline.is_some() {
        registry.after_stop.push(Box::new(job));
        return;
    }
    drop(registry);
    job();
}

/// Ends a graceful stop ([`begin_stop`]; does nothing without one): waits until every
/// listed group and cookie carrier has exited or the grace period is over, then
/// `SIGKILL`s whatever is left (and waits, bounded, until it is gone), then runs the
/// [`after_stop`] jobs. Blocking; call it on the way out of the process, where no
/// runtime may be left to drive a future.
pub fn finish_stop() {
    let Some(deadline) = registry().stop_deadline else {
        return;
    };
    while anything_running() && std::time::Instant::now() < deadline {
        std::thread::sleep(POLL_INTERVAL);
    }
    if anything_running() {
        kill_all_groups(Signal::SIGKILL);
        let killed_by = std::time::Instant::now() + KILL_WAIT;
        while anything_running() && std::time::Instant::now() < killed_by {
            std::thread::sleep(POLL_INTERVAL);
        }
    }
    let jobs = std::mem::take(&mut registry().after_stop);
    for job in jobs {
        job();
    }
}

/// During a graceful stop, `SIGTERM`s the group `pgid` (unless already done) instead
/// of the `SIGKILL` its dropped guard would send, and keeps it listed. Returns `false`
/// when no stop is under way (or its grace is over): the caller kills as usual.
pub(crate) fn spare_group(pgid: u32) -> bool {
    let mut registry = registry();
    if !in_grace(&registry) {
        return false;
    }
    if registry.terminated_groups.insert(pgid) {
        if let Err(error) = signal_group(pgid, Signal::SIGTERM) {
            tracing::warn!(pgid, %error, "could not SIGTERM a child process group");
        }
    }
    // Listed once more, so the guard's own removal leaves it listed.
    *registry.groups.entry(pgid).or_insert(0) += 1;
    true
}

/// Whether a graceful stop is under way and its grace period is not over.
fn in_grace(registry: &Registry) -> bool {
    registry
        .stop_deadline
        .is_some_and(|deadline| std::time::Instant::now() < deadline)
}

/// The cookie counterpart of [`spare_group`]: `SIGTERM`s the cookie's carriers (unless
/// already done) and keeps the cookie listed.
pub(crate) fn spare_cookie(cookie: &str) -> bool {
    let mut registry = registry();
    if !in_grace(&registry) {
        return false;
    }
    if registry.terminated_cookies.insert(cookie.to_owned()) {
        let cookies = [cookie.to_owned()];
        for pid in procfs::carriers(&cookies) {
            procfs::signal_carrier(pid, &cookies, Signal::SIGTERM);
        }
    }
    *registry.cookies.entry(cookie.to_owned()).or_insert(0) += 1;
    true
}

/// Notes that the group `pgid` and `cookie`'s carriers were just sent `SIGTERM` by
/// their supervisor, so a graceful stop does not send it again.
pub(crate) fn note_terminated(pgid: u32, cookie: &str) {
    let mut registry = registry();
    if registry.stop_deadline.is_some() {
        registry.terminated_groups.insert(pgid);
        registry.terminated_cookies.insert(cookie.to_owned());
    }
}

/// How long [`finish_stop`] waits for processes to vanish after `SIGKILL`.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// The process groups of children that are (or may still be) alive, in id order.
pub fn live_groups() -> Vec<u32> {
    registry().groups.keys().copied().collect()
}

/// Sends `signal` to every live child group, and to every process that escaped its
/// group (`setsid`) but still carries a live child's supervision cookie. Returns how
/// many groups and escaped processes were signalled.
///
/// Meant for the binary's Ctrl-C / SIGTERM handler: `SIGTERM` first (supervisors then
/// see their children exit and clean up as usual, reporting them as signalled), and
/// `SIGKILL` when the user insists. Never signals the orchestrator's own group.
pub fn kill_all_groups(signal: Signal) -> usize {
    let (groups, cookies) = snapshot();
    let mut signalled = 0;
    for pgid in groups {
        match signal_group(pgid, signal) {
            Ok(true) => signalled += 1,
            Ok(false) => {}
            Err(error) => tracing::warn!(pgid, %error, "could not signal a child process group"),
        }
    }
    for pid in procfs::carriers(&cookies) {
        if procfs::signal_carrier(pid, &cookies, signal) {
            signalled += 1;
        }
    }
    signalled
}

/// Ends every child group and escaped descendant politely: `SIGTERM`, up to `grace`
/// for all of them to exit, then `SIGKILL` to whatever is left. Returns `true` when
/// `SIGKILL` was not needed. For the orchestrator's own exit path (a SIGTERM from a
/// parent, the end of `main`); supervisors still reap their children and report them
/// as signalled.
pub async fn terminate_all_groups(grace: Duration) -> bool {
    kill_all_groups(Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while anything_running() {
        if Instant::now() >= deadline {
            kill_all_groups(Signal::SIGKILL);
            return false;
        }
        sleep(POLL_INTERVAL).await;
    }
    true
}

/// How often [`terminate_all_groups`] looks whether everything is gone.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

fn snapshot() -> (Vec<u32>, Vec<String>) {
    let registry = registry();
    (
        registry.groups.keys().copied().collect(),
        registry.cookies.keys().cloned().collect(),
    )
}

/// Whether any process (not a zombie, not us) runs in a registered group or carries a
/// registered cookie.
fn anything_running() -> bool {
    let (groups, cookies) = snapshot();
    if groups.is_empty() && cookies.is_empty() {
        return false;
    }
    let all = procfs::processes();
    if all.is_empty() {
        // No /proc: only groups can be checked.
        return groups.iter().any(|&pgid| crate::group_exists(pgid));
    }
    let own = std::process::id();
    all.iter().any(|p| {
        !p.stat.zombie
            && p.pid != own
            && (groups.contains(&p.stat.pgrp) || procfs::carries_any(p.pid, &cookies))
    })
}

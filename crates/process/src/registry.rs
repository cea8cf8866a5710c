//! The process-wide list of live child groups, so one Ctrl-C reaches all of them.
//!
//! Every [`GroupGuard`](crate::GroupGuard) (so every child started by
//! [`spawn_in_group`](crate::spawn_in_group) or [`run_supervised`](crate::run_supervised))
//! lists its group here until the group is known to be gone; every supervised child
//! also lists its supervision cookie. The binary's signal handler calls
//! [`kill_all_groups`]: `SIGTERM` on the first Ctrl-C (each supervisor then sees its
//! child exit and cleans up as usual), `SIGKILL` on the second.

use std::collections::BTreeMap;
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
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    groups: BTreeMap::new(),
    cookies: BTreeMap::new(),
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

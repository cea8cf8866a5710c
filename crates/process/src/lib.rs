//! Spawning and supervising child processes (sub-agents, nested runs, REPL kernels).
//!
//! This crate is the only place in rlm allowed to use `unsafe`: it puts every child in
//! its own process group, arms a parent-death signal (Linux), and kills the whole group
//! on timeout, cancellation or drop, so no orphan survives the orchestrator.
//! `tokio`'s `kill_on_drop` reaches only the direct child; a shell's background jobs or
//! a Python kernel's subprocesses would survive it, which is why everything here
//! addresses the *group*.
//!
//! - [`spawn_in_group`] starts a [`tokio::process::Command`] as a [`GroupChild`]: own
//!   process group, `PR_SET_PDEATHSIG(SIGKILL)`, and a [`GroupGuard`] that SIGKILLs the
//!   group when dropped.
//! - [`GroupChild::terminate`] is the polite end: SIGTERM to the group, a grace
//!   period, then SIGKILL.
//! - [`send_signal`] / [`signal_group`] deliver one signal (e.g. SIGINT to interrupt a
//!   REPL) to a process or a group.
//! - [`TailBuffer`], [`read_capped`] and [`drain_into_tail`] read a child's pipes with
//!   bounded memory whatever it prints.
//! - [`run_supervised`] runs a child to completion (sub-agents, nested runs): explicit
//!   environment, capped output, timeout, cancellation, and a clean-up that also finds
//!   grandchildren that left the group (see [`SUPERVISION_COOKIE_ENV`]).
//! - [`inherited_environment`] and [`AllowList`] decide which of our environment
//!   variables a child inherits (never API keys).
//! - [`live_groups`], [`kill_all_groups`] and [`terminate_all_groups`] reach every child
//!   group of the process at once, for the binary's Ctrl-C and exit paths;
//!   [`begin_stop`] and [`finish_stop`] keep the grace period of a graceful stop even
//!   where the supervising futures are dropped.

mod capture;
#[cfg(target_os = "linux")]
mod cgroup;
mod environment;
mod group;
mod guard;
#[cfg(target_os = "linux")]
mod key_shapes;
mod launch;
mod procfs;
mod registry;
mod secrets;
mod signal;
mod supervise;
#[cfg(target_os = "linux")]
mod watchdog;

pub use capture::{drain_into_tail, read_capped, Captured, TailBuffer};
#[cfg(target_os = "linux")]
pub use cgroup::end_tree;
pub use environment::{inherited_environment, AllowList};
pub use group::{spawn_in_group, GroupChild, SpawnError, SpawnOptions};
pub use guard::GroupGuard;
pub use key_shapes::{redact_key_shapes, REDACTED_KEY};
pub use nix::sys::signal::Signal;
pub use registry::{
    after_stop, begin_stop, finish_stop, kill_all_groups, live_groups, stopping,
    terminate_all_groups,
};
pub use secrets::{
    hidden_secrets, hide_secrets, is_secret_name, redact_secrets, redact_value, secret_var,
    MIN_SCRUBBED_SECRET_BYTES,
};
pub use signal::{group_exists, send_signal, signal_group, SignalError};
pub use supervise::{
    run_supervised, Cookie, SuperviseOptions, Supervised, Termination, DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_GRACE, DEFAULT_STDERR_TAIL_BYTES, DEFAULT_STDOUT_CAP_BYTES, SUPERVISION_COOKIE_ENV,
};
pub use tokio_util::sync::CancellationToken;
#[cfg(target_os = "linux")]
pub use watchdog::{
    forget_live_record, reap_dead_runs, remove_at_exit, run_at_exit, start_watchdog, watchdog_main,
    ReapOptions, Reaped, ReapedRun, RecordError, LIVE_DIR, TEMP_DIR_PREFIX, WATCHDOG_SUBCOMMAND,
};

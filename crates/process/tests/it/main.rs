//! Integration tests of rlm-process with real `sh` children, their background jobs and
//! `setsid` escapees: one test binary (it builds once) with a module per concern.
//!
//! - `supervise` — `run_supervised`: results, environment, stdin, output caps, and
//!   that timeouts, cancellation and drops leave no process behind;
//! - `kill_all` — `kill_all_groups` and `terminate_all_groups`, which reach every
//!   child group of the process at once and so run in a process of their own (see
//!   `support::run_alone`).
//!
//! Nothing here waits a fixed time for synchronisation: the scripts write pid or
//! readiness files and the tests poll for them (bounded), and "no survivors" is checked
//! with `rlm_test_support::procs`, which polls `/proc` with a limit and ignores zombies.

mod kill_all;
mod supervise;
mod support;

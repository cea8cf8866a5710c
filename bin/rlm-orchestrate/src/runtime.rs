//! The tokio runtime of the sub-commands that run models (`run`, `repl`, `eval`,
//! `mcp`), and our own handling of Ctrl-C and SIGTERM.
//!
//! Each of them used to build its runtime and install its handlers itself; they are
//! built here once, the same way. [`stop_on_signals`] is the shared escalation: the
//! first Ctrl-C or SIGTERM cancels gracefully (every child group gets SIGTERM, a grace
//! period, then SIGKILL), the second kills every child group at once and exits 130.
//! `repl` keeps its own policy (Ctrl-C cancels one query, not the REPL) on top of
//! [`Signals`].

use std::io::{self, Write};

use anyhow::Context as _;
use rlm_process::CancellationToken;
use tokio::runtime::Runtime;
use tokio::signal::unix::{signal, Signal, SignalKind};

/// Worker threads of the runtime: the work is waiting on models and child processes,
/// not computing.
const WORKER_THREADS: usize = 2;

/// Builds the multi-threaded runtime a sub-command runs on.
pub fn build() -> anyhow::Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .enable_all()
        .build()
        .context("failed to start the async runtime")
}

/// Builds the runtime and installs [`stop_on_signals`] on it, cancelling `cancel` on
/// the first Ctrl-C or SIGTERM. Installed before anything runs, so a signal during a
/// context load is ours (it stops the load and its partial file is removed), never
/// the default death. When the handlers cannot be installed, `warning` is logged and
/// the runtime is returned anyway.
pub fn build_with_graceful_stop(
    cancel: &CancellationToken,
    warning: &str,
) -> anyhow::Result<Runtime> {
    let runtime = build()?;
    match Signals::install(&runtime) {
        Ok(signals) => {
            runtime.spawn(stop_on_signals(signals, cancel.clone()));
        }
        Err(error) => tracing::warn!(%error, "{warning}"),
    }
    Ok(runtime)
}

/// Which of our signals arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// SIGINT: Ctrl-C.
    Interrupt,
    /// SIGTERM.
    Terminate,
}

/// The signals rlm handles itself: SIGINT (Ctrl-C) and SIGTERM, installed up front.
pub struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    /// Installs the handlers on `runtime`.
    pub fn install(runtime: &Runtime) -> io::Result<Self> {
        let _runtime = runtime.enter();
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Waits for the next signal. Cancel-safe: a signal is not lost when this is one
    /// branch of a `select!` that another branch wins.
    pub async fn recv(&mut self) -> Received {
        tokio::select! {
            _ = self.interrupt.recv() => Received::Interrupt,
            _ = self.terminate.recv() => Received::Terminate,
        }
    }
}

/// First Ctrl-C or SIGTERM: cancel the run (a context load stops at once and leaves
/// nothing; every sub-agent group gets SIGTERM, a grace period, then SIGKILL; the run
/// is recorded as cancelled). A second one kills every child group at once and exits.
///
/// Cancelling the run drops the futures that supervise its sub-agents, so the grace
/// period is kept by the process crate's graceful stop, begun before the cancellation:
/// a dropped supervisor then sends `SIGTERM` instead of `SIGKILL`, and `main` waits
/// ([`rlm_process::finish_stop`]) for the grace `--agent-timeout` also gives
/// ([`rlm_process::DEFAULT_GRACE`]) before killing what is left and exiting.
async fn stop_on_signals(mut signals: Signals, cancel: CancellationToken) {
    signals.recv().await;
    crate::live::write_stderr(
        "stopping: ending sub-agents (press Ctrl-C again to kill them at once)",
    );
    rlm_process::begin_stop(rlm_process::DEFAULT_GRACE);
    cancel.cancel();
    signals.recv().await;
    let killed = rlm_process::kill_all_groups(rlm_process::Signal::SIGKILL);
    rlm_process::end_tree();
    let _ = writeln!(io::stderr(), "killed {killed} process group(s)");
    std::process::exit(130);
}

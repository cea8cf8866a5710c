//! Agents that outlive the code waiting for them: an agent (an external agent or a
//! nested run) runs on a task of its own,
//! so when the call that started it is dropped (its code cell timed out, the query was
//! cancelled, the REPL went away) the agent is still stopped, its `sub-result-<id>`
//! still written and its end still recorded; the run waits for those ends before it
//! records its own.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rlm_process::{CancellationToken, Termination};
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

/// How long the end of a run waits for agents still being stopped: their grace
/// (SIGTERM, then SIGKILL after 2 s) and collection take far less.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(30);

/// The run's agents on tasks of their own (tokio-util's `TaskTracker`: it counts the
/// live tasks and wakes a waiter when the last one ends).
#[derive(Debug, Default)]
pub struct DetachedAgents {
    tracker: TaskTracker,
}

impl DetachedAgents {
    /// Runs `work` on a task of its own, counted until it ends.
    pub fn spawn<F>(self: &Arc<Self>, work: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn(work)
    }

    /// Waits until no agent task is left, at most `limit`; `false` when some were
    /// still running then. Agents may still be started after it returns.
    pub async fn settled(&self, limit: Duration) -> bool {
        self.tracker.close();
        let settled = tokio::time::timeout(limit, self.tracker.wait())
            .await
            .is_ok();
        self.tracker.reopen();
        settled
    }
}

/// How an agent's end reads in the trace (`sub_agent_finished`): a cancellation that
/// the end of its cell caused (`abandoned` fired) is the timeout it was.
pub fn end_status(termination: &Termination, abandoned: &CancellationToken) -> String {
    if *termination == Termination::Cancelled && abandoned.is_cancelled() {
        "timed out (its code cell ran past --exec-timeout)".to_owned()
    } else {
        termination.to_string()
    }
}

/// Held by the call waiting for an agent: dropped before [`StopOnDrop::disarm`], it
/// stops the agent, and unless the whole run was cancelled (Ctrl-C: the agent reports
/// a cancellation) marks it abandoned first (it reports a timeout of its cell).
pub struct StopOnDrop {
    /// The run's cancellation.
    pub run: CancellationToken,
    /// Fired first when the waiting code went away on its own.
    pub abandoned: CancellationToken,
    /// Stops the agent.
    pub agent: CancellationToken,
    armed: bool,
}

impl StopOnDrop {
    /// A guard over the agent's tokens, armed.
    pub fn new(
        run: CancellationToken,
        abandoned: CancellationToken,
        agent: CancellationToken,
    ) -> Self {
        Self {
            run,
            abandoned,
            agent,
            armed: true,
        }
    }

    /// A guard for a new agent of the run cancelled by `run`: the agent's token is a
    /// child of the run's.
    pub fn for_run(run: &CancellationToken) -> Self {
        Self::new(run.clone(), CancellationToken::new(), run.child_token())
    }

    /// The agent ended while its caller waited: nothing to stop.
    pub fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if !self.run.is_cancelled() {
            self.abandoned.cancel();
        }
        self.agent.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_dropped_caller_stops_its_agent_as_abandoned_and_the_run_waits_for_it() {
        let agents = Arc::new(DetachedAgents::default());
        let run = CancellationToken::new();
        let (abandoned, agent) = (CancellationToken::new(), run.child_token());
        let guard = StopOnDrop::new(run.clone(), abandoned.clone(), agent.clone());
        let watched = agent.clone();
        let task = agents.spawn(async move { watched.cancelled().await });
        drop(guard);
        assert!(abandoned.is_cancelled() && agent.is_cancelled());
        assert!(agents.settled(Duration::from_secs(10)).await);
        task.await.unwrap();
    }

    #[tokio::test]
    async fn a_cancelled_run_is_no_abandonment_and_a_disarmed_guard_stops_nothing() {
        let run = CancellationToken::new();
        let (abandoned, agent) = (CancellationToken::new(), run.child_token());
        let guard = StopOnDrop::new(run.clone(), abandoned.clone(), agent.clone());
        run.cancel();
        drop(guard);
        assert!(!abandoned.is_cancelled() && agent.is_cancelled());

        let (abandoned, agent) = (CancellationToken::new(), CancellationToken::new());
        StopOnDrop::new(CancellationToken::new(), abandoned.clone(), agent.clone()).disarm();
        assert!(!abandoned.is_cancelled() && !agent.is_cancelled());
    }
}

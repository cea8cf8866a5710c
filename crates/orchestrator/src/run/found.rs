//! `window_found`: the trace's word on a window `run_started` could not give yet,
//! because its server was still being asked (discovery runs beside the run's first
//! request). A task per model waits for discovery's answer and emits what the server
//! said (a window a refusal taught later is the refusal's warning, not this event).
//! The run's end waits for them, a bounded time, so that whether the trace holds the
//! window does not depend on how the run's steps and discovery's answers interleave.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::events::{EventData, EventSink, WindowFound};
use crate::host::Model;

/// The longest the run's end waits for a window report: discovery's questions are
/// asked together and each gives up after a few seconds, so a report is due well
/// within this unless the server hangs.
pub(super) const REPORT_WAIT: Duration = crate::window::CONSTRAINT_WAIT;

/// The reporting tasks of one run; dropped, they are aborted (a cancelled run says
/// nothing more).
#[derive(Debug, Default)]
pub(super) struct Reporters(Vec<JoinHandle<()>>);

impl Reporters {
    /// Waits for every report, at most `limit` in all; what is not in by then is
    /// aborted (the trace then holds no `window_found` for it).
    pub(super) async fn finish(mut self, limit: Duration) {
        let tasks = std::mem::take(&mut self.0);
        let all = futures::future::join_all(tasks);
        if tokio::time::timeout(limit, all).await.is_err() {
            tracing::debug!(
                limit_secs = limit.as_secs(),
                "a server had not said its window by the run's end; the trace does not give it"
            );
        }
    }
}

impl Drop for Reporters {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Which windows `run_started` gave: the others are reported.
#[derive(Debug, Clone, Copy)]
pub(super) struct Said {
    /// The root model's window was in `run_started`.
    pub root: bool,
    /// The sub-model's window was in `run_started`.
    pub sub: bool,
}

/// Starts reporting the windows of `root` and `sub` that `run_started` did not give
/// (`said`; one event for both when they are one model). What `run_started` said is
/// passed, not asked again: discovery may answer in between.
pub(super) fn report_windows(root: &Model, sub: &Model, said: Said, sink: &EventSink) -> Reporters {
    let same = Arc::ptr_eq(&root.window, &sub.window);
    let mut tasks = Vec::new();
    if !said.root {
        let (window, sink) = (Arc::clone(&root.window), sink.clone());
        tasks.push(tokio::spawn(async move {
            let found = Some(window.discovered().await);
            sink.emit(EventData::WindowFound(WindowFound {
                sub_context_window: found.clone().filter(|_| same),
                context_window: found,
            }));
        }));
    }
    if !same && !said.sub {
        let (window, sink) = (Arc::clone(&sub.window), sink.clone());
        tasks.push(tokio::spawn(async move {
            sink.emit(EventData::WindowFound(WindowFound {
                context_window: None,
                sub_context_window: Some(window.discovered().await),
            }));
        }));
    }
    Reporters(tasks)
}

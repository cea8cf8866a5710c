//! `window_found`: the trace's word on a window `run_started` could not give yet,
//! because its server was still being asked (discovery runs beside the run's first
//! request). A task per model waits for the answer and emits it; at the run's end,
//! a window known by then and not said yet is said before the run records its end,
//! so the trace holds it however the tasks were scheduled.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::task::JoinHandle;

use crate::events::{EventData, EventSink, WindowFound};
use crate::host::Model;
use crate::provider::ContextWindow;
use crate::window::ModelWindow;

/// Which field of `window_found` a reporter fills.
#[derive(Debug, Clone, Copy)]
enum Which {
    /// The root model's window; also the sub-model's when they are one model.
    Root { same: bool },
    /// The sub-model's window alone.
    Sub,
}

impl Which {
    fn event(self, window: ContextWindow) -> EventData {
        let (context_window, sub_context_window) = match self {
            Which::Root { same } => (Some(window.clone()), same.then_some(window)),
            Which::Sub => (None, Some(window)),
        };
        EventData::WindowFound(WindowFound {
            context_window,
            sub_context_window,
        })
    }
}

/// One window being waited for: its task, and whether it was said (exactly once,
/// by the task or by [`Reporters::finish`], whichever comes first).
#[derive(Debug)]
struct Reporter {
    task: JoinHandle<()>,
    window: Arc<ModelWindow>,
    which: Which,
    said: Arc<AtomicBool>,
}

/// The run's pending window reports; [`Reporters::finish`] ends them.
#[derive(Debug, Default)]
pub(super) struct Reporters {
    pending: Vec<Reporter>,
    sink: Option<EventSink>,
}

impl Reporters {
    /// Ends the reporting tasks; a window known by now that no task said yet is said
    /// here (a window still unknown is not reported after the run's end).
    pub(super) fn finish(mut self) {
        let Some(sink) = self.sink.take() else {
            return;
        };
        for reporter in std::mem::take(&mut self.pending) {
            reporter.task.abort();
            if let Some(window) = reporter.window.known() {
                if !reporter.said.swap(true, Ordering::SeqCst) {
                    sink.emit(reporter.which.event(window));
                }
            }
        }
    }
}

impl Drop for Reporters {
    fn drop(&mut self) {
        for reporter in &self.pending {
            reporter.task.abort();
        }
    }
}

/// Starts reporting the windows of `root` and `sub` not known yet (one event for both
/// when they are one model).
pub(super) fn report_windows(root: &Model, sub: &Model, sink: &EventSink) -> Reporters {
    let same = Arc::ptr_eq(&root.window, &sub.window);
    let mut pending = Vec::new();
    if root.window.known().is_none() {
        pending.push(start(&root.window, Which::Root { same }, sink));
    }
    if !same && sub.window.known().is_none() {
        pending.push(start(&sub.window, Which::Sub, sink));
    }
    Reporters {
        pending,
        sink: Some(sink.clone()),
    }
}

fn start(window: &Arc<ModelWindow>, which: Which, sink: &EventSink) -> Reporter {
    let said = Arc::new(AtomicBool::new(false));
    let task = {
        let (window, sink, said) = (Arc::clone(window), sink.clone(), Arc::clone(&said));
        tokio::spawn(async move {
            let found = window.window().await;
            if !said.swap(true, Ordering::SeqCst) {
                sink.emit(which.event(found));
            }
        })
    };
    Reporter {
        task,
        window: Arc::clone(window),
        which,
        said,
    }
}

//! `window_found`: the trace's word on a window `run_started` could not give yet,
//! because its server was still being asked (discovery runs beside the run's first
//! request). A task per model waits for the answer and emits it; it ends with the run.

use std::sync::Arc;

use tokio::task::JoinHandle;

use crate::events::{EventData, EventSink, WindowFound};
use crate::host::Model;

/// Aborts the reporting tasks when the run is over (a run that ended first says
/// nothing more).
#[derive(Debug, Default)]
pub(super) struct Reporters(Vec<JoinHandle<()>>);

impl Drop for Reporters {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Starts reporting the windows of `root` and `sub` not known yet (one event for both
/// when they are one model).
pub(super) fn report_windows(root: &Model, sub: &Model, sink: &EventSink) -> Reporters {
    let same = Arc::ptr_eq(&root.window, &sub.window);
    let mut tasks = Vec::new();
    if root.window.known().is_none() {
        let (window, sink) = (Arc::clone(&root.window), sink.clone());
        tasks.push(tokio::spawn(async move {
            let found = Some(window.window().await);
            sink.emit(EventData::WindowFound(WindowFound {
                sub_context_window: found.clone().filter(|_| same),
                context_window: found,
            }));
        }));
    }
    if !same && sub.window.known().is_none() {
        let (window, sink) = (Arc::clone(&sub.window), sink.clone());
        tasks.push(tokio::spawn(async move {
            sink.emit(EventData::WindowFound(WindowFound {
                context_window: None,
                sub_context_window: Some(window.window().await),
            }));
        }));
    }
    Reporters(tasks)
}

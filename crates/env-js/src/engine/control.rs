//! When running JavaScript must stop: the deadline of the execution running and the
//! cancellation of executions by id, shared between [`crate::JsEnv`] and the engine
//! thread's interrupt handler.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Shared between [`super::JsEnv`] and the engine: the deadline the interrupt handler
/// checks, and cancellation of executions by id (ids grow with each execution, so a
/// cancellation sent before its execution started still applies to it, and never to a
/// later one).
#[derive(Debug)]
pub(crate) struct Control {
    started: Instant,
    /// Milliseconds after `started` when running JavaScript is interrupted
    /// (`u64::MAX`: never).
    deadline_ms: AtomicU64,
    /// The id of the execution running (0: none).
    current: AtomicU64,
    /// Every execution with an id up to this one is cancelled.
    cancelled_upto: AtomicU64,
    cancel: Notify,
}

impl Control {
    pub(super) fn new() -> Self {
        Self {
            started: Instant::now(),
            deadline_ms: AtomicU64::new(u64::MAX),
            current: AtomicU64::new(0),
            cancelled_upto: AtomicU64::new(0),
            cancel: Notify::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub(super) fn arm(&self, id: u64, timeout: Duration) {
        let limit = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self.current.store(id, Ordering::SeqCst);
        self.deadline_ms
            .store(self.now_ms().saturating_add(limit), Ordering::SeqCst);
    }

    pub(super) fn disarm(&self) {
        self.deadline_ms.store(u64::MAX, Ordering::SeqCst);
        self.current.store(0, Ordering::SeqCst);
    }

    pub(super) fn is_cancelled(&self, id: u64) -> bool {
        id != 0 && self.cancelled_upto.load(Ordering::SeqCst) >= id
    }

    pub(super) fn should_interrupt(&self) -> bool {
        self.is_cancelled(self.current.load(Ordering::Relaxed))
            || self.now_ms() >= self.deadline_ms.load(Ordering::Relaxed)
    }

    pub(super) fn timed_out(&self) -> bool {
        self.now_ms() >= self.deadline_ms.load(Ordering::SeqCst)
    }

    /// Waits until execution `id` is cancelled.
    pub(super) async fn cancelled(&self, id: u64) {
        loop {
            let notified = self.cancel.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_cancelled(id) {
                return;
            }
            notified.await;
        }
    }

    /// Stops execution `id` (and any earlier one) as soon as possible, whether it runs
    /// now or has not started yet.
    pub(crate) fn cancel(&self, id: u64) {
        self.cancelled_upto.fetch_max(id, Ordering::SeqCst);
        self.cancel.notify_waiters();
    }
}

//! A gate that holds scripted replies until the test lets them go, counting how many
//! it holds at once: for tests of how many requests a client keeps in flight (an MCP
//! server's `--mcp-max-runs`, say) without timing anything.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Holds each reply given [`crate::mock_llm::MockReply::with_gate`] until
/// [`MockGate::release`] lets one through. Clones share one gate.
#[derive(Debug, Clone)]
pub struct MockGate {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    open: tokio::sync::Semaphore,
    counts: Mutex<GateCounts>,
    changed: Condvar,
}

/// What a gate has seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GateCounts {
    /// Requests arrived at the gate, in all.
    pub arrived: usize,
    /// Requests held now.
    pub held: usize,
    /// The most requests held at once.
    pub most_held: usize,
}

impl PartialEq for MockGate {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for MockGate {}

impl Default for MockGate {
    fn default() -> Self {
        Self::new()
    }
}

impl MockGate {
    /// A closed gate.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                open: tokio::sync::Semaphore::new(0),
                counts: Mutex::new(GateCounts::default()),
                changed: Condvar::new(),
            }),
        }
    }

    /// Lets `count` more held (or future) requests through.
    pub fn release(&self, count: usize) {
        self.inner.open.add_permits(count);
    }

    /// What the gate has seen so far.
    pub fn counts(&self) -> GateCounts {
        *self.lock()
    }

    /// Waits (at most `bound`) until `done` holds for the counts; the counts then.
    pub fn wait_for(
        &self,
        bound: Duration,
        done: impl Fn(&GateCounts) -> bool,
    ) -> Result<GateCounts, GateCounts> {
        let guard = self.lock();
        let (guard, timeout) = self
            .inner
            .changed
            .wait_timeout_while(guard, bound, |counts| !done(counts))
            .unwrap_or_else(PoisonError::into_inner);
        if timeout.timed_out() && !done(&guard) {
            Err(*guard)
        } else {
            Ok(*guard)
        }
    }

    /// Holds the caller until the gate lets it through.
    pub(crate) async fn pass(&self) {
        self.update(|counts| {
            counts.arrived += 1;
            counts.held += 1;
            counts.most_held = counts.most_held.max(counts.held);
        });
        if let Ok(permit) = self.inner.open.acquire().await {
            permit.forget();
        }
        self.update(|counts| counts.held -= 1);
    }

    fn update(&self, change: impl FnOnce(&mut GateCounts)) {
        change(&mut self.lock());
        self.inner.changed.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, GateCounts> {
        self.inner
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

//! How many `rlm_run` calls run at once (`--mcp-max-runs`, issue 49 item 9). Each run
//! starts a kernel, agents and model requests; a client that makes 24 calls must not
//! start 24 of each. A call beyond the limit waits for a run to end, in the order the
//! calls came; at most [`MAX_WAITING_RUNS`] wait, and a call beyond those is refused
//! at once with a tool error, so waiting calls (and the arguments they hold) stay
//! bounded and the client always has room for other requests. A call cancelled while
//! it waits stops waiting.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rlm_process::CancellationToken;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Most `rlm_run` calls waiting for a run to end.
pub const MAX_WAITING_RUNS: usize = 16;

/// The run slots of one server.
#[derive(Debug)]
pub struct RunSlots {
    max: u32,
    free: Arc<Semaphore>,
    waiting: AtomicUsize,
}

/// Why a call did not get a slot.
#[derive(Debug, thiserror::Error)]
pub enum NoSlot {
    /// As many calls as allowed run and wait.
    #[error(
        "rlm_run refused: {running} runs are running (--mcp-max-runs {running}) and {waiting} more calls are waiting for them, the most this server lets wait; call again when a run has finished, or start the server with a higher --mcp-max-runs"
    )]
    Busy {
        /// Runs running (the limit).
        running: u32,
        /// Calls waiting.
        waiting: usize,
    },
    /// The call was cancelled while it waited.
    #[error("rlm_run cancelled while it waited for one of the {running} runs (--mcp-max-runs) to finish; no run was started")]
    Cancelled {
        /// Runs running (the limit).
        running: u32,
    },
}

/// A call's place among the running: the slot is free again when it is dropped.
#[derive(Debug)]
pub struct Slot {
    _permit: OwnedSemaphorePermit,
}

/// Counts a waiting call for as long as it waits.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl RunSlots {
    /// `max` runs at once.
    pub fn new(max: u32) -> Self {
        Self {
            max,
            free: Arc::new(Semaphore::new(max as usize)),
            waiting: AtomicUsize::new(0),
        }
    }

    /// A slot: at once if one is free, else after waiting for one (unless too many
    /// calls wait already, or `cancelled` fires first).
    pub async fn enter(&self, cancelled: &CancellationToken) -> Result<Slot, NoSlot> {
        if let Ok(permit) = Arc::clone(&self.free).try_acquire_owned() {
            return Ok(Slot { _permit: permit });
        }
        let waiting = self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        if waiting >= MAX_WAITING_RUNS {
            return Err(NoSlot::Busy {
                running: self.max,
                waiting,
            });
        }
        tracing::debug!(
            "rlm_run waits: {} runs are running (--mcp-max-runs)",
            self.max
        );
        tokio::select! {
            permit = Arc::clone(&self.free).acquire_owned() => match permit {
                Ok(permit) => Ok(Slot { _permit: permit }),
                // The semaphore is never closed.
                Err(_) => Err(NoSlot::Cancelled { running: self.max }),
            },
            () = cancelled.cancelled() => Err(NoSlot::Cancelled { running: self.max }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn calls_beyond_the_limit_wait_and_beyond_the_waiting_bound_are_refused() {
        let slots = Arc::new(RunSlots::new(2));
        let never = CancellationToken::new();
        let first = slots.enter(&never).await.unwrap();
        let _second = slots.enter(&never).await.unwrap();
        // A third waits until the first ends.
        let third = {
            let slots = Arc::clone(&slots);
            tokio::spawn(async move { slots.enter(&CancellationToken::new()).await.is_ok() })
        };
        while slots.waiting.load(Ordering::SeqCst) < 1 {
            tokio::task::yield_now().await;
        }
        assert!(!third.is_finished());
        // Fill the waiting room with cancellable waiters, then one more is refused.
        let cancel = CancellationToken::new();
        let waiters: Vec<_> = (1..MAX_WAITING_RUNS)
            .map(|_| {
                let (slots, cancel) = (Arc::clone(&slots), cancel.clone());
                tokio::spawn(async move { slots.enter(&cancel).await.map(|_| ()) })
            })
            .collect();
        while slots.waiting.load(Ordering::SeqCst) < MAX_WAITING_RUNS {
            tokio::task::yield_now().await;
        }
        let refused = slots.enter(&never).await.unwrap_err();
        assert!(
            matches!(refused, NoSlot::Busy { running: 2, .. }),
            "{refused}"
        );
        assert!(refused.to_string().contains("--mcp-max-runs"), "{refused}");
        cancel.cancel();
        for waiter in waiters {
            assert!(matches!(
                waiter.await.unwrap(),
                Err(NoSlot::Cancelled { .. })
            ));
        }
        drop(first);
        assert!(third.await.unwrap());
    }
}

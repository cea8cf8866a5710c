//! Running a batch of host calls (agents, nested runs, model calls) at most `limit` at
//! a time, answers in the order asked.
//!
//! Unlike `StreamExt::buffered`, a call that has finished frees its place at once even
//! while an earlier one still runs: `buffered` keeps finished calls queued behind the
//! oldest unfinished one, so one slow call held the batch below its limit.

use futures::stream::{self, StreamExt};
use std::future::Future;

/// Runs `work` on every item, at most `limit` (at least 1) at once; results in the
/// items' order.
pub(crate) async fn in_order<I, T, F, Fut>(items: Vec<I>, limit: usize, work: F) -> Vec<T>
where
    F: Fn(I) -> Fut,
    Fut: Future<Output = T>,
{
    let count = items.len();
    let mut finished: Vec<(usize, T)> = stream::iter(items.into_iter().enumerate())
        .map(|(index, item)| {
            let call = work(item);
            async move { (index, call.await) }
        })
        .buffer_unordered(limit.max(1))
        .collect()
        .await;
    finished.sort_unstable_by_key(|(index, _)| *index);
    debug_assert_eq!(finished.len(), count);
    finished.into_iter().map(|(_, result)| result).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::in_order;

    /// One slow call does not hold the others back: with a limit of 2, the fast calls
    /// all run beside the slow one (under `buffered`, the third waited for the first).
    #[tokio::test]
    async fn a_slow_call_does_not_hold_the_batch_back() {
        let started_during_slow = AtomicUsize::new(0);
        let slow_running = std::sync::atomic::AtomicBool::new(false);
        let answers = in_order(vec![300_u64, 1, 1, 1, 1], 2, |ms| {
            let (started_during_slow, slow_running) = (&started_during_slow, &slow_running);
            async move {
                if ms == 300 {
                    slow_running.store(true, Ordering::SeqCst);
                } else if slow_running.load(Ordering::SeqCst) {
                    started_during_slow.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(ms)).await;
                if ms == 300 {
                    slow_running.store(false, Ordering::SeqCst);
                }
                ms
            }
        })
        .await;
        assert_eq!(answers, vec![300, 1, 1, 1, 1], "answers stay in order");
        assert_eq!(started_during_slow.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn an_empty_batch_and_a_zero_limit_work() {
        assert!(in_order(Vec::<u8>::new(), 0, |x| async move { x })
            .await
            .is_empty());
        assert_eq!(
            in_order(vec![3, 2], 0, |x| async move { x * 2 }).await,
            vec![6, 4]
        );
    }
}

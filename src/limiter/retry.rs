//! Policies that do not reserve (fixed and sliding windows, the sliding log; or a store
//! without [`Reservations`](crate::store::Reservations)): check, and while denied sleep the
//! decision's `retry_after` plus a random jitter (up to a quarter of it, and up to 5 ms more),
//! then check again. A window's count cannot be charged to a window that has not begun, so
//! there is no slot to book: waiters are not served in order, and a window edge costs a few
//! calls per admission (the jitter spreads them). Use GCRA or a token bucket for one call per
//! permit.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::AcquireError;
use super::shared::Shared;
use super::shared::detached;
use super::shared::{Booking, Place, Undo};
use crate::decision::Decision;
use crate::key::Key;
use crate::store::Refund;

impl Shared {
    /// Books `cost` for `key` by checks, waiting at most `max_wait` in all.
    pub(super) async fn book_by_checks(
        self: &Arc<Self>,
        key: &Key,
        cost: u64,
        max_wait: Duration,
    ) -> Result<(Instant, Booking), AcquireError> {
        let start = Instant::now();
        loop {
            let (decision, place) = self.check_once(key, cost).await?;
            if decision.is_allowed() {
                if let (Place::Store, Some((local, share))) = (place, self.local()) {
                    let _ = local.check_now(share, key, cost);
                }
                let refund = Refund::of(&decision, cost).map(|r| (r.at_us(), r.token()));
                return Ok((Instant::now(), Booking::Checked(place, cost, refund)));
            }
            if decision.exceeds_capacity() {
                return Err(AcquireError::Never { cost });
            }
            let retry = decision
                .retry_after()
                .unwrap_or(Duration::from_millis(10))
                .max(Duration::from_millis(1));
            let waited = start.elapsed();
            if waited + retry > max_wait {
                return Err(AcquireError::TooLong { wait: retry });
            }
            let pause = (retry + jitter(retry)).min(max_wait.saturating_sub(waited));
            tokio::time::sleep(pause).await;
        }
    }

    async fn check_once(
        self: &Arc<Self>,
        key: &Key,
        cost: u64,
    ) -> Result<(Decision, Place), AcquireError> {
        let answer = match self.engine.enter(&self.policy, key) {
            Ok(pass) => {
                self.calls.fetch_add(1, Ordering::Relaxed);
                let shared = Arc::clone(self);
                let k = key.clone();
                let call = async move {
                    let until = tokio::time::Instant::now() + shared.deadline();
                    let check = (**shared.store()).check(&shared.policy, &k, cost);
                    let answer = shared.engine.wait(check, until).await;
                    shared.engine.record_call(pass, &answer);
                    answer
                };
                let (orphan, k) = (Arc::clone(self), key.clone());
                detached(call, move |answer| {
                    if let Ok(decision) = answer
                        && let Some(refund) = Refund::of(&decision, cost)
                    {
                        orphan.undo_later(&k, Undo::Refund(Place::Store, refund));
                    }
                })
                .await
            }
            Err(error) => Err(error),
        };
        let error = match answer {
            Ok(decision) => return Ok((decision, Place::Store)),
            Err(error) => error,
        };
        let (local, share) = self.store_failed(error)?;
        Ok((local.check_now(share, key, cost), Place::Local))
    }
}

/// A random pause in `[0, retry / 4 + 5 ms)`, so that waiters denied together do not all ask
/// again at the same instant.
fn jitter(retry: Duration) -> Duration {
    let span = u64::try_from((retry / 4 + Duration::from_millis(5)).as_micros()).unwrap_or(5_000);
    let random = foldhash::fast::RandomState::default().hash_one(Instant::now());
    Duration::from_micros(random % span.max(1))
}

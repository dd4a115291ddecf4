//! Refunds of a local-first store's decisions: given back in Redis, once, after the units
//! this instance counted for the key have reached it.

use std::sync::Arc;

use super::{LocalFirstStore, Running, core, exact, task};
use crate::key::Key;
use crate::policy::Policy;
use crate::store::{Refund, Refunds, StoreFuture};

/// Every decision is refunded in Redis, by the exact store's refund script, from any
/// instance, at most once (its marker): a hot key's local decisions counted into the state
/// that script gives back from, so they are refunded as a cold key's are (per algorithm as
/// [`Refund`] says). Before it runs, this instance waits for the units it counted for the key
/// and Redis has not acknowledged yet (a sync, sent at once: the refund's units may be among
/// them); a refund given back is also given back to this instance's view at once, and other
/// instances see it at their next sync. A refund of another instance's local decision made
/// before that instance's next sync may give back less (never more). While Redis is
/// unreachable a refund fails, as in exact mode.
impl Refunds for LocalFirstStore {
    fn refund(&self, policy: &Policy, key: &Key, refund: Refund) -> StoreFuture<bool> {
        if exact(policy, key) {
            return self.shared.redis.refund(policy, key, refund);
        }
        let shared = Arc::clone(&self.shared);
        let (policy, key) = (policy.clone(), key.clone());
        Box::pin(async move {
            let counters = core::counter_keys(&key);
            for counter in &counters {
                shared.settle(&policy, counter).await;
            }
            let (cost, at) = (refund.cost(), refund.at_us());
            let sent = shared.core.local_now();
            let given = shared.redis.refund(&policy, &key, refund).await?;
            if given {
                let overridden = shared.redis.effective_policy(&policy, &key);
                let effective = overridden.as_ref().unwrap_or(&policy);
                shared.core.give_back(effective, &key, cost, at, sent);
            }
            Ok(given)
        })
    }
}

impl Running {
    /// Waits until Redis has acknowledged the units this instance counted for `key` (asking
    /// the task to sync at once), or the store is isolated, or two sync calls' time passed.
    async fn settle(&self, policy: &Policy, key: &Key) {
        let core = &self.core;
        let Some(owed) = core.unacked(policy.name(), key) else {
            return;
        };
        let deadline = tokio::time::Instant::now() + 2 * task::call_timeout(core.settings.interval);
        loop {
            let synced = core.synced.notified();
            tokio::pin!(synced);
            synced.as_mut().enable();
            if core.acknowledged(policy.name(), key, owed) || core.is_isolated() {
                return;
            }
            core.urgent.notify_one();
            if tokio::time::timeout_at(deadline, synced).await.is_err() {
                return;
            }
        }
    }
}

//! Charges in memory: a cost already incurred, counted in the key's entry whatever its state
//! (`Entry::charge`), under the shard's lock, with the arithmetic of the scripts' charge
//! (`src/store/redis/script/charge.rs`).

use super::MemoryStore;
use super::entry::with_entry;
use crate::decision::Decision;
use crate::key::Key;
use crate::policy::Policy;

impl MemoryStore {
    /// Charges synchronously what [`Store::charge`](crate::store::Store::charge) charges:
    /// `cost` units of `key` in every limit of `policy`, whatever their state, and answers the
    /// decision after it (whether a request of cost 1 would pass now, and when it will).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::{ManualClock, MemoryStore};
    /// use redlimit::{Key, Limit, Policy};
    /// let clock = ManualClock::new(1 << 40);
    /// let store = MemoryStore::with_clock(clock.clone());
    /// let policy = Policy::new("tokens", [Limit::gcra(100, Duration::from_secs(1))?])?;
    /// let key = Key::new("k");
    /// // 150 tokens used by one response: 50 more than the limit, owed.
    /// let after = store.charge_now(&policy, &key, 150);
    /// assert!(!after.is_allowed());
    /// assert_eq!(after.remaining(), Some(0));
    /// assert_eq!(after.retry_after(), Some(Duration::from_millis(510)));
    /// assert!(!store.check_now(&policy, &key, 1).is_allowed());
    /// clock.advance(Duration::from_millis(510));
    /// assert!(store.check_now(&policy, &key, 1).is_allowed());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn charge_now(&self, policy: &Policy, key: &Key, cost: u64) -> Decision {
        let inner = &*self.inner;
        let overridden = inner.overrides.effective(policy, key);
        let policy = overridden.as_ref().unwrap_or(policy);
        let now = inner.clock.now_us();
        if key.has_limit_keys() {
            let states = self.charge_parts(policy, key, cost, now);
            return Decision::from_states(policy.name_arc(), now, states);
        }
        let (decision, evicted) = Decision::filled(policy.name_arc(), now, |states| {
            let (at, mut shard) = self.shard(policy, key);
            let (charged, evicted) = with_entry(&mut shard, at, policy, key, now, |entry| {
                entry.charge(policy, cost, now)
            });
            *states = charged;
            evicted
        });
        self.count_evictions(u64::from(evicted));
        decision
    }
}

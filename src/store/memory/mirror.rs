//! Charging without deciding: the local fallback's mirror of what the shared store admitted.

use super::{MemoryStore, entry, penalty};
use crate::decision::LimitStates;
use crate::key::Key;
use crate::policy::Policy;

impl MemoryStore {
    /// Charges `cost` as [`check_now`](Self::check_now) does, without building its decision:
    /// for the local fallback's mirror of what the shared store admitted, which nobody reads.
    pub(crate) fn mirror_now(&self, policy: &Policy, key: &Key, cost: u64) {
        if key.has_limit_keys() {
            drop(self.check_now(policy, key, cost));
            return;
        }
        let inner = &*self.inner;
        let overridden = inner.overrides.effective(policy, key);
        let policy = overridden.as_ref().unwrap_or(policy);
        let now = inner.clock.now_us();
        let lease = (cost > 0 && policy.holds_leases()).then(|| inner.leases.next());
        let (at, mut shard) = self.shard(policy, key);
        let (_, evicted) = if policy.penalty_us() == 0 && !policy.holds_leases() {
            // The mirror's own policy (no penalty box, no concurrency limit): the limits'
            // states committed as a check commits them, no limit state reported.
            entry::with_entry(&mut shard, at, policy, key, now, |entry| {
                entry.commit(policy, std::slice::from_ref(&cost), now);
            })
        } else {
            let mut states = LimitStates::new();
            entry::with_entry(&mut shard, at, policy, key, now, |entry| {
                penalty::check(entry, policy, std::slice::from_ref(&cost), now, &mut states);
                if let (Some(lease), true) = (lease, states.iter().all(|s| s.is_allowed())) {
                    entry.hold(lease.id(), now);
                }
            })
        };
        drop(shard);
        self.count_evictions(u64::from(evicted));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::key::Key;
    use crate::limit::Limit;
    use crate::policy::Policy;
    use crate::store::MemoryStore;

    #[test]
    fn a_mirrored_charge_spends_what_a_check_would() {
        let store = MemoryStore::new();
        let policy = Policy::new(
            "p",
            [
                Limit::gcra(5, Duration::from_secs(60)).unwrap(),
                Limit::fixed_window(3, Duration::from_secs(60)).unwrap(),
            ],
        )
        .unwrap();
        let key = Key::new("k");
        store.mirror_now(&policy, &key, 2);
        let decision = store.check_now(&policy, &key, 1);
        assert_eq!(
            decision.remaining(),
            Some(0),
            "3 - 2 - 1 left in the window"
        );
        store.mirror_now(&policy, &key, 1);
        assert!(!store.check_now(&policy, &key, 1).is_allowed());
    }
}

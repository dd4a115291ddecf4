//! One key's entry, asked for by what acts on the key outside its decisions: a refund waits
//! for its units to reach Redis and gives them back to its view; a reset forgets it here, or,
//! made through another instance, has it rejoin the fleet's state.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Core, counter_keys};
use crate::key::Key;
use crate::policy::Policy;

impl Core {
    /// The units this instance counted for `key` under `policy` that Redis has not
    /// acknowledged yet, as `(entry generation, counted)`: a refund waits until they are in
    /// the state it takes units from. `None`: nothing is owed.
    pub(crate) fn unacked(&self, policy: &str, key: &Key) -> Option<(u64, u64)> {
        let place = self.entries.lookup_key(policy, key);
        let mut shard = self.entries.shard(place.hash);
        let entry = shard.get_mut(place)?;
        (!entry.settled()).then_some((entry.generation, entry.counted))
    }

    /// Whether Redis acknowledged the units up to `counted` of `key`'s entry `generation`
    /// ([`Core::unacked`]): an entry gone or made again was dropped only once settled.
    pub(crate) fn acknowledged(
        &self,
        policy: &str,
        key: &Key,
        (generation, counted): (u64, u64),
    ) -> bool {
        let place = self.entries.lookup_key(policy, key);
        let mut shard = self.entries.shard(place.hash);
        shard
            .get_mut(place)
            .filter(|e| e.generation == generation)
            .is_none_or(|e| e.acked >= counted)
    }

    /// Gives `cost` units admitted at `at` back to `key`'s view under `policy`, at once (Redis
    /// gave them back to the fleet, the call sent at local time `sent`; the next sync brings
    /// the same): to each counter's, one limit each, for a key whose limit keys name their
    /// states.
    pub(crate) fn give_back(&self, policy: &Policy, key: &Key, cost: u64, at: u64, sent: u64) {
        let now = self.now();
        for (i, counter) in counter_keys(key).iter().enumerate() {
            let limits = if key.names_limit_states() {
                policy.limits().get(i..=i).unwrap_or_default()
            } else {
                policy.limits()
            };
            let place = self.entries.lookup_key(policy.name(), counter);
            let mut shard = self.entries.shard(place.hash);
            if let Some(entry) = shard.get_mut(place)
                && !limits.is_empty()
            {
                entry.adopt(limits);
                entry.give_back(cost, at, sent, now);
            }
        }
    }

    /// Forgets `key`'s entry under `policy` (its state was reset): its next decision is a
    /// cold key's, exact.
    pub(crate) fn forget(&self, policy: &str, key: &Key) {
        let place = self.entries.lookup_key(policy, key);
        self.entries.shard(place.hash).remove(place);
    }

    /// Takes the resets of the Redis store's version `now` (its resets version), if not taken
    /// yet: the keys reset since the last taken version, read by `after`, are decided exactly
    /// until their next sync, asked for at once. Resets the store cannot name (missed) rejoin
    /// nothing: every hot key's next sync brings its state anyway.
    pub(crate) fn take_resets(
        &self,
        now: u64,
        after: impl FnOnce(u64) -> Option<Vec<(Arc<str>, Key)>>,
    ) {
        let seen = self.resets_seen.load(Ordering::Acquire);
        if seen == now
            || self
                .resets_seen
                .compare_exchange(seen, now, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return;
        }
        if let Some(resets) = after(seen) {
            self.rejoin(&resets);
            self.urgent.notify_one();
        }
    }

    /// Decides each key of `resets` (reset in Redis through another instance) exactly until
    /// its next sync, which the next round sends.
    pub(crate) fn rejoin(&self, resets: &[(Arc<str>, Key)]) {
        let now = self.now();
        let counters = resets
            .iter()
            .flat_map(|(policy, key)| counter_keys(key).into_iter().map(move |k| (policy, k)));
        for (policy, key) in counters {
            let key = &key;
            let place = self.entries.lookup_key(policy, key);
            let mut shard = self.entries.shard(place.hash);
            let Some(entry) = shard.get_mut(place) else {
                continue;
            };
            entry.rejoin(now);
            let generation = entry.generation;
            if !std::mem::replace(&mut entry.touched, true) {
                shard
                    .side
                    .touched
                    .push((Arc::clone(policy), key.clone(), generation));
            }
        }
    }
}

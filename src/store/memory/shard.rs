//! One shard of the memory store: a map from (policy, key) to state, reclaimed incrementally
//! and capped in size.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use indexmap::map::raw_entry_v1::{RawEntryApiV1, RawEntryMut};
use indexmap::IndexMap;

use super::entry::Entry;
use crate::key::Key;

/// How many entries one eviction compares (as Redis's approximated eviction does).
const EVICTION_SAMPLE: usize = 8;

/// The identity of an entry. Hashes as [`IdRef`] does, so lookups need no allocation.
#[derive(PartialEq, Eq)]
pub(super) struct Id {
    policy: Arc<str>,
    key: Key,
}

impl Hash for Id {
    fn hash<H: Hasher>(&self, state: &mut H) {
        IdRef {
            policy: &self.policy,
            key: self.key.as_str(),
        }
        .hash(state);
    }
}

/// A borrowed [`Id`].
#[derive(Hash)]
pub(super) struct IdRef<'a> {
    pub(super) policy: &'a str,
    pub(super) key: &'a str,
}

pub(super) struct Shard {
    map: IndexMap<Id, Entry, foldhash::fast::RandomState>,
    /// Where the incremental sweep looks next.
    cursor: usize,
    /// A xorshift state for eviction samples.
    rng: u64,
}

impl Shard {
    pub(super) fn new(seed: u64) -> Self {
        Shard {
            map: IndexMap::default(),
            cursor: 0,
            rng: seed | 1,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// Runs `check` on the entry of `id` (a fresh one if absent or expired), keeping it only
    /// if it holds state; sweeps a little and evicts to stay under `cap`. Returns what `check`
    /// returned, and whether live state was evicted.
    #[allow(clippy::too_many_arguments)] // one call site, each argument distinct
    pub(super) fn with_entry<T>(
        &mut self,
        hash: u64,
        id: IdRef<'_>,
        fresh: impl FnOnce() -> Entry,
        key: impl FnOnce() -> (Arc<str>, Key),
        cap: usize,
        now: u64,
        check: impl FnOnce(&mut Entry) -> T,
    ) -> (T, bool) {
        self.sweep(1, now);
        let found = self.map.raw_entry_mut_v1().from_hash(hash, |k| {
            *k.policy == *id.policy && k.key.as_str() == id.key
        });
        match found {
            RawEntryMut::Occupied(mut occupied) => {
                let entry = occupied.get_mut();
                if entry.expires_at <= now {
                    entry.clear();
                }
                (check(entry), false)
            }
            RawEntryMut::Vacant(_) => {
                let mut entry = fresh();
                let out = check(&mut entry);
                if entry.expires_at <= now {
                    return (out, false); // nothing committed: nothing to keep
                }
                self.sweep(2, now);
                let evicted = self.map.len() >= cap && self.evict(now);
                let (policy, key) = key();
                if let RawEntryMut::Vacant(vacant) =
                    self.map.raw_entry_mut_v1().from_hash(hash, |_| false)
                {
                    vacant.insert_hashed_nocheck(hash, Id { policy, key }, entry);
                }
                (out, evicted)
            }
        }
    }

    /// The entry of `id`, if there is one (live or not).
    pub(super) fn get_mut(&mut self, hash: u64, id: IdRef<'_>) -> Option<&mut Entry> {
        match self.map.raw_entry_mut_v1().from_hash(hash, |k| {
            *k.policy == *id.policy && k.key.as_str() == id.key
        }) {
            RawEntryMut::Occupied(occupied) => Some(occupied.into_mut()),
            RawEntryMut::Vacant(_) => None,
        }
    }

    /// Removes the entry of `id`; returns whether there was one.
    pub(super) fn remove(&mut self, hash: u64, id: IdRef<'_>) -> bool {
        let found = self.map.raw_entry_mut_v1().from_hash(hash, |k| {
            *k.policy == *id.policy && k.key.as_str() == id.key
        });
        match found {
            RawEntryMut::Occupied(occupied) => {
                occupied.swap_remove();
                true
            }
            RawEntryMut::Vacant(_) => false,
        }
    }

    /// Looks at up to `steps` entries from the cursor, removing those whose state is moot.
    /// Every insert sweeps, so expired entries go within one pass of the cursor: memory
    /// follows the keys live within their TTL, with no full scan on any request.
    fn sweep(&mut self, steps: usize, now: u64) {
        for _ in 0..steps {
            if self.cursor >= self.map.len() {
                self.cursor = 0;
                if self.map.is_empty() {
                    return;
                }
            }
            if self.map[self.cursor].expires_at <= now {
                self.map.swap_remove_index(self.cursor);
            } else {
                self.cursor += 1;
            }
        }
    }

    /// Makes room for one entry at the cap: removes the entry whose state expires soonest among
    /// a random sample (its loss forgets the least). Returns whether live state was evicted.
    fn evict(&mut self, now: u64) -> bool {
        let len = self.map.len();
        if len == 0 {
            return false;
        }
        let victim = (0..EVICTION_SAMPLE.min(len))
            .map(|_| {
                self.rng ^= self.rng << 13;
                self.rng ^= self.rng >> 7;
                self.rng ^= self.rng << 17;
                (self.rng % len as u64) as usize
            })
            .min_by_key(|&i| self.map[i].expires_at)
            .unwrap_or(0);
        let live = self.map[victim].expires_at > now;
        self.map.swap_remove_index(victim);
        live
    }
}

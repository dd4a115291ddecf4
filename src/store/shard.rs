//! The map both in-process stores keep their keys in (the memory store's state, local-first
//! mode's views): (policy, key) to an entry, sharded over independent locks, reclaimed
//! incrementally and capped in size.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use indexmap::IndexMap;
use indexmap::map::raw_entry_v1::{RawEntryApiV1, RawEntryMut};
use smallvec::SmallVec;

use crate::key::Key;

/// The default cap on stored keys (about 22 MB of memory-store state at the cap for
/// single-limit policies: 136-byte slots, grown in powers of two, and each key's text).
pub const DEFAULT_MAX_KEYS: usize = 100_000;

/// Independent locks; a check holds one shard's lock for well under a microsecond.
pub(crate) const SHARDS: usize = 64;

// `shard_index` takes the top bits of a hash.
const _: () = assert!(SHARDS.is_power_of_two());

/// How many entries one eviction compares (as Redis's approximated eviction does).
const EVICTION_SAMPLE: usize = 8;

/// What the map needs to know of an entry to reclaim it.
pub(crate) trait Reclaim {
    /// When the entry becomes moot (Unix µs): from then on, dropping it changes nothing.
    fn expires_at(&self) -> u64;

    /// Whether the cap may drop the entry before it is moot.
    fn evictable(&self) -> bool {
        true
    }

    /// Readies an entry the map kept for use at `now`.
    fn revive(&mut self, _now: u64) {}
}

/// The identity of an entry. Hashes as [`Lookup`] does, so lookups need no allocation.
#[derive(PartialEq, Eq)]
struct Id {
    policy: Arc<str>,
    key: Key,
}

impl Hash for Id {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let key = &self.key;
        (&*self.policy, key.entry_text(), key.names_limit_states()).hash(state);
    }
}

/// Where the entry of (policy, key) is or would be: its identity, borrowed, and its hash. A
/// key naming its one limit's state (an RLS counter, in local-first mode) is filed under
/// that limit key, apart from any plain key of the same text ([`Key::entry_text`]).
#[derive(Clone, Copy)]
pub(crate) struct Lookup<'a> {
    pub(crate) policy: &'a str,
    key: &'a str,
    named: bool,
    pub(crate) hash: u64,
}

impl Lookup<'_> {
    fn is(&self, id: &Id) -> bool {
        same_text(&id.policy, self.policy)
            && same_text(id.key.entry_text(), self.key)
            && id.key.names_limit_states() == self.named
    }
}

/// Whether two texts are equal; the same text (a lookup of the policy's own name, a key
/// cloned from the entry's) without comparing bytes.
#[inline]
fn same_text(a: &str, b: &str) -> bool {
    a.len() == b.len() && (std::ptr::eq(a.as_ptr(), b.as_ptr()) || a == b)
}

/// The shards, each behind its lock.
pub(crate) struct ShardedMap<E, X = ()> {
    shards: Box<[Mutex<Shard<E, X>>]>,
    hasher: foldhash::fast::FixedState,
    cap_per_shard: usize,
}

impl<E: Reclaim, X> ShardedMap<E, X> {
    /// A map of at most about `max_keys` entries (at least one per shard), hashed and sampled
    /// with `seed`; `side(i)` is what shard `i` keeps besides its entries.
    pub(crate) fn new(max_keys: usize, seed: u64, mut side: impl FnMut(usize) -> X) -> Self {
        let cap = max_keys.div_ceil(SHARDS).max(1);
        ShardedMap {
            shards: (0..SHARDS)
                .map(|i| {
                    Mutex::new(Shard {
                        map: IndexMap::default(),
                        cursor: 0,
                        rng: seed.wrapping_add(i as u64) | 1,
                        cap,
                        side: side(i),
                    })
                })
                .collect(),
            hasher: foldhash::fast::FixedState::with_seed(seed),
            cap_per_shard: cap,
        }
    }

    /// Where the entry of the plain key of text `key` under `policy` is.
    pub(crate) fn lookup<'a>(&self, policy: &'a str, key: &'a str) -> Lookup<'a> {
        self.lookup_text(policy, key, false)
    }

    /// Where the entry of `key` under `policy` is: a plain key's, or an RLS counter's.
    #[cfg(feature = "redis")]
    pub(crate) fn lookup_key<'a>(&self, policy: &'a str, key: &'a Key) -> Lookup<'a> {
        self.lookup_text(policy, key.entry_text(), key.names_limit_states())
    }

    /// Where the entry of text `key` is; `named`: an RLS counter's, filed under its own key.
    pub(crate) fn lookup_text<'a>(&self, policy: &'a str, key: &'a str, named: bool) -> Lookup<'a> {
        Lookup {
            policy,
            key,
            named,
            hash: self.hasher.hash_one((policy, key, named)),
        }
    }

    /// The shard of `hash`, locked.
    pub(crate) fn shard(&self, hash: u64) -> MutexGuard<'_, Shard<E, X>> {
        lock(&self.shards[shard_index(hash)])
    }

    /// The shard of every hash, each locked once, in index order (so that two callers never
    /// wait on each other in a cycle).
    pub(crate) fn lock(&self, hashes: impl Iterator<Item = u64>) -> Locked<'_, E, X> {
        let mut indices: SmallVec<[usize; 4]> = hashes.map(shard_index).collect();
        indices.sort_unstable();
        indices.dedup();
        Locked(
            indices
                .into_iter()
                .map(|i| (i, lock(&self.shards[i])))
                .collect(),
        )
    }

    /// Every shard in turn, each locked while the caller holds it.
    pub(crate) fn shards(&self) -> impl Iterator<Item = MutexGuard<'_, Shard<E, X>>> {
        self.shards.iter().map(lock)
    }

    /// How many entries the map holds.
    pub(crate) fn len(&self) -> usize {
        self.shards().map(|s| s.map.len()).sum()
    }

    /// The cap, as the shards keep it.
    pub(crate) fn max_keys(&self) -> usize {
        self.cap_per_shard * SHARDS
    }
}

/// A shard's lock, even if a panic poisoned it: a store's writes to an entry are plain field
/// assignments, which leave it consistent enough to decide on.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The shard a hash belongs to.
fn shard_index(hash: u64) -> usize {
    // Not the bits the map uses for buckets or tags: mix before picking the shard.
    let mixed = (hash ^ (hash >> 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> (u64::BITS - SHARDS.trailing_zeros())) as usize
}

/// A shard's index and its guard.
type Guard<'a, E, X> = (usize, MutexGuard<'a, Shard<E, X>>);

/// Some shards, locked (see [`ShardedMap::lock`]).
pub(crate) struct Locked<'a, E, X>(SmallVec<[Guard<'a, E, X>; 4]>);

impl<E, X> Locked<'_, E, X> {
    /// The locked shard of `hash`, if it is among these.
    pub(crate) fn shard(&mut self, hash: u64) -> Option<&mut Shard<E, X>> {
        let index = shard_index(hash);
        self.0
            .iter_mut()
            .find(|(i, _)| *i == index)
            .map(|(_, guard)| &mut **guard)
    }
}

/// One shard: its entries, reclaimed incrementally and capped, and what its store keeps
/// beside them under the same lock.
pub(crate) struct Shard<E, X = ()> {
    map: IndexMap<Id, E, foldhash::fast::RandomState>,
    /// Where the incremental sweep looks next.
    cursor: usize,
    /// A xorshift state for eviction samples.
    rng: u64,
    cap: usize,
    // Local-first mode's (the memory store keeps nothing beside its entries).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) side: X,
}

impl<E: Reclaim, X> Shard<E, X> {
    /// Runs `use_it` on the entry `at` points to (a `fresh` one if absent), keeping a fresh
    /// one only if it is not moot afterwards (`owned` names it then); sweeps a little and
    /// evicts to stay under the cap. Returns what `use_it` returned, and whether an entry that
    /// was not moot was evicted.
    pub(crate) fn with_entry<T>(
        &mut self,
        at: Lookup<'_>,
        now: u64,
        fresh: impl FnOnce() -> E,
        owned: impl FnOnce() -> (Arc<str>, Key),
        use_it: impl FnOnce(&mut E) -> T,
    ) -> (T, bool) {
        // The sweep comes after the entry's use: before, it would reclaim the entry about to be
        // used whenever the cursor is on it and its state has lapsed (in a shard of one hot
        // key, on every request), for it to be made and inserted afresh; a lapsed state is
        // revived in place instead.
        match self
            .map
            .raw_entry_mut_v1()
            .from_hash(at.hash, |id| at.is(id))
        {
            RawEntryMut::Occupied(mut occupied) => {
                let entry = occupied.get_mut();
                entry.revive(now);
                let out = use_it(entry);
                self.sweep(1, now);
                (out, false)
            }
            RawEntryMut::Vacant(_) => {
                let mut entry = fresh();
                let out = use_it(&mut entry);
                if entry.expires_at() <= now {
                    self.sweep(1, now);
                    return (out, false); // nothing to keep
                }
                (out, self.keep(at, now, entry, owned))
            }
        }
    }

    /// Inserts the new `entry` of `at` (named by `owned`), after making room for it; whether
    /// an entry that was not moot was evicted. Out of line: a hot key's checks find their
    /// entry, and the code of the insertion stays out of their way in the instruction cache.
    #[inline(never)]
    fn keep(
        &mut self,
        at: Lookup<'_>,
        now: u64,
        entry: E,
        owned: impl FnOnce() -> (Arc<str>, Key),
    ) -> bool {
        self.sweep(3, now);
        let evicted = self.map.len() >= self.cap && self.evict(now);
        let (policy, key) = owned();
        if let RawEntryMut::Vacant(vacant) =
            self.map.raw_entry_mut_v1().from_hash(at.hash, |_| false)
        {
            vacant.insert_hashed_nocheck(at.hash, Id { policy, key }, entry);
        }
        evicted
    }

    /// The entry `at` points to, if there is one (moot or not).
    pub(crate) fn get_mut(&mut self, at: Lookup<'_>) -> Option<&mut E> {
        match self
            .map
            .raw_entry_mut_v1()
            .from_hash(at.hash, |id| at.is(id))
        {
            RawEntryMut::Occupied(occupied) => Some(occupied.into_mut()),
            RawEntryMut::Vacant(_) => None,
        }
    }

    /// Removes the entry `at` points to; returns whether there was one.
    pub(crate) fn remove(&mut self, at: Lookup<'_>) -> bool {
        match self
            .map
            .raw_entry_mut_v1()
            .from_hash(at.hash, |id| at.is(id))
        {
            RawEntryMut::Occupied(occupied) => {
                occupied.swap_remove();
                true
            }
            RawEntryMut::Vacant(_) => false,
        }
    }

    /// Removes every entry that is moot at `now`.
    #[cfg(feature = "redis")]
    pub(crate) fn retain_live(&mut self, now: u64) {
        self.map.retain(|_, entry| entry.expires_at() > now);
        self.cursor = 0;
    }

    /// Looks at up to `steps` entries from the cursor, removing those that are moot. Every
    /// insert sweeps, so moot entries go within one pass of the cursor: memory follows the
    /// keys live within their TTL, with no full scan on any request.
    // Inlined: one step on every use of an entry.
    #[inline]
    fn sweep(&mut self, steps: usize, now: u64) {
        for _ in 0..steps {
            if self.cursor >= self.map.len() {
                self.cursor = 0;
                if self.map.is_empty() {
                    return;
                }
            }
            if self.map[self.cursor].expires_at() <= now {
                self.map.swap_remove_index(self.cursor);
            } else {
                self.cursor += 1;
            }
        }
    }

    /// Makes room for one entry at the cap: removes, among a random sample, the evictable
    /// entry that expires soonest (its loss forgets the least). With none evictable in the
    /// sample, removes nothing: the shard holds one more than its cap until a later insert
    /// finds room. Returns whether an entry that was not moot was evicted.
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
            .filter(|&i| self.map[i].evictable())
            .min_by_key(|&i| self.map[i].expires_at());
        let Some(victim) = victim else {
            return false;
        };
        let live = self.map[victim].expires_at() > now;
        self.map.swap_remove_index(victim);
        live
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// An entry whose state lapses at `expires_at`; counts its revivals in place.
    struct Lapsing {
        expires_at: u64,
        revived: u32,
    }

    impl Reclaim for Lapsing {
        fn expires_at(&self) -> u64 {
            self.expires_at
        }

        fn revive(&mut self, now: u64) {
            if self.expires_at <= now {
                self.revived += 1;
            }
        }
    }

    #[test]
    fn a_hot_keys_lapsed_state_is_revived_in_place_not_made_afresh() {
        let map: ShardedMap<Lapsing> = ShardedMap::new(100, 7, |_| ());
        let key = Key::new("hot");
        let at = map.lookup("p", key.as_str());
        let mut shard = map.shard(at.hash);
        let made = Cell::new(0);
        // Each use keeps state for 5 µs, lapsed by the next use: the sweep's cursor is on
        // the shard's one entry every time.
        for now in [10, 20, 30] {
            let fresh = || {
                made.set(made.get() + 1);
                Lapsing {
                    expires_at: 0,
                    revived: 0,
                }
            };
            let owned = || (Arc::from("p"), key.clone());
            shard.with_entry(at, now, fresh, owned, |e| e.expires_at = now + 5);
        }
        assert_eq!(made.get(), 1, "made once");
        assert_eq!(shard.get_mut(at).map(|e| e.revived), Some(2));
    }
}

//! The deny cache: a key the store denied is answered in memory until its retry time, so a
//! client hammering a denied key costs the store nothing until then.
//!
//! # Why it is exact
//!
//! The store denied cost `c` for a key at its time `t` and said the same request would pass
//! after `r` (`retry_after`: for each denying limit, the earliest time its state admits `c` if
//! nobody consumes anything more; the decision's is the longest of those). Until `t + r`:
//!
//! - a denied request consumes nothing, so the state only changes by time passing (accounted
//!   for in `r`) and by admissions and charges (`Store::charge`, debt included), here or on
//!   other instances, which only consume more and push the admission time later, never
//!   earlier;
//! - a request of cost `c' ≥ c` needs at least what `c` needs, in every algorithm.
//!
//! So every request of cost at least `c` for that key before `t + r` would have been denied by
//! the store too. The RLS's default, where every cost lands (`Commit::Always`), charges a
//! denied request too: that only adds consumption, so the argument holds; there the store's
//! retry is when the counter's debt is paid (a cost of 0 would pass), so its denials are
//! cached for a cost of 0 and answer every cost. A call answered from the cache is then not
//! charged (as envoyproxy/ratelimit's local cache skips its `INCRBY`): the answers stay the
//! store's, the counter's debt does not grow meanwhile. The cache measures `t + r` from an instant taken before the store call was
//! sent (never later than the store's `t`), so it ends no later than the store's own answer
//! would change. Every algorithm's `retry_after` is such a lower bound, to the microsecond (a
//! property test holds each of them to it); a denial that can never pass (the cost exceeds a
//! limit's capacity) is not cached, and neither is a decision the store did not make.
//!
//! When a denial expires, one request asks the store for the key while the others wait for
//! its answer (at most the store deadline): a fresh denial answers them all, an admission
//! hands the question to the next. A key held at its limit costs the store about two calls
//! per retry period per instance (the admission, then the next denial), not one per waiting
//! client.
//!
//! Only a change of the limits themselves (an override, a reset) would break the argument.
//! Each entry is stamped with the store's overrides and resets versions when it was asked
//! ([`Stamp`]); a lookup after either moved asks whether the denial still stands: not after
//! any override changed, nor after a reset of the key (or one sharing a state key with it),
//! made here or, for a Redis store, through another replica and read by its poller. Such an
//! entry is dropped, and the store asked again.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::decision::{Decision, DecisionSource};
use crate::key::Key;

/// Entries a layer's deny cache holds by default: about 3 MB at most.
pub(crate) const DEFAULT_DENY_CACHE: usize = 10_000;

const SHARDS: usize = 16;
/// Entries looked at to find one to evict when a shard is full.
const SAMPLE: usize = 8;

/// A denial of `key` under rule `rule`, valid until `until` for costs of at least `cost`.
#[derive(Debug)]
struct Entry {
    rule: usize,
    key: Key,
    decision: Decision,
    cost: u64,
    /// When the store was asked (never after it evaluated).
    asked: Instant,
    until: Instant,
    /// The store's versions when it was asked (or when the denial was last found to stand).
    stamp: Stamp,
    /// Who asks the store for this key once the denial has expired: one at a time.
    gate: Arc<Semaphore>,
}

/// The store's overrides and resets versions ([`Overrides::overrides_version`],
/// [`Admin::resets_version`]) a denial was asked under.
///
/// [`Overrides::overrides_version`]: crate::store::Overrides::overrides_version
/// [`Admin::resets_version`]: crate::store::Admin::resets_version
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) overrides: u64,
    pub(crate) resets: u64,
}

impl Stamp {
    /// `store`'s versions now.
    pub(crate) fn now(store: &dyn crate::store::Store) -> Self {
        Stamp {
            // 0 for a store without overrides or admin: its version never changes.
            overrides: (store.overrides()).map_or(0, crate::store::Overrides::overrides_version),
            resets: (store.admin()).map_or(0, crate::store::Admin::resets_version),
        }
    }
}

/// What the cache says about a request.
// Lives on the stack for one call; boxing the hit would allocate per cached answer.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Lookup {
    /// Nothing cached: ask the store.
    Miss,
    /// Denied, as the store would: answer with this.
    Hit(Decision),
    /// The denial expired: ask the store, holding this so that others wait for the answer.
    Refresh(OwnedSemaphorePermit),
    /// The denial expired and another request is asking the store: wait on this gate.
    Wait(Arc<Semaphore>),
}

/// Entries by the hash of (rule, key): a lookup clones nothing, and an entry whose rule and
/// key do not match (a collision) is a miss, never a wrong answer.
type Shard = Mutex<foldhash::HashMap<u64, Entry>>;

/// A bounded map from (rule, key) to the store's last denial.
#[derive(Debug)]
pub(crate) struct DenyCache {
    shards: Box<[Shard]>,
    per_shard: usize,
    hasher: foldhash::fast::RandomState,
    /// Entries across all shards: an empty cache costs a request one atomic load.
    len: AtomicUsize,
    /// The entries gauge, moved by this cache's changes (so the caches of several layers add
    /// up); taken at the first entry, from the recorder installed by then.
    #[cfg(feature = "metrics")]
    gauge: std::sync::OnceLock<metrics::Gauge>,
}

impl DenyCache {
    /// A cache of at most `capacity` entries; 0 turns it off.
    pub(crate) fn new(capacity: usize) -> Self {
        DenyCache {
            shards: (0..if capacity == 0 { 0 } else { SHARDS })
                .map(|_| Mutex::default())
                .collect(),
            per_shard: capacity.div_ceil(SHARDS),
            hasher: foldhash::fast::RandomState::default(),
            len: AtomicUsize::new(0),
            #[cfg(feature = "metrics")]
            gauge: std::sync::OnceLock::new(),
        }
    }

    /// Counts `added` entries more and `removed` fewer.
    fn changed(&self, added: usize, removed: usize) {
        self.len.fetch_add(added, Ordering::Relaxed);
        self.len.fetch_sub(removed, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        if added != removed {
            let gauge = self.gauge.get_or_init(|| {
                crate::telemetry::describe();
                metrics::gauge!(crate::telemetry::DENY_CACHE_ENTRIES)
            });
            gauge.increment(added as f64 - removed as f64);
        }
    }

    fn shard(&self, rule: usize, key: &Key) -> Option<(&Shard, u64)> {
        if self.shards.is_empty() {
            return None;
        }
        let hash = self.hasher.hash_one((rule, key));
        Some((
            &self.shards[(hash >> 56) as usize % self.shards.len()],
            hash,
        ))
    }

    /// What the cache knows of `cost` for `key` under rule `rule`. `gated`: the caller has
    /// already waited its turn at the key's gate (or given up waiting), so an expired denial
    /// sends it to the store. `stands` answers, for the stamp a denial was cached under, the
    /// store's stamp now if the denial still stands, else `None`: it is dropped, a miss.
    // Inlined: an empty cache (no denial cached anywhere) is one load on every request.
    #[inline]
    pub(crate) fn lookup(
        &self,
        rule: usize,
        key: &Key,
        cost: u64,
        gated: bool,
        stands: impl FnOnce(Stamp) -> Option<Stamp>,
    ) -> Lookup {
        if self.len.load(Ordering::Relaxed) == 0 {
            return Lookup::Miss;
        }
        self.lookup_cached(rule, key, cost, gated, stands)
    }

    /// [`DenyCache::lookup`] in a cache holding some denial.
    #[inline(never)]
    fn lookup_cached(
        &self,
        rule: usize,
        key: &Key,
        cost: u64,
        gated: bool,
        stands: impl FnOnce(Stamp) -> Option<Stamp>,
    ) -> Lookup {
        let Some((shard, hash)) = self.shard(rule, key) else {
            return Lookup::Miss;
        };
        let now = Instant::now();
        let mut map = shard.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(entry) = map.get_mut(&hash) else {
            return Lookup::Miss;
        };
        if entry.rule != rule || entry.key != *key {
            return Lookup::Miss;
        }
        match stands(entry.stamp) {
            Some(stamp) => entry.stamp = stamp,
            None => {
                map.remove(&hash);
                self.changed(0, 1);
                return Lookup::Miss;
            }
        }
        if now >= entry.until {
            if gated {
                return Lookup::Miss;
            }
            return match Arc::clone(&entry.gate).try_acquire_owned() {
                Ok(permit) => Lookup::Refresh(permit),
                Err(_) => Lookup::Wait(Arc::clone(&entry.gate)),
            };
        }
        if cost < entry.cost {
            return Lookup::Miss;
        }
        Lookup::Hit(
            entry
                .decision
                .aged(now - entry.asked)
                .with_source(DecisionSource::DenyCache),
        )
    }

    /// Remembers the store's `decision` for `cost`, asked at `asked` under the store's
    /// versions `stamp`, if it is a denial that can be cached.
    pub(crate) fn insert(
        &self,
        rule: usize,
        key: &Key,
        cost: u64,
        (asked, stamp): (Instant, Stamp),
        decision: &Decision,
    ) {
        let Some(retry) = cacheable_retry(decision) else {
            return;
        };
        let Some((shard, hash)) = self.shard(rule, key) else {
            return;
        };
        let until = asked + retry;
        let mut map = shard.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = map.get_mut(&hash)
            && entry.rule == rule
            && entry.key == *key
        {
            // The same gate: requests waiting on it find this denial.
            entry.decision = decision.clone();
            entry.cost = cost;
            entry.asked = asked;
            entry.until = until;
            entry.stamp = stamp;
            return;
        }
        let entry = Entry {
            rule,
            key: key.clone(),
            decision: decision.clone(),
            cost,
            asked,
            until,
            stamp,
            gate: Arc::new(Semaphore::new(1)),
        };
        if map.insert(hash, entry).is_some() {
            return;
        }
        let mut evicted = 0;
        if map.len() > self.per_shard {
            // Expired entries go first, else the one that would expire soonest of a sample.
            let now = Instant::now();
            let victim = map
                .iter()
                .filter(|(h, _)| **h != hash)
                .take(SAMPLE)
                .min_by_key(|(_, e)| if e.until <= now { None } else { Some(e.until) })
                .map(|(h, _)| *h);
            if let Some(victim) = victim {
                map.remove(&victim);
                evicted = 1;
            }
        }
        self.changed(1, evicted);
    }

    /// Drops the denial of `key` under rule `rule`, if any (its state was reset: the denial no
    /// longer stands).
    pub(crate) fn remove(&self, rule: usize, key: &Key) {
        let Some((shard, hash)) = self.shard(rule, key) else {
            return;
        };
        let mut map = shard.lock().unwrap_or_else(PoisonError::into_inner);
        if map
            .get(&hash)
            .is_some_and(|entry| entry.rule == rule && entry.key == *key)
        {
            map.remove(&hash);
            self.changed(0, 1);
        }
    }

    /// Drops every denial cached under rule `rule` (a shared level of a hierarchical key was
    /// reset: any key counting under it may be let through now).
    pub(crate) fn remove_rule(&self, rule: usize) {
        for shard in self.shards.iter() {
            let mut map = shard.lock().unwrap_or_else(PoisonError::into_inner);
            let before = map.len();
            map.retain(|_, entry| entry.rule != rule);
            self.changed(0, before - map.len());
        }
    }

    /// Entries held (expired ones included until they are looked up or evicted).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}

impl Drop for DenyCache {
    /// The layer's rules were replaced (a reload) or it is gone: its denials leave the gauge.
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        if let Some(gauge) = self.gauge.get() {
            gauge.decrement(self.len.load(Ordering::Relaxed) as f64);
        }
    }
}

/// How long a store decision says its denial stands, if it can be cached: a denial by the
/// store with a retry time (not one whose cost can never pass).
fn cacheable_retry(decision: &Decision) -> Option<Duration> {
    if decision.is_allowed() || decision.source() != DecisionSource::Store {
        return None;
    }
    // A slot of a concurrency limit comes back whenever a response ends, sooner than any
    // time the store could name: such a denial does not stand until its retry time.
    let concurrency = |s: &crate::LimitState| {
        !s.is_allowed() && s.limit().algorithm() == crate::Algorithm::Concurrency
    };
    if decision.limits().iter().any(concurrency) {
        return None;
    }
    decision.retry_after().filter(|retry| !retry.is_zero())
}

#[cfg(test)]
mod tests;

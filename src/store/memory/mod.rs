//! State in this process: the same five algorithms as the Lua scripts, in Rust, with the same
//! decisions. For one replica, development, tests, and as a local fallback.

mod builder;
mod charge;
mod contract;
mod entry;
mod limit_keys;
mod mirror;
mod penalty;
mod refund;
mod reserve;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard};

pub use builder::MemoryStoreBuilder;
use entry::Entry;

use super::clock::Clock;
use super::override_table::OverrideTable;
use super::shard::{Lookup, Shard, ShardedMap};
use super::{Commit, KeyState};
use crate::decision::Decision;
use crate::error::StoreError;
use crate::identity::LeaseIds;
use crate::key::Key;
use crate::lease::Lease;
use crate::limit::Algorithm;
use crate::policy::Policy;

/// A store in this process's memory, with exactly the decisions of
/// `RedisStore`: same algorithms, same integer arithmetic, same atomic
/// multi-limit commit (a differential test holds the two to it on random traces).
///
/// State is sharded over 64 independent locks, so concurrent requests rarely contend.
/// Memory stays bounded:
///
/// - **Reclamation**: a key's state is dropped once it is moot (when Redis would have expired
///   it). Every request examines one entry of its shard, and every new key two more, so expired
///   state goes within one pass, without a full scan on any request.
/// - **Cap** ([`MemoryStoreBuilder::max_keys`], default 100 000): when a new key would exceed
///   it, the key whose state expires soonest among 8 sampled from its shard is evicted. That
///   key starts fresh if it comes back: under a flood of distinct keys the cap trades a
///   little exactness for a fixed memory ceiling. [`MemoryStore::evictions`] counts it.
///
/// Cheap to clone: clones share state.
///
/// ```
/// use std::time::Duration;
/// use redlimit::store::MemoryStore;
/// use redlimit::{Limit, Policy, RateLimitLayer};
///
/// let policy = Policy::new("api", [Limit::gcra(10, Duration::from_secs(1))?])?;
/// let layer = RateLimitLayer::new(MemoryStore::new(), policy);
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

struct Inner {
    entries: ShardedMap<Entry>,
    clock: Box<dyn Clock>,
    evictions: AtomicU64,
    overrides: OverrideTable,
    refunds: refund::Tokens,
    leases: LeaseIds,
    /// The resets made through [`Admin::reset`](crate::store::Admin::reset), for the layers in front of this store.
    resets: super::reset_log::ResetLog,
}

impl MemoryStore {
    /// An empty store on the system clock, with the default key cap.
    ///
    /// ```
    /// let store = redlimit::store::MemoryStore::new();
    /// assert_eq!(store.len(), 0);
    /// ```
    pub fn new() -> Self {
        MemoryStore::builder().build()
    }

    /// An empty store on the given clock (e.g. a [`ManualClock`](super::ManualClock) in tests).
    ///
    /// ```
    /// use redlimit::store::{ManualClock, MemoryStore};
    /// let clock = ManualClock::new(0);
    /// let store = MemoryStore::with_clock(clock.clone());
    /// ```
    pub fn with_clock(clock: impl Clock) -> Self {
        MemoryStore::builder().clock(clock).build()
    }

    /// Starts configuring a store.
    ///
    /// ```
    /// let store = redlimit::store::MemoryStore::builder().max_keys(1_000_000).build();
    /// ```
    pub fn builder() -> MemoryStoreBuilder {
        MemoryStoreBuilder::new()
    }

    /// Checks synchronously: what [`Store::check`](crate::store::Store::check) does, without a future.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Key, Limit, Policy};
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::fixed_window(1, Duration::from_secs(9))?])?;
    /// assert!(store.check_now(&policy, &Key::new("k"), 1).is_allowed());
    /// assert!(!store.check_now(&policy, &Key::new("k"), 1).is_allowed());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn check_now(&self, policy: &Policy, key: &Key, cost: u64) -> Decision {
        self.decide(policy, key, std::slice::from_ref(&cost))
    }

    /// Checks synchronously what [`LimitCosts::check_costs`](crate::store::LimitCosts::check_costs) checks: `costs[i]` units against
    /// limit `i` of `policy`, all committed or none; or why those costs cannot be checked.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::{Commit, MemoryStore};
    /// use redlimit::{Key, Limit, Policy};
    /// let store = MemoryStore::new();
    /// let day = Duration::from_secs(86_400);
    /// let policy = Policy::new("p", [Limit::gcra(9, day)?, Limit::fixed_window(2, day)?])?;
    /// let decision = store.check_costs_now(&policy, &Key::new("k"), &[4, 1], Commit::AllOrNone)?;
    /// assert_eq!(decision.limits()[0].remaining(), 5);
    /// assert_eq!(decision.limits()[1].remaining(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_costs_now(
        &self,
        policy: &Policy,
        key: &Key,
        costs: &[u64],
        commit: Commit,
    ) -> Result<Decision, StoreError> {
        super::validate_costs(policy, costs, commit)?;
        match commit {
            Commit::Always => Ok(self.always(policy, key, costs)),
            _ => Ok(self.decide(policy, key, costs)),
        }
    }

    /// Each limit charged its own cost among `costs` ([`Commit::Always`]).
    fn always(&self, policy: &Policy, key: &Key, costs: &[u64]) -> Decision {
        let inner = &*self.inner;
        let overridden = inner.overrides.effective(policy, key);
        let policy = overridden.as_ref().unwrap_or(policy);
        let now = inner.clock.now_us();
        if key.has_limit_keys() {
            let states = self.always_parts(policy, key, costs, now);
            return Decision::from_states(policy.name_arc(), now, states);
        }
        let (decision, evicted) = Decision::filled(policy.name_arc(), now, |states| {
            let (at, mut shard) = self.shard(policy, key);
            let ((), evicted) = entry::with_entry(&mut shard, at, policy, key, now, |entry| {
                entry.always(policy, costs, now, states);
            });
            evicted
        });
        self.count_evictions(u64::from(evicted));
        decision
    }

    /// The decision on `costs` (one per limit, or one for all: `store::cost_at`).
    fn decide(&self, policy: &Policy, key: &Key, costs: &[u64]) -> Decision {
        let inner = &*self.inner;
        let overridden = inner.overrides.effective(policy, key);
        let policy = overridden.as_ref().unwrap_or(policy);
        let now = inner.clock.now_us();
        let lease =
            (policy.holds_leases() && lease_cost(policy, costs) > 0).then(|| inner.leases.next());
        let (mut decision, penalized) = if key.has_limit_keys() {
            self.check_keyed(policy, key, costs, now, lease)
        } else {
            // The decision is allocated before the shard's lock is taken; the entry's states are
            // written straight into it under the lock.
            let (decision, (penalized, evicted)) =
                Decision::filled(policy.name_arc(), now, |states| {
                    let (at, mut shard) = self.shard(policy, key);
                    entry::with_entry(&mut shard, at, policy, key, now, |entry| {
                        let penalized = penalty::check(entry, policy, costs, now, states);
                        if let (Some(lease), true) = (lease, states.iter().all(|s| s.is_allowed()))
                        {
                            entry.hold(lease.id(), now);
                        }
                        penalized
                    })
                });
            self.count_evictions(u64::from(evicted));
            (decision, penalized)
        };
        if penalized {
            decision = decision.penalized();
        }
        match lease {
            Some(lease) if decision.is_allowed() => decision.with_lease(lease),
            _ => decision,
        }
    }

    /// Gives back synchronously what [`Store::release`](crate::store::Store::release) gives back: `lease`, held for `key`
    /// under `policy`'s concurrency limit. Answers whether it was still held: not released
    /// before, and not dropped after it lapsed (a lapsed lease goes at the key's next check or
    /// sweep, as Redis's script trims it at the key's next check: until then either store
    /// answers `true`, and giving it back frees nothing a check would not have freed).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Key, Limit, Policy};
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::concurrency(1, Duration::from_secs(30))?])?;
    /// let lease = store.check_now(&policy, &Key::new("k"), 1).lease().unwrap();
    /// assert!(store.release_now(&policy, &Key::new("k"), lease));
    /// assert!(!store.release_now(&policy, &Key::new("k"), lease), "never twice");
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn release_now(&self, policy: &Policy, key: &Key, lease: Lease) -> bool {
        if key.has_limit_keys() {
            return self.release_parts(policy, key, lease.id());
        }
        let (at, mut shard) = self.shard(policy, key);
        shard
            .get_mut(at)
            .is_some_and(|entry| entry.release(lease.id()))
    }

    /// Reads synchronously what [`Admin::inspect`](crate::store::Admin::inspect) reads: `key`'s state under `policy` for a
    /// request of cost 1, nothing consumed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Key, Limit, Policy};
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::fixed_window(3, Duration::from_secs(9))?])?;
    /// store.check_now(&policy, &Key::new("k"), 1);
    /// assert_eq!(store.inspect_now(&policy, &Key::new("k")).limits()[0].remaining(), 2);
    /// assert_eq!(store.inspect_now(&policy, &Key::new("k")).limits()[0].remaining(), 2);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn inspect_now(&self, policy: &Policy, key: &Key) -> KeyState {
        let inner = &*self.inner;
        let overridden = inner.overrides.effective(policy, key);
        let policy = overridden.as_ref().unwrap_or(policy);
        let now = inner.clock.now_us();
        if key.has_limit_keys() {
            let states = self.peek_parts(policy, key, now);
            return KeyState::from_uncommitted(Decision::from_states(
                policy.name_arc(),
                now,
                states,
            ));
        }
        let (at, mut shard) = self.shard(policy, key);
        // A state that is not kept (absent or expired) reads as fresh;
        // nothing is inserted, since nothing is committed.
        let (states, _) = entry::with_entry(&mut shard, at, policy, key, now, |entry| {
            entry.peek(policy, 1, now)
        });
        KeyState::from_uncommitted(Decision::from_states(policy.name_arc(), now, states))
    }

    /// Deletes synchronously what [`Admin::reset`](crate::store::Admin::reset) deletes: `key`'s state under `policy`.
    /// Returns whether there was any.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Key, Limit, Policy};
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::fixed_window(1, Duration::from_secs(9))?])?;
    /// store.check_now(&policy, &Key::new("k"), 1);
    /// assert!(store.reset_now(&policy, &Key::new("k")));
    /// assert!(store.check_now(&policy, &Key::new("k"), 1).is_allowed());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn reset_now(&self, policy: &Policy, key: &Key) -> bool {
        if key.has_limit_keys() {
            return self.reset_parts(policy, key);
        }
        let (at, mut shard) = self.shard(policy, key);
        shard.remove(at)
    }

    /// Where the entry of (policy, key) is, and its shard, locked.
    fn shard<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a Key,
    ) -> (Lookup<'a>, MutexGuard<'a, Shard<Entry>>) {
        let entries = &self.inner.entries;
        let at = entries.lookup(policy.name(), key.as_str());
        (at, entries.shard(at.hash))
    }

    /// The decision on a key with limit keys, and whether it was penalized (out of line: the
    /// plain key's path stays short in code).
    #[inline(never)]
    fn check_keyed(
        &self,
        policy: &Policy,
        key: &Key,
        costs: &[u64],
        now: u64,
        lease: Option<Lease>,
    ) -> (Decision, bool) {
        let (states, penalized) = self.check_parts(policy, key, costs, now, lease);
        (
            Decision::from_states(policy.name_arc(), now, states),
            penalized,
        )
    }

    /// Counts `evicted` entries whose state was live when the cap evicted them.
    fn count_evictions(&self, evicted: u64) {
        if evicted > 0 {
            self.evicted(evicted);
        }
    }

    /// Counts and logs an eviction of live state (rare: out of line).
    #[cold]
    #[inline(never)]
    fn evicted(&self, evicted: u64) {
        self.inner.evictions.fetch_add(evicted, Ordering::Relaxed);
        crate::telemetry::memory_eviction();
        tracing::debug!("memory store at its key cap: evicted live state");
    }

    /// How many keys hold state (across policies).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Key, Limit, Policy};
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::gcra(5, Duration::from_secs(1))?])?;
    /// store.check_now(&policy, &Key::new("a"), 1);
    /// store.check_now(&policy, &Key::new("b"), 1);
    /// assert_eq!(store.len(), 2);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.inner.entries.len()
    }

    /// Whether no key holds state.
    ///
    /// ```
    /// assert!(redlimit::store::MemoryStore::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many times the key cap evicted state that was still live.
    ///
    /// ```
    /// assert_eq!(redlimit::store::MemoryStore::new().evictions(), 0);
    /// ```
    pub fn evictions(&self) -> u64 {
        self.inner.evictions.load(Ordering::Relaxed)
    }
}

/// The cost of `policy`'s concurrency limit among `costs`: a lease is taken only when it is
/// charged.
fn lease_cost(policy: &Policy, costs: &[u64]) -> u64 {
    policy
        .limits()
        .iter()
        .position(|l| l.algorithm() == Algorithm::Concurrency)
        .map_or(0, |p| super::cost_at(costs, p))
}

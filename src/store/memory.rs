//! State in this process: the same five algorithms as the Lua scripts, in Rust, with the same
//! decisions. For one replica, development, tests, and as a local fallback.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use super::{Store, StoreFuture};
use crate::algorithm::{fixed_window, gcra, sliding_log::Log, sliding_window, token_bucket, Eval};
use crate::decision::{Decision, LimitState};
use crate::error::StoreError;
use crate::key::Key;
use crate::limit::{Algorithm, Limit};
use crate::policy::Policy;

/// Independent locks; a check holds one shard's lock for a few hundred nanoseconds.
const SHARDS: usize = 64;

/// A source of Unix time in microseconds, injectable for tests.
///
/// ```
/// use redlimit::{Clock, SystemClock};
/// assert!(SystemClock.now_us() > 1_600_000_000_000_000);
/// ```
pub trait Clock: Send + Sync + 'static {
    /// Microseconds since the Unix epoch.
    fn now_us(&self) -> u64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }
}

/// A clock that moves only when told to: deterministic tests of time-dependent behaviour.
///
/// ```
/// use redlimit::{Clock, ManualClock};
/// let clock = ManualClock::new(1_000);
/// clock.advance(std::time::Duration::from_millis(2));
/// assert_eq!(clock.now_us(), 3_000);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock showing `now_us` (Unix µs). Clones share the time.
    pub fn new(now_us: u64) -> Self {
        ManualClock(Arc::new(AtomicU64::new(now_us)))
    }

    /// Sets the time.
    pub fn set(&self, now_us: u64) {
        self.0.store(now_us, Ordering::SeqCst);
    }

    /// Moves the time forward.
    pub fn advance(&self, by: std::time::Duration) {
        let us = u64::try_from(by.as_micros()).unwrap_or(u64::MAX);
        self.0.fetch_add(us, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A store in this process's memory, with exactly the decisions of [`RedisStore`](crate::RedisStore)
/// (same algorithms, same integer arithmetic, same atomic multi-limit commit).
///
/// State is sharded over independent locks, so concurrent requests rarely contend. Cheap to
/// clone: clones share state.
///
/// ```
/// use std::time::Duration;
/// use redlimit::{Limit, MemoryStore, Policy, RateLimitLayer};
///
/// let layer = RateLimitLayer::new(
///     MemoryStore::new(),
///     Policy::new("api").limit(Limit::gcra(10, Duration::from_secs(1))),
/// );
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

/// A shard: (policy name, key) → state.
type Shard = Mutex<HashMap<(Arc<str>, Key), Entry>>;

struct Inner {
    shards: Box<[Shard]>,
    hasher: RandomState,
    clock: Box<dyn Clock>,
}

/// One key's state under one policy.
struct Entry {
    limits: Vec<Limit>,
    slots: Vec<Slot>,
    log: Log,
}

#[derive(Clone, Copy)]
enum Slot {
    FixedWindow(Option<fixed_window::State>),
    SlidingWindow(Option<sliding_window::State>),
    SlidingLog,
    TokenBucket(Option<token_bucket::State>),
    Gcra(Option<u64>),
}

impl Entry {
    fn new(limits: &[Limit]) -> Self {
        let slots = limits
            .iter()
            .map(|l| match l.algorithm() {
                Algorithm::FixedWindow => Slot::FixedWindow(None),
                Algorithm::SlidingWindow => Slot::SlidingWindow(None),
                Algorithm::SlidingLog => Slot::SlidingLog,
                Algorithm::TokenBucket => Slot::TokenBucket(None),
                Algorithm::Gcra => Slot::Gcra(None),
            })
            .collect();
        Entry {
            limits: limits.to_vec(),
            slots,
            log: Log::default(),
        }
    }

    /// Evaluates every limit, commits all or none, and reports each limit's state.
    fn check(&mut self, policy: &Policy, cost: u64, now: u64) -> Vec<LimitState> {
        let max_log = policy.max_log_period_us();
        if max_log > 0 {
            self.log.trim(now, max_log);
        }
        let evals: Vec<(Eval, Slot)> = self
            .limits
            .iter()
            .zip(&self.slots)
            .map(|(limit, slot)| {
                let (n, p) = (limit.count(), limit.period_us());
                match *slot {
                    Slot::FixedWindow(s) => {
                        let (e, next, _) = fixed_window::check(s, n, p, cost, now);
                        (e, Slot::FixedWindow(Some(next)))
                    }
                    Slot::SlidingWindow(s) => {
                        let (e, next, _) = sliding_window::check(s, n, p, cost, now);
                        (e, Slot::SlidingWindow(Some(next)))
                    }
                    Slot::SlidingLog => (self.log.check(n, p, cost, now), Slot::SlidingLog),
                    Slot::TokenBucket(s) => {
                        let (e, next) = token_bucket::check(s, n, p, cost, now);
                        (e, Slot::TokenBucket(Some(next)))
                    }
                    Slot::Gcra(s) => {
                        let (e, next) = gcra::check(s, n, p, cost, now);
                        (e, Slot::Gcra(Some(next)))
                    }
                }
            })
            .collect();
        let allowed = evals.iter().all(|(e, _)| e.allowed);
        if allowed {
            for (slot, (_, next)) in self.slots.iter_mut().zip(&evals) {
                *slot = *next;
            }
            if max_log > 0 {
                self.log.record(now, cost);
            }
        }
        self.limits
            .iter()
            .zip(&evals)
            .map(|(limit, (e, _))| {
                let (remaining, reset) = e.reported(allowed);
                LimitState::from_raw(*limit, e.allowed, remaining, reset, e.retry)
            })
            .collect()
    }
}

impl MemoryStore {
    /// An empty store on the system clock.
    ///
    /// ```
    /// let store = redlimit::MemoryStore::new();
    /// ```
    pub fn new() -> Self {
        MemoryStore::with_clock(SystemClock)
    }

    /// An empty store on the given clock (e.g. a [`ManualClock`] in tests).
    ///
    /// ```
    /// use redlimit::{ManualClock, MemoryStore};
    /// let clock = ManualClock::new(0);
    /// let store = MemoryStore::with_clock(clock.clone());
    /// ```
    pub fn with_clock(clock: impl Clock) -> Self {
        MemoryStore {
            inner: Arc::new(Inner {
                shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
                hasher: RandomState::new(),
                clock: Box::new(clock),
            }),
        }
    }

    /// Checks synchronously: what [`Store::check`] does, without a future.
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use redlimit::{Key, Limit, MemoryStore, Policy};
    /// let store = MemoryStore::new();
    /// let policy = Arc::new(Policy::new("p").limit(Limit::fixed_window(1, Duration::from_secs(9))));
    /// assert!(store.check_now(&policy, &Key::new("k"), 1).is_allowed());
    /// assert!(!store.check_now(&policy, &Key::new("k"), 1).is_allowed());
    /// ```
    pub fn check_now(&self, policy: &Arc<Policy>, key: &Key, cost: u64) -> Decision {
        let now = self.inner.clock.now_us();
        let id = (policy.name_arc(), key.clone());
        let shard = &self.inner.shards[self.inner.hasher.hash_one(&id) as usize % SHARDS];
        // A panic elsewhere while holding the lock leaves state that is still consistent
        // (every write is a whole-value assignment), so a poisoned lock is used as is.
        let mut map = shard.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = map.entry(id).or_insert_with(|| Entry::new(policy.limits()));
        if entry.limits != policy.limits() {
            *entry = Entry::new(policy.limits());
        }
        let states = entry.check(policy, cost, now);
        drop(map);
        Decision::from_states(policy.name_arc(), now, states)
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").finish_non_exhaustive()
    }
}

impl Store for MemoryStore {
    fn check(&self, policy: &Arc<Policy>, key: &Key, cost: u64) -> StoreFuture {
        let decision: Result<Decision, StoreError> = Ok(self.check_now(policy, key, cost));
        Box::pin(std::future::ready(decision))
    }
}

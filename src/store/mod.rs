//! Where rate state lives. A [`Store`] is the only part of the crate that does I/O: it
//! evaluates every limit of a policy for a key, atomically, and answers with a
//! [`Decision`](crate::Decision).
//!
//! | store | state | decisions | use it for |
//! |---|---|---|---|
//! | [`MemoryStore`] | this process | the algorithms in Rust, no I/O | one replica, tests, the local fallback |
//! | `RedisStore` (feature `redis`) | Redis or Valkey: standalone, Cluster, Sentinel, TLS | one Lua script evaluation per decision (batched under load), Redis `TIME` | limits shared by every replica |
//!
//! Both give the same decisions for the same sequence of requests (a differential test holds
//! them to it). A store of your own implements [`Store`]: build the answer with
//! [`Decision::new`](crate::Decision::new) and [`LimitState`](crate::LimitState)'s
//! constructors.
//!
//! ```
//! use std::time::Duration;
//! use redlimit::store::{MemoryStore, Store};
//! use redlimit::{Key, Limit, Policy};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let store = MemoryStore::new();
//! let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
//! assert!(store.check(&policy, &Key::new("k"), 1).await.unwrap().is_allowed());
//! assert!(!store.check(&policy, &Key::new("k"), 1).await.unwrap().is_allowed());
//! # });
//! ```

mod admin;
mod check;
mod clock;
mod costs;
mod future;
mod key_state;
#[cfg(feature = "redis")]
pub(crate) mod local_first;
mod memory;
mod override_table;
mod overrides;
#[cfg(feature = "redis")]
mod redis;
mod refund;
mod reserve;
mod reset_log;
mod settlement;
mod shard;
#[cfg(all(feature = "redis", test))]
pub(crate) use self::redis::state_key;
#[cfg(all(feature = "redis", feature = "__test-hooks"))]
pub(crate) use self::redis::{decode_reply, redis_store_error, refund_call, script_call};

#[cfg(feature = "redis")]
pub use self::local_first::{
    DEFAULT_LOCAL_AFTER, DEFAULT_MARKS, DEFAULT_SYNC_INTERVAL, LocalFirstStore,
    LocalFirstStoreBuilder,
};
#[cfg(feature = "redis")]
pub use self::redis::{RedisStore, RedisStoreBuilder};
pub use admin::Admin;
pub use check::{Check, CheckFuture};
pub use clock::{Clock, ManualClock, SystemClock};
#[cfg(feature = "redis")]
pub(crate) use costs::largest as largest_cost;
pub(crate) use costs::validate as validate_costs;
pub use costs::{Commit, LimitCosts};
pub use future::StoreFuture;
pub(crate) use future::unsupported;
pub use key_state::KeyState;
pub use memory::{MemoryStore, MemoryStoreBuilder};
pub use overrides::{Override, Overrides};
pub use refund::{Refund, Refunds};
pub use reserve::{Reservation, Reservations, Reserved, reservable};
pub(crate) use reserve::{cost_at, micros};
pub(crate) use settlement::Settlement;
pub use shard::DEFAULT_MAX_KEYS;

use std::sync::Arc;

use crate::key::Key;
use crate::lease::Lease;
use crate::policy::Policy;

/// Evaluates a policy's limits for a key and commits them all or none.
///
/// An implementation must hold the semantics of the crate documentation:
///
/// - every limit of the policy is evaluated against the current state; the request is allowed
///   only if every limit allows it, and only then is `cost` consumed from every limit;
/// - a denied request consumes nothing;
/// - a `cost` larger than some limit could ever admit is denied without consuming, that limit
///   reported with [`LimitState::over_capacity`](crate::LimitState::over_capacity);
/// - the answer is a [`Decision`](crate::Decision) built by [`Decision::new`](crate::Decision::new)
///   for this policy (one state per limit, in order).
///
/// Answer with [`Check::Ready`] when no I/O is needed: the layer then skips its timer and
/// allocates nothing for the check.
///
/// Beside the admission check, a store may offer the *charge* ([`Store::charge`]): a cost
/// already incurred (the tokens a response used), counted whatever the state, past the
/// limits too (debt), so that later checks are refused until time has paid it.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use redlimit::store::{Check, Store};
/// use redlimit::{Decision, Key, LimitState, Policy};
///
/// /// Allows everything, reporting every limit as untouched.
/// struct AllowAll;
///
/// impl Store for AllowAll {
///     fn check(&self, policy: &Policy, _key: &Key, _cost: u64) -> Check {
///         let states = policy
///             .limits()
///             .iter()
///             .map(|l| LimitState::allowed(*l, l.count(), Duration::ZERO));
///         Check::ready(Decision::new(policy, SystemTime::now(), states))
///     }
/// }
/// ```
pub trait Store: Send + Sync + 'static {
    /// Checks `cost` units for `key` against every limit of `policy`, committing them if all
    /// allow it.
    fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Check;

    /// Charges `cost` units for `key` to every limit of `policy`, whatever their state: a cost
    /// already incurred (a response's tokens, known once it is made), which is never refused
    /// and lands past the limits too. Atomic, as a check: every limit charged, in one step
    /// (one script call in Redis).
    ///
    /// - **Debt.** Past a limit, the state owes the excess: a fixed window's count goes over
    ///   `N` (until the window ends), a sliding window's weighs until it decays, the sliding
    ///   log records the units, and GCRA's and the token bucket's state moves past a full
    ///   period (the time the next unit is allowed moves later by the units owed). Checks are
    ///   refused meanwhile, with 0 remaining and a retry when the debt is paid.
    /// - **The cap.** No limit's state holds more than twice its count `N`: a charge stops
    ///   there. So a client that keeps calling while refused, charged for every call, owes at
    ///   most one period's units beyond the limit: once it stops, it waits at most a period
    ///   (plus one emission interval) for its next unit, never for ever.
    /// - **Not charged:** a concurrency limit's slots (they are leases, taken by checks) and
    ///   the penalty box (a charge neither boxes a key nor reads its box).
    ///
    /// The answer is the decision after the charge, as a check of cost 1 would find the state
    /// now, consuming nothing: [`is_allowed`](crate::Decision::is_allowed) whether such a
    /// request would pass, [`remaining`](crate::Decision::remaining) 0 while in debt,
    /// [`retry_after`](crate::Decision::retry_after) when the debt is paid, and
    /// [`reset_at`](crate::Decision::reset_at) when the limit is fully free. The default
    /// answers [`StoreError::Unsupported`](crate::StoreError::Unsupported): the memory,
    /// Redis and local-first stores charge.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Store};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("tokens", [Limit::fixed_window(1_000, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let key = Key::new("tenant-7");
    /// // Admitted with an estimate of 100 tokens; the response used 1 400.
    /// assert!(store.check(&policy, &key, 100).await.unwrap().is_allowed());
    /// let after = store.charge(&policy, &key, 1_300).await.unwrap();
    /// assert!(!after.is_allowed(), "400 tokens owed until the window ends");
    /// assert_eq!(after.remaining(), Some(0));
    /// assert!(!store.check(&policy, &key, 1).await.unwrap().is_allowed());
    /// # });
    /// ```
    fn charge(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        let _ = (policy, key, cost);
        Check::ready(Err(crate::error::StoreError::Unsupported("charges")))
    }

    /// Gives back `lease`, the slot a request admitted under `policy`'s concurrency limit
    /// held for `key` ([`Decision::lease`](crate::Decision::lease)). The layer calls it once
    /// per lease, when the response body ends or is dropped, on a spawned task: the response
    /// never waits for it. Releasing a lease that is gone (released before, or lapsed after
    /// its timeout) does nothing, so it never frees another request's slot. A lease whose
    /// release fails or never comes (its replica died) lapses after the limit's lease timeout.
    /// The default does nothing, for stores that make no leases.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Store};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::concurrency(1, Duration::from_secs(30)).unwrap()]).unwrap();
    /// let key = Key::new("k");
    /// let lease = store.check_now(&policy, &key, 1).lease().unwrap();
    /// assert!(!store.check_now(&policy, &key, 1).is_allowed());
    /// store.release(&policy, &key, lease).await.unwrap();
    /// assert!(store.check_now(&policy, &key, 1).is_allowed());
    /// # });
    /// ```
    fn release(&self, policy: &Policy, key: &Key, lease: Lease) -> StoreFuture<()> {
        let _ = (policy, key, lease);
        Box::pin(std::future::ready(Ok(())))
    }

    /// Which part of the store answers for `key` under `policy`, among parts that fail
    /// independently: the layer keeps a circuit breaker per domain (folded onto 128), so one
    /// sick part does not switch limiting off for the others. The default, one domain, suits
    /// a store that is up or down as a whole; a Redis Cluster store answers with the key's
    /// hash-slot range.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Store};
    /// use redlimit::{Key, Limit, Policy};
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// assert_eq!(MemoryStore::new().failure_domain(&policy, &Key::new("k")), 0);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    fn failure_domain(&self, policy: &Policy, key: &Key) -> u16 {
        let _ = (policy, key);
        0
    }

    /// The store's optional power to read and reset a key's state ([`Admin`]), if it has it
    /// (the default: none). A [`Handle`](crate::layer::Handle)'s `inspect` and `reset` answer
    /// [`StoreError::Unsupported`](crate::StoreError::Unsupported) over a store without it.
    ///
    /// ```
    /// use redlimit::store::{MemoryStore, Store};
    /// assert!(MemoryStore::new().admin().is_some());
    /// ```
    fn admin(&self) -> Option<&dyn Admin> {
        None
    }

    /// The store's optional power to hold per-key overrides ([`Overrides`]), if it has it (the
    /// default: none).
    ///
    /// ```
    /// use redlimit::store::{MemoryStore, Store};
    /// assert!(MemoryStore::new().overrides().is_some());
    /// ```
    fn overrides(&self) -> Option<&dyn Overrides> {
        None
    }

    /// The store's optional power to give back what an admitted request consumed
    /// ([`Refunds`]), if it has it (the default: none). A layer builder refuses
    /// [`refund_if`](crate::layer::RateLimitBuilder::refund_if) over a store without it
    /// ([`ConfigError::RefundsUnsupported`](crate::ConfigError::RefundsUnsupported)).
    ///
    /// ```
    /// use redlimit::store::{MemoryStore, Store};
    /// assert!(MemoryStore::new().refunds().is_some());
    /// ```
    fn refunds(&self) -> Option<&dyn Refunds> {
        None
    }

    /// The store's optional power to check a policy with a cost of its own for each limit,
    /// in one atomic step ([`LimitCosts`]), if it has it (the default: none; the RLS service
    /// then checks its descriptors of different hits one cost at a time).
    ///
    /// ```
    /// use redlimit::store::{MemoryStore, Store};
    /// assert!(MemoryStore::new().limit_costs().is_some());
    /// ```
    fn limit_costs(&self) -> Option<&dyn LimitCosts> {
        None
    }

    /// The store's optional power to book future slots ([`Reservations`]): what the client
    /// side's [`Limiter`](crate::limiter::Limiter) waits on, if the store has it (the default:
    /// none; the limiter then checks and retries).
    ///
    /// ```
    /// use redlimit::store::{MemoryStore, Store};
    /// assert!(MemoryStore::new().reservations().is_some());
    /// ```
    fn reservations(&self) -> Option<&dyn Reservations> {
        None
    }

    /// What kind of store this is, for metrics labels (`memory`, `redis`; `custom` by
    /// default). A short constant: it becomes a label value.
    ///
    /// ```
    /// use redlimit::store::{MemoryStore, Store};
    /// assert_eq!(MemoryStore::new().kind(), "memory");
    /// ```
    fn kind(&self) -> &'static str {
        "custom"
    }

    /// Readies the store for checks under `policy` before the first one comes, without
    /// waiting: the layer calls it for each of its policies when it is built (and when its
    /// rules are replaced). A `RedisStore` loads the policy's script in the background, so the
    /// first decision after start costs one round trip, not the three of a `NOSCRIPT`, a
    /// `SCRIPT LOAD` and the call again. The default does nothing.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Store};
    /// use redlimit::{Limit, Policy};
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// MemoryStore::new().prepare(&policy);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    fn prepare(&self, policy: &Policy) {
        let _ = policy;
    }

    /// A cheap round trip to the part of the store behind failure domain `domain`
    /// ([`Store::failure_domain`]) that does not queue behind the checks in flight (Redis: a
    /// `PING` on a connection of its own), or `None` if the store offers none (the default).
    ///
    /// The layer asks for it when a check went past its deadline and nothing in the domain
    /// answered since that check was sent: no answer to the probe either (within twice the
    /// deadline) means the store is gone (frozen, black-holed, partitioned) and the domain's
    /// circuit opens at once, whatever the request rate; an answer means it is only slow
    /// (load), and checks go on. While a circuit is open, probes, not requests, find out when
    /// the store answers again: no request waits for them. A store without probes is judged
    /// by the silence alone, and its open circuit is tried by one request after the cool-down.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Store};
    /// assert!(MemoryStore::new().probe(0).is_none());
    /// ```
    fn probe(&self, domain: u16) -> Option<StoreFuture<()>> {
        let _ = domain;
        None
    }
}

/// `store` as the fronts hold it: an `Arc<dyn Store>` (the server's, say) is taken as it is
/// rather than wrapped in another, whose every call would go through the forwarding impl below.
pub(crate) fn shared(store: impl Store) -> Arc<dyn Store> {
    let mut slot = Some(store);
    if let Some(shared) =
        (&mut slot as &mut dyn std::any::Any).downcast_mut::<Option<Arc<dyn Store>>>()
        && let Some(shared) = shared.take()
    {
        return shared;
    }
    match slot {
        Some(store) => Arc::new(store),
        None => unreachable!("taken only when it was an Arc<dyn Store>"),
    }
}

impl<S: Store + ?Sized> Store for Arc<S> {
    fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        (**self).check(policy, key, cost)
    }

    fn charge(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        (**self).charge(policy, key, cost)
    }

    fn release(&self, policy: &Policy, key: &Key, lease: Lease) -> StoreFuture<()> {
        (**self).release(policy, key, lease)
    }

    fn failure_domain(&self, policy: &Policy, key: &Key) -> u16 {
        (**self).failure_domain(policy, key)
    }

    fn kind(&self) -> &'static str {
        (**self).kind()
    }

    fn prepare(&self, policy: &Policy) {
        (**self).prepare(policy)
    }

    fn probe(&self, domain: u16) -> Option<StoreFuture<()>> {
        (**self).probe(domain)
    }

    fn admin(&self) -> Option<&dyn Admin> {
        (**self).admin()
    }

    fn overrides(&self) -> Option<&dyn Overrides> {
        (**self).overrides()
    }

    fn refunds(&self) -> Option<&dyn Refunds> {
        (**self).refunds()
    }

    fn reservations(&self) -> Option<&dyn Reservations> {
        (**self).reservations()
    }

    fn limit_costs(&self) -> Option<&dyn LimitCosts> {
        (**self).limit_costs()
    }
}

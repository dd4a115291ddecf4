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

mod check;
mod clock;
mod key_state;
#[cfg(feature = "redis")]
pub(crate) mod local_first;
mod memory;
mod override_table;
mod overrides;
#[cfg(feature = "redis")]
mod redis;
mod refund;
mod shard;
#[cfg(feature = "redis")]
pub(crate) use self::redis::{decode_reply, refund_call, script_call};

#[cfg(feature = "redis")]
pub use self::local_first::{
    LocalFirstStore, LocalFirstStoreBuilder, DEFAULT_MARKS, DEFAULT_SYNC_INTERVAL,
};
#[cfg(feature = "redis")]
pub use self::redis::{RedisStore, RedisStoreBuilder};
pub use check::{Check, CheckFuture};
pub use clock::{Clock, ManualClock, SystemClock};
pub use key_state::{AdminFuture, KeyState};
pub(crate) use memory::holds_leases;
pub use memory::{MemoryStore, MemoryStoreBuilder};
pub use overrides::Override;
pub use refund::Refund;
pub(crate) use refund::Ticket;
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
    fn release(&self, policy: &Policy, key: &Key, lease: Lease) -> AdminFuture<()> {
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

    /// Reads `key`'s state under `policy` without consuming anything: what a request of cost 1
    /// would find now ([`KeyState`]). For support tools and tests. Stores that do not offer it
    /// answer [`StoreError::Unsupported`](crate::StoreError::Unsupported) (the default).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Store};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let policy = Policy::new("p", [Limit::gcra(3, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let state = MemoryStore::new().inspect(&policy, &Key::new("k")).await.unwrap();
    /// assert_eq!(state.limits()[0].remaining(), 3);
    /// # });
    /// ```
    fn inspect(&self, policy: &Policy, key: &Key) -> AdminFuture<KeyState> {
        let _ = (policy, key);
        key_state::unsupported("inspect")
    }

    /// Deletes `key`'s state under `policy`: every limit of it starts afresh. For support
    /// tools and tests. A layer in front of the store may still answer from its deny cache:
    /// reset through [`Handle::reset`](crate::layer::Handle::reset) to drop that
    /// too. Stores that do not offer it answer
    /// [`StoreError::Unsupported`](crate::StoreError::Unsupported) (the default).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Store};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// assert!(store.check_now(&policy, &Key::new("k"), 1).is_allowed());
    /// assert!(!store.check_now(&policy, &Key::new("k"), 1).is_allowed());
    /// store.reset(&policy, &Key::new("k")).await.unwrap();
    /// assert!(store.check_now(&policy, &Key::new("k"), 1).is_allowed());
    /// # });
    /// ```
    fn reset(&self, policy: &Policy, key: &Key) -> AdminFuture<()> {
        let _ = (policy, key);
        key_state::unsupported("reset")
    }

    /// Sets an override for `key` under `policy`: from now on the key is counted under the
    /// override's rates instead of the policy's ([`Override`]), keeping its state (90 used of
    /// 100 leaves 910 of 1000). A Redis store keeps it in Redis, so every replica applies it
    /// (within its poll interval) and it survives restarts. Stores that do not offer it
    /// answer [`StoreError::Unsupported`](crate::StoreError::Unsupported) (the default).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Override, Store};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::fixed_window(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let key = Key::new("k");
    /// assert!(store.check_now(&policy, &key, 1).is_allowed());
    /// assert!(!store.check_now(&policy, &key, 1).is_allowed());
    /// let raised = Override::parse(&policy, "3/1m").unwrap();
    /// store.set_override(&policy, &key, raised.clone()).await.unwrap();
    /// assert_eq!(store.get_override(&policy, &key).await.unwrap(), Some(raised));
    /// assert_eq!(store.check_now(&policy, &key, 1).limits()[0].remaining(), 1);
    /// # });
    /// ```
    fn set_override(&self, policy: &Policy, key: &Key, value: Override) -> AdminFuture<()> {
        let _ = (policy, key, value);
        key_state::unsupported("set_override")
    }

    /// The override of `key` under `policy`, if any (as the store holds it: in Redis for a
    /// Redis store). Stores that do not offer overrides answer
    /// [`StoreError::Unsupported`](crate::StoreError::Unsupported) (the default).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Store};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// assert_eq!(MemoryStore::new().get_override(&policy, &Key::new("k")).await.unwrap(), None);
    /// # });
    /// ```
    fn get_override(&self, policy: &Policy, key: &Key) -> AdminFuture<Option<Override>> {
        let _ = (policy, key);
        key_state::unsupported("get_override")
    }

    /// Removes the override of `key` under `policy`; answers whether there was one. The key
    /// is counted under the policy's own limits again, its state kept. Stores that do not
    /// offer overrides answer [`StoreError::Unsupported`](crate::StoreError::Unsupported)
    /// (the default).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Override, Store};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let key = Key::new("k");
    /// store.set_override(&policy, &key, Override::parse(&policy, "5/1m").unwrap()).await.unwrap();
    /// assert!(store.remove_override(&policy, &key).await.unwrap());
    /// assert!(!store.remove_override(&policy, &key).await.unwrap());
    /// # });
    /// ```
    fn remove_override(&self, policy: &Policy, key: &Key) -> AdminFuture<bool> {
        let _ = (policy, key);
        key_state::unsupported("remove_override")
    }

    /// Gives back what one admitted request of `key` under `policy` consumed ([`Refund`],
    /// made from the store's decision), at most once per refund: answers whether anything was
    /// given back (`false` for a refund already applied, or too late to matter: its window
    /// ended, its log entry left every span). Never takes any limit below its state before
    /// that request. A Redis store does it in one script call; a layer with
    /// [`refund_if`](crate::layer::RateLimitBuilder::refund_if) calls it after the response. Stores
    /// that do not offer it answer [`StoreError::Unsupported`](crate::StoreError::Unsupported)
    /// (the default).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Refund, Store};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let key = Key::new("k");
    /// let refund = Refund::of(&store.check_now(&policy, &key, 1), 1).unwrap();
    /// assert!(!store.check_now(&policy, &key, 1).is_allowed());
    /// assert!(store.refund(&policy, &key, refund).await.unwrap());
    /// assert!(store.check_now(&policy, &key, 1).is_allowed());
    /// # });
    /// ```
    fn refund(&self, policy: &Policy, key: &Key, refund: Refund) -> AdminFuture<bool> {
        let _ = (policy, key, refund);
        key_state::unsupported("refund")
    }

    /// A number that changes whenever the overrides this store applies change (set, removed,
    /// or, for a Redis store, seen changed in Redis by its poller). A layer asks the store
    /// again, rather than answer from its deny cache, for denials cached before a change.
    /// Stores without overrides answer 0 (the default).
    ///
    /// ```
    /// use redlimit::store::{MemoryStore, Store};
    /// assert_eq!(MemoryStore::new().overrides_version(), 0);
    /// ```
    fn overrides_version(&self) -> u64 {
        0
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
    fn probe(&self, domain: u16) -> Option<AdminFuture<()>> {
        let _ = domain;
        None
    }
}

impl<S: Store + ?Sized> Store for Arc<S> {
    fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        (**self).check(policy, key, cost)
    }

    fn release(&self, policy: &Policy, key: &Key, lease: Lease) -> AdminFuture<()> {
        (**self).release(policy, key, lease)
    }

    fn failure_domain(&self, policy: &Policy, key: &Key) -> u16 {
        (**self).failure_domain(policy, key)
    }

    fn inspect(&self, policy: &Policy, key: &Key) -> AdminFuture<KeyState> {
        (**self).inspect(policy, key)
    }

    fn reset(&self, policy: &Policy, key: &Key) -> AdminFuture<()> {
        (**self).reset(policy, key)
    }

    fn set_override(&self, policy: &Policy, key: &Key, value: Override) -> AdminFuture<()> {
        (**self).set_override(policy, key, value)
    }

    fn get_override(&self, policy: &Policy, key: &Key) -> AdminFuture<Option<Override>> {
        (**self).get_override(policy, key)
    }

    fn remove_override(&self, policy: &Policy, key: &Key) -> AdminFuture<bool> {
        (**self).remove_override(policy, key)
    }

    fn refund(&self, policy: &Policy, key: &Key, refund: Refund) -> AdminFuture<bool> {
        (**self).refund(policy, key, refund)
    }

    fn overrides_version(&self) -> u64 {
        (**self).overrides_version()
    }

    fn kind(&self) -> &'static str {
        (**self).kind()
    }

    fn prepare(&self, policy: &Policy) {
        (**self).prepare(policy)
    }

    fn probe(&self, domain: u16) -> Option<AdminFuture<()>> {
        (**self).probe(domain)
    }
}

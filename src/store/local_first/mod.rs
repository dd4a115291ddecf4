//! Local-first mode: fleet-wide limits decided in memory, synced to Redis in the background.
//!
//! See [`LocalFirstStore`] for what it does, and how.
//!
//! ```no_run
//! use std::time::Duration;
//! use redlimit::store::RedisStore;
//! use redlimit::{Limit, Policy, RateLimitLayer};
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = RedisStore::connect("redis://127.0.0.1:6379")
//!     .await?
//!     .local_first(Duration::from_millis(100))?;
//! let policy = Policy::new("api", [Limit::gcra(10_000, Duration::from_secs(1))?])?;
//! let layer = RateLimitLayer::new(store, policy);
//! # Ok(()) }
//! ```

mod admission;
mod builder;
mod core;
mod entry;
// The sync script's Rust twin, the simulator's Redis.
#[cfg(any(test, feature = "__test-hooks"))]
mod merge;
mod refunds;
mod settings;
#[cfg(any(test, feature = "__test-hooks"))]
pub(crate) mod sim;
mod task;
#[cfg(feature = "rlqs")]
pub(crate) use task::run_script;
#[cfg(test)]
mod tests;
mod view;

use self::core::Core;
pub use builder::LocalFirstStoreBuilder;
pub use settings::{DEFAULT_LOCAL_AFTER, DEFAULT_MARKS, DEFAULT_SYNC_INTERVAL};

use std::sync::Arc;

use super::{
    Admin, Check, Commit, KeyState, LimitCosts, Override, Overrides, RedisStore, Refunds, Store,
    StoreFuture,
};
use crate::key::Key;
use crate::limit::Algorithm;
use crate::policy::Policy;

/// A store that decides a key exactly, by Redis, while it is cold on this instance, and in
/// memory, synced with Redis in the background, once it is hot (local-first mode; the README
/// says when to choose it over exact mode).
///
/// **Adaptive per key.** A key is cold on an instance until the instance decides
/// [`local_after`](LocalFirstStoreBuilder::local_after) (default 8) of its requests within
/// one sync interval, after at least a quarter of that in the interval before (a client's
/// lone burst, over before a sync could pay for itself, stays exact); until then every
/// decision is the wrapped [`RedisStore`]'s, exact across instances (its batching applies,
/// and the layer's deny cache to its denials). Then the key
/// is hot: still decided exactly until its first sync brings the key's state, and in memory
/// from then on. It cools back to exact decisions when a whole interval sees fewer than a
/// quarter of `local_after` decisions (or none for three intervals) and Redis has
/// acknowledged every unit the instance counted (never while syncs fail). A key whose policy has a limit admitting
/// fewer than `local_after` units per interval at its rate (100 a minute, 1000 a day: a
/// per-API-key limit) stays exact whatever its traffic: its admissions cost Redis little
/// and its denials are the deny cache's.
///
/// **One state for both.** Local decisions count into the very state the exact scripts check
/// (`PREFIX:POLICY:{KEY}:gc0`, ...): a sync forces the units an instance admitted into it
/// (a GCRA's TAT moves by `units × T`, a window's count grows; never refused) and answers it,
/// and the instance's view starts from that. So a key exact on one instance and local on
/// another is counted once, and switching moves nothing. **The bound:** a decision misses at
/// most the units the *other* instances admitted in memory since their last sync (at most
/// one interval of their admissions: an instance syncs a key early once its unsent units
/// reach half the smallest limit), and a local one also the exact admissions of the last
/// interval of instances where the key is cold (fewer than `local_after` each, unless they
/// are turning hot). A switch adds nothing to it: a key turns local only with Redis's state
/// in hand, and exact only once Redis holds all it counted.
///
/// In local mode each instance decides from its view: the key's state at the last sync, plus
/// its own consumption since, plus the rest of the fleet's extrapolated: its offered rate (as
/// the syncs measure it), admitted as this view admits, in implicit steps (each step at the
/// probability of the level it ends on, so none jumps past the level where admissions stop,
/// and short of the last admissible unit, which the decisions draw for). The view so settles
/// where the whole fleet's admissions match the limit's rate, at 3x overload as at 800x.
/// No I/O on the request path: a check costs what a memory-store check costs. A background task sends, every interval (default 100 ms) and early when a key's
/// unsent units reach half of its limit, what each hot key counted, in batched script calls
/// (`lua/local_first_sync.lua`; one per Cluster hash slot).
///
/// - **Idempotent counting.** An instance sends the cumulative units it counted per key, never
///   a delta; Redis keeps each instance's last cumulative in a small hash beside the state
///   (`PREFIX:POLICY:{KEY}:lf`) and adds only what is new. A lost or repeated sync never
///   counts twice.
/// - **Redis `TIME` anchors the state**; an instance's clock only measures the time elapsed
///   since its last sync (monotonic), so a skewed wall clock changes nothing.
/// - **Probabilistic admission.** Between a low and a high mark of each limit (default 80 %
///   and 100 %), requests are denied with a probability rising linearly from 0 to 1: the fleet
///   eases into the limit instead of see-sawing a sync interval late.
/// - **Redis death.** When syncs fail, each instance decides its hot keys alone with its
///   share of each limit (`N / instances`, the instances counted by a heartbeat in Redis);
///   a hot key stays hot while syncs fail, quiet or not, and once isolated (syncs, or
///   heartbeats, failing for three intervals) a cold key is decided alone on the share too
///   (decided exactly, it would fall to the layer's fallback, whose budget would add to the
///   share); its units are sent with the first sync after, and it cools back once settled.
///   Until then (the grace), cold keys fail as exact mode's do (the layer's
///   [`OnStoreError`](crate::layer::OnStoreError) applies). What it admits alone is still
///   counted toward the fleet: when Redis answers again (a partition healed, a frozen server
///   thawed) the first sync merges those units into the key's state as any sync does, once
///   (the cumulative counts), from when they were counted: a GCRA's queue behind the backlog
///   Redis kept and the units long past drop out, a window's land in the current window. So
///   the fleet gets no second budget on Redis's return: over the whole span it admits what the
///   limit allows, the shares' fresh bursts on isolation paid back after (up to the cap on a
///   GCRA's backlog: a burst, plus another burst or 1 s). Redis keeps what this needs, a
///   key's bookkeeping hash and a drained GCRA state, for a minute; a Redis that no longer
///   has the key's hash (restarted empty, or cut off for longer) takes only the units counted
///   while connected, and the fleet resumes from its state, as exact mode would.
/// - **Bounded memory.** At most [`DEFAULT_MAX_KEYS`](crate::store::DEFAULT_MAX_KEYS) keys
///   by default, in the memory store's map (a cold key holds only its count of decisions);
///   never at the cost of units Redis has not acknowledged
///   ([`LocalFirstStoreBuilder::max_keys`] says how).
/// - **Algorithms.** GCRA and token bucket (kept as its GCRA twin: the same burst and rate;
///   a sync can fill its bucket, not run it into debt), fixed and sliding windows. A policy
///   with a sliding log or an in-flight limit, and a key with limit keys of its own
///   ([`Key::with_limit_key`]: each limit of a hierarchical quota holds to the unit across
///   instances), are decided exactly, by Redis, per request ([`LocalFirstStore::supports`]
///   says which).
/// - **The Envoy rate limit service** (feature `rls`) on this store: each of its counters
///   (a descriptor's limit) is a key of its own here, hot or cold by its own traffic and
///   synced into the state exact mode keeps for it. A request's check is decided in memory
///   when every counter in it is hot on this instance (one draw against the highest deny
///   probability among them; the cost charged to all of them or to none), else by Redis in
///   one atomic call, as in exact mode. So a hot descriptor beside a per-client one that
///   stays cold (under `local_after` units per interval) is still a Redis call per request.
/// - **Penalty box.** A policy with one ([`Policy::penalty`](crate::Policy::penalty)) is
///   decided exactly, whatever its traffic: a denial boxes the key in Redis in the same
///   script call, every instance denies it at once for the box's duration, and the layer's
///   deny cache answers the boxed key without Redis, as in exact mode. Its admissions cost a
///   call each; boxing in memory and telling the fleet at the next sync would let the other
///   instances admit the flood for up to an interval, which is what the box is for.
/// - **Admin.** [`Admin::inspect`] and [`Admin::reset`] act on the state in Redis, which
///   every decision counts into (see there for how fresh); a reset reaches every instance
///   within a poll of the overrides and a sync. **Overrides** ([`Overrides`]) are
///   the Redis store's: kept in Redis and polled by every instance, they apply to cold keys in
///   Redis's checks and to hot keys in memory, keeping the units used.
/// - **Refunds** ([`Refunds`]) of any decision, local ones included, are given back in
///   Redis, once, from any instance (see there).
///
/// Accuracy per scenario is measured by `benches/local_first_sim.rs` (`benches/README.md`): in
/// simulation a hot global key on 3 instances admits within 5 % of the ideal (burst + rate ×
/// time) at every overload from 1x to 3 300x, and 100 instances within 0.1 % of exact mode.
///
/// Local decisions carry [`DecisionSource::LocalFirst`](crate::DecisionSource::LocalFirst);
/// exact ones, Redis's, [`DecisionSource::Store`](crate::DecisionSource::Store). Cheap to clone: clones share state
/// and the background task, which ends when the last clone is dropped.
///
/// ```no_run
/// use std::time::Duration;
/// use redlimit::store::{LocalFirstStore, RedisStore};
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = RedisStore::connect("redis://127.0.0.1:6379").await?;
/// let store = LocalFirstStore::builder(redis)
///     .interval(Duration::from_millis(50))
///     .marks(0.9, 1.0)
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub struct LocalFirstStore {
    shared: Arc<Running>,
}

/// A running local-first store, shared by its clones: its core, its Redis, and the sync task,
/// stopped when the last clone drops.
struct Running {
    core: Arc<Core>,
    redis: RedisStore,
    task: tokio::task::AbortHandle,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalFirstStore")
            .field("redis", &self.redis)
            .field("settings", &self.core.settings)
            .field("instance", &self.core.instance)
            .finish_non_exhaustive()
    }
}

impl LocalFirstStore {
    /// Starts configuring a local-first store over `redis`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::ConfigError> {
    /// use redlimit::store::{LocalFirstStore, RedisStore};
    /// let redis = RedisStore::builder("redis://127.0.0.1:6379").connect_lazy()?;
    /// let store = LocalFirstStore::builder(redis).build()?;
    /// # Ok(()) }
    /// ```
    pub fn builder(redis: RedisStore) -> LocalFirstStoreBuilder {
        LocalFirstStoreBuilder::new(redis)
    }

    /// Whether local-first mode can decide `policy` in memory: every limit is a GCRA, token
    /// bucket, fixed or sliding window. A policy with a sliding log or a calendar window is
    /// decided exactly, by Redis, on every request (as is one with a penalty box, which is
    /// supported: see [`LocalFirstStore`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::LocalFirstStore;
    /// use redlimit::{Limit, Policy};
    /// let fast = Policy::new("api", [Limit::gcra(100, Duration::from_secs(1))?])?;
    /// let exact = Policy::new("login", [Limit::sliding_log(5, Duration::from_secs(60))?])?;
    /// assert!(LocalFirstStore::supports(&fast));
    /// assert!(!LocalFirstStore::supports(&exact));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn supports(policy: &Policy) -> bool {
        policy.limits().iter().all(|l| {
            !matches!(
                l.algorithm(),
                Algorithm::SlidingLog | Algorithm::Concurrency | Algorithm::Calendar
            )
        })
    }

    /// How many instances share the limits, as the heartbeats in Redis last said (the share
    /// each one takes alone when Redis is unreachable).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::ConfigError> {
    /// # use redlimit::store::{LocalFirstStore, RedisStore};
    /// # let redis = RedisStore::builder("redis://127.0.0.1:6379").connect_lazy()?;
    /// let store = LocalFirstStore::builder(redis).instances(4).build()?;
    /// assert_eq!(store.instances(), 4); // until a heartbeat answers
    /// # Ok(()) }
    /// ```
    pub fn instances(&self) -> u32 {
        self.shared.core.instances()
    }

    /// Whether syncs (or, with nothing to sync, heartbeats) have failed for three intervals:
    /// decisions, cold keys' too, are then made alone, with this instance's share of each
    /// limit, until a sync succeeds (or, with nothing to sync, Redis answers a heartbeat sent
    /// after the failure).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::ConfigError> {
    /// # use redlimit::store::{LocalFirstStore, RedisStore};
    /// # let redis = RedisStore::builder("redis://127.0.0.1:6379").connect_lazy()?;
    /// let store = LocalFirstStore::builder(redis).build()?;
    /// assert!(!store.is_isolated());
    /// # Ok(()) }
    /// ```
    pub fn is_isolated(&self) -> bool {
        self.shared.core.is_isolated()
    }

    /// How many sync calls have completed (answered or failed): for tests and health checks
    /// that wait for the background task.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::ConfigError> {
    /// # use redlimit::store::{LocalFirstStore, RedisStore};
    /// # let redis = RedisStore::builder("redis://127.0.0.1:6379").connect_lazy()?;
    /// let store = LocalFirstStore::builder(redis).build()?;
    /// assert_eq!(store.syncs(), 0);
    /// # Ok(()) }
    /// ```
    pub fn syncs(&self) -> u64 {
        self.shared.core.rounds()
    }

    /// How many keys hold local state.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::ConfigError> {
    /// # use redlimit::store::{LocalFirstStore, RedisStore};
    /// # let redis = RedisStore::builder("redis://127.0.0.1:6379").connect_lazy()?;
    /// assert_eq!(LocalFirstStore::builder(redis).build()?.len(), 0);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.shared.core.len()
    }

    /// Whether no key holds local state.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::ConfigError> {
    /// # use redlimit::store::{LocalFirstStore, RedisStore};
    /// # let redis = RedisStore::builder("redis://127.0.0.1:6379").connect_lazy()?;
    /// assert!(LocalFirstStore::builder(redis).build()?.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether `key` under `policy` is decided exactly, by the wrapped Redis store: a policy
/// local-first mode does not approximate, a policy with a penalty box (boxed on every
/// instance at once, and its boxed keys served by the layer's deny cache without Redis), or a
/// key with positional limit keys (a hierarchical quota: each level holds to the unit; a
/// global limit in local-first mode is a policy of its own, keyed `Global`). Keys whose limit
/// keys name their states (the RLS's counters) are local-first, each counter on its own
/// (`core/counters.rs`).
fn exact(policy: &Policy, key: &Key) -> bool {
    !LocalFirstStore::supports(policy)
        || policy.penalty_box().is_some()
        || (key.has_limit_keys() && !key.names_limit_states())
}

impl Store for LocalFirstStore {
    fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        // Before the overrides were read, exact: the Redis store reads them first.
        if exact(policy, key) || !self.shared.redis.overrides_loaded() {
            return self.shared.redis.check(policy, key, cost);
        }
        // Keys reset through other instances (read by the Redis store's poll): exact until
        // their next sync brings the fresh state.
        let redis = &self.shared.redis;
        self.shared
            .core
            .take_resets(redis.resets_version(), |since| redis.resets_after(since));
        // A hot key is decided under the limits Redis would apply to it: its override's, if it
        // has one (the Redis store polls them, so every instance follows a change).
        let overridden = self.shared.redis.effective_policy(policy, key);
        let effective = overridden.as_ref().unwrap_or(policy);
        let core = &self.shared.core;
        let decided = if key.names_limit_states() {
            core.check_counters(
                effective,
                key,
                std::slice::from_ref(&cost),
                Commit::AllOrNone,
            )
        } else {
            core.check(effective, key, cost)
        };
        match decided {
            Some(decision) => Check::Ready(Ok(decision)),
            None => self.shared.redis.check(policy, key, cost),
        }
    }

    /// The Redis store's charge, for cold and hot keys alike: the units land in the state in
    /// Redis at once, which every instance's view follows (this one's too, at its next sync
    /// of the key: within one interval, as the other instances' units reach it). A charge is
    /// never refused, so it has no place among the units a hot key decides in memory.
    fn charge(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        self.shared.redis.charge(policy, key, cost)
    }

    /// The Redis store's: a key cold here is decided by it. A hot key's decisions are made
    /// in memory and never wait, so no breaker watches them.
    fn failure_domain(&self, policy: &Policy, key: &Key) -> u16 {
        self.shared.redis.failure_domain(policy, key)
    }

    fn release(&self, policy: &Policy, key: &Key, lease: crate::lease::Lease) -> StoreFuture<()> {
        self.shared.redis.release(policy, key, lease)
    }

    fn kind(&self) -> &'static str {
        "local_first"
    }

    /// The Redis store's: cold keys are decided by its scripts, so they are loaded ahead.
    fn prepare(&self, policy: &Policy) {
        self.shared.redis.prepare(policy);
    }

    /// The Redis store's: the layer's breaker and the health check probe the Redis behind.
    fn probe(&self, domain: u16) -> Option<StoreFuture<()>> {
        self.shared.redis.probe(domain)
    }

    fn admin(&self) -> Option<&dyn Admin> {
        Some(self)
    }

    fn refunds(&self) -> Option<&dyn Refunds> {
        Some(self)
    }

    fn overrides(&self) -> Option<&dyn Overrides> {
        Some(self)
    }

    fn limit_costs(&self) -> Option<&dyn LimitCosts> {
        Some(self)
    }
}

/// A check whose limit keys name their states (the RLS's counters), each charged its own
/// cost, is decided as [`check`](Store::check) decides one: in memory when every counter is
/// local here, else by one script call of the Redis store. Any other key is the Redis store's.
impl LimitCosts for LocalFirstStore {
    fn check_costs(&self, policy: &Policy, key: &Key, costs: &[u64], commit: Commit) -> Check {
        let redis = &self.shared.redis;
        if let Err(error) = crate::store::validate_costs(policy, costs, commit) {
            return Check::Ready(Err(error));
        }
        if exact(policy, key) || !key.names_limit_states() || !redis.overrides_loaded() {
            return redis.check_costs(policy, key, costs, commit);
        }
        self.shared
            .core
            .take_resets(redis.resets_version(), |since| redis.resets_after(since));
        let overridden = redis.effective_policy(policy, key);
        let effective = overridden.as_ref().unwrap_or(policy);
        match self
            .shared
            .core
            .check_counters(effective, key, costs, commit)
        {
            Some(decision) => Check::Ready(Ok(decision)),
            None => redis.check_costs(policy, key, costs, commit),
        }
    }
}

/// The Redis store's overrides: kept in Redis, polled by every instance (every
/// [`RedisStoreBuilder::override_poll`](crate::store::RedisStoreBuilder::override_poll)), and
/// applied to cold keys by Redis's checks and to hot keys by the decisions in memory, which
/// keep the units used (as a changed limit does).
impl Overrides for LocalFirstStore {
    fn set_override(&self, policy: &Policy, key: &Key, value: Override) -> StoreFuture<()> {
        self.shared.redis.set_override(policy, key, value)
    }

    fn get_override(&self, policy: &Policy, key: &Key) -> StoreFuture<Option<Override>> {
        self.shared.redis.get_override(policy, key)
    }

    fn remove_override(&self, policy: &Policy, key: &Key) -> StoreFuture<bool> {
        self.shared.redis.remove_override(policy, key)
    }

    fn overrides_version(&self) -> u64 {
        self.shared.redis.overrides_version()
    }

    fn override_in_force(&self, policy: &str, key: &Key) -> Option<Override> {
        self.shared.redis.override_in_force(policy, key)
    }

    fn read_overrides(&self) -> Option<StoreFuture<()>> {
        self.shared.redis.read_overrides()
    }
}

/// Both act on the state in Redis, which every decision counts into: exact ones at once, an
/// instance's local ones at its next sync.
impl Admin for LocalFirstStore {
    /// The key's state in Redis: every instance's units up to its last sync (a hot key's units
    /// of the last interval may not be in yet).
    fn inspect(&self, policy: &Policy, key: &Key) -> StoreFuture<KeyState> {
        self.shared.redis.inspect(policy, key)
    }

    /// Deletes the key's state in Redis and this instance's view of it, and tells the other
    /// instances as the Redis store does (they read it at their next poll of the overrides).
    /// An instance where the key is hot then decides it exactly until its next sync, at once,
    /// brings the fresh state; the units it counted before that sync (some before the reset)
    /// still count after it, so the fleet never admits more for the reset.
    fn reset(&self, policy: &Policy, key: &Key) -> StoreFuture<()> {
        let shared = Arc::clone(&self.shared);
        let (policy, key) = (policy.clone(), key.clone());
        Box::pin(async move {
            shared.redis.reset(&policy, &key).await?;
            for counter in core::counter_keys(&key) {
                shared.core.forget(policy.name(), &counter);
            }
            Ok(())
        })
    }

    fn resets_version(&self) -> u64 {
        self.shared.redis.resets_version()
    }

    fn reset_since(&self, policy: &Policy, key: &Key, since: u64) -> bool {
        self.shared.redis.reset_since(policy, key, since)
    }
}

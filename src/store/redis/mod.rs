//! Redis (and Valkey) as the shared store: one script evaluation per decision (several per call
//! under load), on a standalone server, a Cluster, or a master found through Sentinels.
//!
//! Layout (dependencies flow down): this file is the store; `builder` its settings; `batcher`
//! the queue that sends decisions waiting at the same moment as one call (`linger`: how long
//! a batch may wait for more); `backend`, `cluster`
//! and `sentinel` the deployments; `heal` the connection each keeps and replaces when
//! `health` (its calls' outcomes) says so, `tcp` its sockets' keepalive; `script` the Lua
//! scripts' Rust side (one script per algorithm mix); `error` and `redact` how failures and
//! URLs may be shown.

mod abandoned;
mod admin;
mod backend;
mod batcher;
mod builder;
mod charge;
mod cluster;
mod contract;
mod error;
mod heal;
mod health;
mod linger;
mod overrides;
mod poll;
mod redact;
mod reserve;
mod resets;
mod script;
mod sentinel;
mod slot;
mod tcp;
#[cfg(feature = "tls")]
mod tls;

use std::sync::Arc;

use self::builder::{Deployment, Topology};
use self::error::store_error;
use self::script::{Clock, every_algorithm_source, script_for_policy};
use crate::error::{ConfigError, StoreError};
use crate::key::Key;

use crate::policy::Policy;

pub use self::builder::RedisStoreBuilder;

/// A store in Redis (or Valkey): every replica of a service that points at the same Redis
/// shares the same limits.
///
/// Each decision is one evaluation of the policy's script (its own `EVALSHA`, or one of several
/// in a batch call under load: [`RedisStoreBuilder::batch`]), which reads Redis `TIME`, evaluates
/// every limit of the policy and commits all or none. A script holds only the algorithms its
/// policy uses ([`RedisStore::script_source_for`]), so a decision costs Redis about what a
/// hand-written script of the same algorithm would. Each script is loaded on `NOSCRIPT`
/// (after a restart, a failover or `SCRIPT FLUSH`; in a Cluster on every primary) and the call
/// retried once; a call that timed out or failed on I/O is never replayed, since it may have
/// run. Keys look like `PREFIX:POLICY:{KEY}:ALGORITHM POSITION` (e.g.
/// `redlimit:api:{ip:203.0.113.7}:gc0`, where `{ip:203.0.113.7}` is the cluster hash
/// tag: all keys of one evaluation share a slot) and always carry a TTL no longer than their
/// state needs.
///
/// Under load, decisions are batched: while calls of the store are in flight, the decisions
/// waiting at the same moment for the same script (in a Cluster, the same hash slot) go out
/// as one call of the script's batch variant, which evaluates and commits each decision on its
/// own, in order (at most 32 per call: [`RedisStoreBuilder::batch`]). A batch waits for more
/// only while the store's calls are answered within 1 ms, until the call in flight is
/// answered and for at most that 1 ms ([`RedisStoreBuilder::batch_linger`]); with Redis
/// further away it goes out at once, pipelined. A decision made while nothing is in flight is
/// its own `EVALSHA`, as before (unless decisions come several at a time and Redis answers
/// within that 1 ms: those made in one turn of the scheduler then share a call). Each
/// decision's answer and errors are those of its own call (a key of the wrong type fails its
/// own decision only; a lost call fails each decision in it and is never sent again), so the
/// layer's deadline and failure policy see no difference; at 64 concurrent requests it costs
/// Redis about half the CPU per GCRA decision (`benches/README.md`). Checks at a time the
/// crate's tests set are batched too, each with its own time. `.batch(1)` turns batching off.
///
/// Deployments, all behind the same [`Store`](crate::store::Store) interface:
///
/// - standalone: [`RedisStore::connect`] / [`RedisStore::builder`] (`redis://`, or `rediss://`
///   with the `tls` feature);
/// - Cluster: [`RedisStore::cluster`], seeded with any of its nodes; redirects are followed,
///   the script is loaded on every primary;
/// - Sentinel: [`RedisStore::sentinel`]; the master is asked of the Sentinels and followed
///   across failovers without a restart.
///
/// Cheap to clone: clones share one connection.
///
/// The connection heals. After three calls in a row go unanswered (dropped by the layer, timed
/// out, lost on I/O) while no other call on it was answered, or at once when the server
/// refuses the connection (a changed password, a refused `SELECT`), the store dials a new one
/// in the background, at most once a second, and later calls use it; the unanswered calls are
/// never sent again. This replaces a connection that went silent without
/// a FIN or RST (a host powered off, a NAT entry flushed, a proxy that lost its upstream),
/// which would otherwise never be replaced. In a Cluster the whole connection is rebuilt and
/// reads the slot map anew, so the slots of a frozen master go to its promoted replica (a
/// Cluster call waits at most 5 s for its node); with Sentinels the master is reconnected even
/// when it did not move. Sockets use TCP keepalive (first probe after 10 s idle, then every 5 s) and, on
/// Linux, a 5 s `TCP_USER_TIMEOUT`, so the kernel drops a connection whose peer vanished.
///
/// Failures keep the `redis::RedisError` as their [`source`](std::error::Error::source): an
/// unreachable server, a lost connection or a refused password is a
/// [`StoreError::Connection`], an error the server answered with a [`StoreError::Script`], a
/// reply the script never gives a [`StoreError::UnexpectedReply`]. Its `Debug` output and its
/// errors show URLs as scheme, host and port only, never a user or a password.
///
/// ```no_run
/// use redlimit::store::RedisStore;
/// # async fn run() -> Result<(), redlimit::StoreError> {
/// let store = RedisStore::builder("redis://127.0.0.1:6379")
///     .prefix("myapp:rl")
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub struct RedisStore {
    inner: Arc<Deployment>,
    /// The time this handle's scripts decide at: Redis `TIME`, except on a handle the crate's
    /// tests stopped at a time of theirs ([`RedisStore::at`]).
    clock: Clock,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("topology", &self.inner.topology)
            .field("prefix", &self.inner.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to the Redis at `url` (`redis://[user:pass@]host:port[/db]`) with the default
    /// settings; fails if it cannot connect now.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), redlimit::StoreError> {
    /// let store = redlimit::store::RedisStore::connect("redis://127.0.0.1:6379").await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        RedisStore::builder(url).connect().await
    }

    /// Starts configuring a store for the standalone Redis at `url`.
    ///
    /// ```
    /// let builder = redlimit::store::RedisStore::builder("redis://127.0.0.1:6379").prefix("api");
    /// ```
    pub fn builder(url: impl Into<String>) -> RedisStoreBuilder {
        RedisStoreBuilder::new(Topology::Standalone(url.into()))
    }

    /// Starts configuring a store for a Redis Cluster, seeded with the URLs of some of its
    /// nodes (the rest are discovered).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), redlimit::StoreError> {
    /// let store = redlimit::store::RedisStore::cluster(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379"])
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn cluster<U: Into<String>>(nodes: impl IntoIterator<Item = U>) -> RedisStoreBuilder {
        RedisStoreBuilder::new(Topology::Cluster(
            nodes.into_iter().map(Into::into).collect(),
        ))
    }

    /// Starts configuring a store for the master that the Sentinels at `sentinels` know as
    /// `master`. After a failover the store asks the Sentinels again and follows the new master.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), redlimit::StoreError> {
    /// let store = redlimit::store::RedisStore::sentinel(
    ///     ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379", "redis://10.0.0.3:26379"],
    ///     "mymaster",
    /// )
    /// .connect()
    /// .await?;
    /// # Ok(()) }
    /// ```
    pub fn sentinel<U: Into<String>>(
        sentinels: impl IntoIterator<Item = U>,
        master: impl Into<String>,
    ) -> RedisStoreBuilder {
        RedisStoreBuilder::new(Topology::Sentinel {
            sentinels: sentinels.into_iter().map(Into::into).collect(),
            master: master.into(),
        })
    }

    /// The Lua script this store runs for a policy with one limit of each algorithm, in the
    /// order of [`Algorithm::ALL`](crate::Algorithm::ALL), then a concurrency limit
    /// ([`Algorithm::Concurrency`](crate::Algorithm::Concurrency)) and a calendar window
    /// ([`Algorithm::Calendar`](crate::Algorithm::Calendar)): every line of Lua the store's
    /// scripts can hold, for review. The store runs one script per algorithm mix: the prelude
    /// (`lua/prelude.lua`, the contract), the algorithms the policy uses and a tail written
    /// for its limits. [`RedisStore::script_source_for`] gives the one a policy runs.
    ///
    /// ```
    /// let lua = redlimit::store::RedisStore::script_source();
    /// assert!(lua.contains("redis.call('TIME')"));
    /// assert!(lua.contains("local function gcra(") && lua.contains("local function sliding_log("));
    /// assert!(lua.contains("local function concurrency("));
    /// assert!(lua.contains("local function calendar_window("));
    /// ```
    pub fn script_source() -> &'static str {
        every_algorithm_source()
    }

    /// The Lua script this store runs for `policy` (the same for every policy whose limits use
    /// the same algorithms in the same order; counts and periods are arguments). For review,
    /// or to load it ahead with `SCRIPT LOAD`; the store loads it itself when Redis answers
    /// `NOSCRIPT`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::{store::RedisStore, Limit, Policy};
    ///
    /// let policy = Policy::new("api", [Limit::gcra(100, Duration::from_secs(60))?])?;
    /// let lua = RedisStore::script_source_for(&policy);
    /// assert!(lua.contains("local function gcra("));
    /// assert!(!lua.contains("local function sliding_log("));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn script_source_for(policy: &Policy) -> &'static str {
        &script_for_policy(policy).source
    }

    /// The Lua script of [`Refunds::refund`](crate::store::Refunds::refund) (`lua/refund.lua`), for a `SCRIPT LOAD` ahead of
    /// time (the store loads it on first use).
    ///
    /// ```
    /// assert!(redlimit::store::RedisStore::refund_script_source().contains("KEYS[k + 1]"));
    /// ```
    pub fn refund_script_source() -> &'static str {
        self::script::refund_source()
    }

    /// The Lua script of [`Reservations`](crate::store::Reservations) (`lua/reserve.lua`),
    /// for a `SCRIPT LOAD` ahead of time (the store loads it on first use).
    ///
    /// ```
    /// assert!(redlimit::store::RedisStore::reserve_script_source().contains("'TIME'"));
    /// ```
    pub fn reserve_script_source() -> &'static str {
        self::script::reserve_source()
    }

    /// The key prefix.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let store = redlimit::store::RedisStore::builder("redis://127.0.0.1:6379").connect_lazy().unwrap();
    /// assert_eq!(store.prefix(), "redlimit");
    /// # }
    /// ```
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// `policy` with `key`'s override applied, if it has one in force here (the local-first
    /// store decides hot keys in memory under the same limits a check here would use).
    pub(crate) fn effective_policy(&self, policy: &Policy, key: &Key) -> Option<Policy> {
        self.inner.overrides.effective(policy, key)
    }

    /// Each key reset (here or through another replica) after the store's resets version
    /// was `since`, with its policy; `None` if that is not known (resets were missed).
    pub(crate) fn resets_after(&self, since: u64) -> Option<Vec<(Arc<str>, Key)>> {
        self.inner.resets.resets_after(since)
    }

    /// TEST ONLY (`redlimit::__private`'s `*_at`): this store (its connection, overrides and
    /// batches shared) with its scripts deciding at `unix_us` (Unix µs) instead of Redis
    /// `TIME`, so that tests drive time without sleeping.
    #[cfg(feature = "__test-hooks")]
    pub(crate) fn at(&self, unix_us: u64) -> RedisStore {
        RedisStore {
            inner: Arc::clone(&self.inner),
            clock: Clock::at(unix_us),
        }
    }
}

// For the local-first store (`src/store/local_first/`), which syncs through this connection.
impl RedisStore {
    /// Runs `command` (an `EVALSHA` or `EVAL` of a script with keys) once on this store's
    /// connection, never replayed after an error that may have followed its execution.
    pub(in crate::store) async fn run_command(
        &self,
        command: &redis::Cmd,
    ) -> redis::RedisResult<redis::Value> {
        self.inner.backend.run(command).await
    }

    /// The Cluster slot of a Redis key, when this store is on a Cluster (calls must then hold
    /// keys of one slot); `None` otherwise.
    pub(in crate::store) fn cluster_slot(&self, redis_key: &str) -> Option<u16> {
        matches!(self.inner.backend, backend::Backend::Cluster(_))
            .then(|| slot::slot(redis_key.as_bytes()))
    }
}

/// A Redis error as the store reports it (for `__private`).
#[cfg(feature = "__test-hooks")]
pub(crate) fn redis_store_error(err: redis::RedisError) -> StoreError {
    error::store_error(err)
}

/// The `EVALSHA` a production check sends (Redis `TIME`), for baselines that send the same
/// call by hand (the script must be loaded: `SCRIPT LOAD` of
/// [`RedisStore::script_source_for`] the policy).
#[cfg(feature = "__test-hooks")]
pub(crate) fn script_call(prefix: &str, policy: &Policy, key: &Key, cost: u64) -> redis::Cmd {
    self::script::script_command(prefix, policy, key, (cost, None), Clock::default())
}

/// The Redis key of the state of `policy`'s limit at `position` for `key`, as the exact
/// scripts name it (local-first syncs count into the same keys).
#[cfg(test)]
pub(crate) fn state_key(prefix: &str, policy: &Policy, key: &Key, position: usize) -> String {
    self::script::state_key(prefix, policy, key, position)
}

/// The `EVALSHA` of a refund, for baselines that send it by hand.
#[cfg(feature = "__test-hooks")]
pub(crate) fn refund_call(
    prefix: &str,
    policy: &Policy,
    key: &Key,
    refund: &super::Refund,
) -> redis::Cmd {
    self::script::refund_command(prefix, policy, key, refund, Clock::default())
}

/// Decodes a script reply as the store does.
#[cfg(feature = "__test-hooks")]
pub(crate) fn decode_reply(policy: &Policy, reply: &[i64]) -> Result<crate::Decision, StoreError> {
    script::decode(policy, reply)
}

// The builder's last steps live here: they make a `RedisStore`.
impl RedisStoreBuilder {
    /// Connects now; fails if Redis cannot be reached (a [`StoreError::Connection`] whose
    /// source is the `redis::RedisError`).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), redlimit::StoreError> {
    /// let store = redlimit::store::RedisStore::builder("redis://127.0.0.1:6379")
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(self) -> Result<RedisStore, StoreError> {
        let deployment = self.build()?;
        deployment.backend.ping().await.map_err(store_error)?;
        let store = RedisStore {
            inner: Arc::new(deployment),
            clock: Clock::default(),
        };
        // The overrides in force from the first decision on (a restarted service keeps them);
        // if they cannot be read now, the first checks wait for them.
        if let Err(err) = store.load_overrides().await {
            tracing::warn!(error = %err, "reading the overrides failed; polling them");
        }
        Ok(store)
    }

    /// Returns at once and connects on first use, so a service can start while Redis is down
    /// (its requests then follow the layer's failure policy). Fails only on a bad URL or prefix.
    ///
    /// The overrides are read at once in the background; checks made before that read has
    /// succeeded wait for it, so the first decision applies them as with
    /// [`connect`](Self::connect). While Redis cannot be read, those checks fail as any
    /// check would.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::ConfigError> {
    /// let store = redlimit::store::RedisStore::builder("redis://127.0.0.1:6379").connect_lazy()?;
    /// # Ok(()) }
    /// ```
    pub fn connect_lazy(self) -> Result<RedisStore, ConfigError> {
        let store = RedisStore {
            inner: Arc::new(self.build()?),
            clock: Clock::default(),
        };
        store.spawn_poller(true);
        Ok(store)
    }
}

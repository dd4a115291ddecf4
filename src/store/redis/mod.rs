//! Redis (and Valkey) as the shared store: one `EVALSHA` per decision, on a standalone server,
//! a Cluster, or a master found through Sentinels.

mod backend;
mod sentinel;

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::sentinel::{SentinelClient, SentinelServerType};

use self::backend::{Backend, ClusterBackend};
use self::sentinel::SentinelBackend;
use super::reply::decode;
use super::script::{state_key, SOURCE};
use super::{Store, StoreFuture};
use crate::error::{ConfigError, StoreError};
use crate::key::Key;
use crate::policy::Policy;

/// Hashed once; calls are `EVALSHA`, and the script is loaded on `NOSCRIPT` only.
pub(super) static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(SOURCE));

/// The default key prefix.
const DEFAULT_PREFIX: &str = "redlimit";

/// A store in Redis (or Valkey): every replica of a service that points at the same Redis
/// shares the same limits.
///
/// Each decision is one `EVALSHA` of one script that reads Redis `TIME`, evaluates every limit
/// of the policy and commits all or none. The script is loaded on `NOSCRIPT` (after a restart,
/// a failover or `SCRIPT FLUSH`; in a Cluster on every primary) and the call retried once; a
/// call that timed out or failed on I/O is never replayed, since it may have run. Keys look
/// like `PREFIX:POLICY:{KEY}:ALGORITHM:N:P` (e.g. `redlimit:api:{ip:203.0.113.7}:gc:10:1000000`,
/// where `{ip:203.0.113.7}` is the cluster hash tag: all keys of one evaluation share a slot)
/// and always carry a TTL no longer than their state needs.
///
/// Deployments, all behind the same [`Store`] interface:
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
/// ```no_run
/// use redlimit::RedisStore;
/// # async fn run() -> Result<(), redlimit::StoreError> {
/// let store = RedisStore::builder("redis://127.0.0.1:6379")
///     .prefix("myapp:rl")
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Backend,
    prefix: String,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let deployment = match self.inner.backend {
            Backend::Standalone(_) => "standalone",
            Backend::Cluster(_) => "cluster",
            Backend::Sentinel(_) => "sentinel",
        };
        f.debug_struct("RedisStore")
            .field("deployment", &deployment)
            .field("prefix", &self.inner.prefix)
            .finish_non_exhaustive()
    }
}

/// Where the servers are.
#[derive(Debug, Clone)]
enum Topology {
    Standalone(String),
    Cluster(Vec<String>),
    Sentinel {
        sentinels: Vec<String>,
        master: String,
    },
}

impl RedisStore {
    /// Connects to the Redis at `url` (`redis://[user:pass@]host:port[/db]`) with the default
    /// settings; fails if it cannot connect now.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), redlimit::StoreError> {
    /// let store = redlimit::RedisStore::connect("redis://127.0.0.1:6379").await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        RedisStore::builder(url).connect().await
    }

    /// Starts configuring a store for the standalone Redis at `url`.
    ///
    /// ```
    /// let builder = redlimit::RedisStore::builder("redis://127.0.0.1:6379").prefix("api");
    /// ```
    pub fn builder(url: impl Into<String>) -> RedisStoreBuilder {
        RedisStoreBuilder::new(Topology::Standalone(url.into()))
    }

    /// Starts configuring a store for a Redis Cluster, seeded with the URLs of some of its
    /// nodes (the rest are discovered).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), redlimit::StoreError> {
    /// let store = redlimit::RedisStore::cluster(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379"])
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
    /// let store = redlimit::RedisStore::sentinel(
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

    /// The assembled Lua script this store runs (its contract heads `lua/prelude.lua`).
    ///
    /// ```
    /// assert!(redlimit::RedisStore::script_source().contains("redis.call('TIME')"));
    /// ```
    pub fn script_source() -> &'static str {
        SOURCE
    }

    /// The key prefix.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let store = redlimit::RedisStore::builder("redis://127.0.0.1:6379").connect_lazy().unwrap();
    /// assert_eq!(store.prefix(), "redlimit");
    /// # }
    /// ```
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// TEST ONLY: like [`Store::check`], but the script uses `now_us` (Unix µs) instead of
    /// Redis `TIME`, so tests can drive time. Production code never calls this: a client
    /// clock that lags would rewind the limits.
    #[doc(hidden)]
    pub fn check_at(&self, policy: &Arc<Policy>, key: &Key, cost: u64, now_us: u64) -> StoreFuture {
        self.invoke(policy, key, cost, Some(now_us))
    }

    fn invoke(
        &self,
        policy: &Arc<Policy>,
        key: &Key,
        cost: u64,
        now_us: Option<u64>,
    ) -> StoreFuture {
        let command = script_command(&self.inner.prefix, policy, key, cost, now_us);
        let inner = Arc::clone(&self.inner);
        let policy = Arc::clone(policy);
        Box::pin(async move {
            let reply = inner.backend.run(&command).await?;
            decode(&policy, &reply)
        })
    }
}

/// The `EVALSHA` of one check (contract: `lua/prelude.lua`), built once, arguments written
/// straight into it.
fn script_command(
    prefix: &str,
    policy: &Policy,
    key: &Key,
    cost: u64,
    now_us: Option<u64>,
) -> redis::Cmd {
    let mut command = redis::cmd("EVALSHA");
    command.arg(SCRIPT.get_hash()).arg(policy.limits().len());
    for limit in policy.limits() {
        command.arg(state_key(prefix, policy.name(), key.as_str(), limit));
    }
    match now_us {
        Some(now) => command.arg(now),
        None => command.arg(""),
    };
    command.arg(cost);
    for limit in policy.limits() {
        command
            .arg(limit.algorithm().code())
            .arg(limit.count())
            .arg(limit.period_us());
    }
    command
}

/// The `EVALSHA` a production check sends (Redis `TIME`), for baselines that send the same
/// call by hand (the script must be loaded: `SCRIPT LOAD` of [`RedisStore::script_source`]).
pub(crate) fn script_call(prefix: &str, policy: &Policy, key: &Key, cost: u64) -> redis::Cmd {
    script_command(prefix, policy, key, cost, None)
}

impl Store for RedisStore {
    fn check(&self, policy: &Arc<Policy>, key: &Key, cost: u64) -> StoreFuture {
        self.invoke(policy, key, cost, None)
    }
}

/// Settings for a [`RedisStore`].
///
/// ```no_run
/// use std::time::Duration;
/// # async fn run() -> Result<(), redlimit::StoreError> {
/// let store = redlimit::RedisStore::builder("redis://10.0.0.5:6379")
///     .prefix("checkout")
///     .connect_timeout(Duration::from_millis(250))
///     .connect_lazy()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct RedisStoreBuilder {
    topology: Topology,
    prefix: String,
    connect_timeout: Duration,
    #[cfg(feature = "tls")]
    root_certificate: Option<Vec<u8>>,
}

impl RedisStoreBuilder {
    fn new(topology: Topology) -> Self {
        RedisStoreBuilder {
            topology,
            prefix: DEFAULT_PREFIX.to_owned(),
            connect_timeout: Duration::from_millis(500),
            #[cfg(feature = "tls")]
            root_certificate: None,
        }
    }

    /// The prefix of every key this store writes (default `redlimit`): 1 to 64 of
    /// `A-Z a-z 0-9 . _ - : /`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long one connection attempt may take (default 500 ms). Requests never wait for it
    /// longer than the layer's store deadline.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Trusts this PEM root certificate (e.g. a private CA) for `rediss://` connections, instead
    /// of the public web roots.
    #[cfg(feature = "tls")]
    pub fn tls_root_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.root_certificate = Some(pem.into());
        self
    }

    #[cfg(feature = "tls")]
    fn certificates(&self) -> Option<redis::TlsCertificates> {
        self.root_certificate
            .clone()
            .map(|root| redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(root),
            })
    }

    fn check_prefix(&self) -> Result<(), StoreError> {
        let valid = !self.prefix.is_empty()
            && self.prefix.len() <= 64
            && self
                .prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-:/".contains(&b));
        if valid {
            Ok(())
        } else {
            Err(ConfigError::InvalidPrefix(self.prefix.clone()).into())
        }
    }

    fn client(&self, url: &str) -> Result<redis::Client, StoreError> {
        #[cfg(feature = "tls")]
        if let Some(certificates) = self.certificates() {
            return redis::Client::build_with_tls(url, certificates).map_err(config_error);
        }
        redis::Client::open(url).map_err(config_error)
    }

    fn manager_config(&self) -> ConnectionManagerConfig {
        // One attempt per reconnect: requests waiting on a reconnect would otherwise wait out
        // its backoff (up to the deadline) while Redis refuses connections. The next request
        // after a failed attempt starts a new one, so limiting resumes as soon as Redis is up.
        ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_number_of_retries(0)
    }

    fn backend(&self) -> Result<Backend, StoreError> {
        self.check_prefix()?;
        match &self.topology {
            Topology::Standalone(url) => {
                let client = self.client(url)?;
                let manager =
                    ConnectionManager::new_lazy_with_config(client, self.manager_config())?;
                Ok(Backend::Standalone(manager))
            }
            Topology::Cluster(nodes) => {
                // No retries inside the client: it would replay a call after an I/O error.
                let builder = ClusterClient::builder(nodes.iter().map(String::as_str))
                    .retries(0)
                    .connection_timeout(self.connect_timeout);
                #[cfg(feature = "tls")]
                let builder = match self.certificates() {
                    Some(certificates) => builder.certs(certificates),
                    None => builder,
                };
                let client = builder.build().map_err(config_error)?;
                Ok(Backend::Cluster(Arc::new(ClusterBackend::new(client))))
            }
            Topology::Sentinel { sentinels, master } => {
                let client = SentinelClient::build(
                    sentinels.iter().map(String::as_str).collect(),
                    master.clone(),
                    None,
                    SentinelServerType::Master,
                )
                .map_err(config_error)?;
                Ok(Backend::Sentinel(Arc::new(SentinelBackend::new(
                    client,
                    self.manager_config(),
                ))))
            }
        }
    }

    /// Connects now; fails if Redis cannot be reached.
    pub async fn connect(self) -> Result<RedisStore, StoreError> {
        let backend = self.backend()?;
        match &backend {
            Backend::Standalone(manager) => {
                redis::cmd("PING")
                    .query_async::<()>(&mut manager.clone())
                    .await?;
            }
            Backend::Cluster(cluster) => {
                cluster.connect().await?;
            }
            Backend::Sentinel(sentinel) => {
                let mut manager = sentinel.resolve().await?;
                redis::cmd("PING").query_async::<()>(&mut manager).await?;
            }
        }
        Ok(self.finish(backend))
    }

    /// Returns at once and connects on first use, so a service can start while Redis is down
    /// (its requests then follow the layer's failure policy). Fails only on a bad URL or prefix.
    pub fn connect_lazy(self) -> Result<RedisStore, StoreError> {
        let backend = self.backend()?;
        Ok(self.finish(backend))
    }

    fn finish(self, backend: Backend) -> RedisStore {
        RedisStore {
            inner: Arc::new(Inner {
                backend,
                prefix: self.prefix,
            }),
        }
    }
}

fn config_error(err: redis::RedisError) -> StoreError {
    StoreError::Config(ConfigError::Redis(err.to_string()))
}

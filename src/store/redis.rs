//! Redis (and Valkey) as the shared store: one `EVALSHA` per decision over a shared,
//! auto-reconnecting multiplexed connection.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::reply::decode;
use super::script::{state_key, SOURCE};
use super::{Store, StoreFuture};
use crate::error::{ConfigError, StoreError};
use crate::key::Key;
use crate::policy::Policy;

/// Hashed once; `invoke_async` sends `EVALSHA` and loads the script on `NOSCRIPT` only.
static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(SOURCE));

/// The default key prefix.
const DEFAULT_PREFIX: &str = "redlimit";

/// A store in Redis (or Valkey): every replica of a service that points at the same Redis
/// shares the same limits.
///
/// Each decision is one `EVALSHA` of one script that reads Redis `TIME`, evaluates every limit
/// of the policy and commits all or none. The script is loaded on `NOSCRIPT` (after a restart
/// or `SCRIPT FLUSH`) and the call retried once; a call that timed out or failed on I/O is
/// never replayed, since it may have run. Keys look like `PREFIX:POLICY:{KEY}:ALGORITHM:N:P`
/// (e.g. `redlimit:api:{ip:203.0.113.7}:gc:10:1000000`, where `{ip:203.0.113.7}` is the
/// cluster hash tag) and always carry a TTL no longer than their state needs.
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
    connection: ConnectionManager,
    prefix: String,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
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
    /// let store = redlimit::RedisStore::connect("redis://127.0.0.1:6379").await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        RedisStore::builder(url).connect().await
    }

    /// Starts configuring a store for the Redis at `url`.
    ///
    /// ```
    /// let builder = redlimit::RedisStore::builder("redis://127.0.0.1:6379").prefix("api");
    /// ```
    pub fn builder(url: impl Into<String>) -> RedisStoreBuilder {
        RedisStoreBuilder {
            url: url.into(),
            prefix: DEFAULT_PREFIX.to_owned(),
            connect_timeout: Duration::from_millis(500),
        }
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
    /// ```no_run
    /// # async fn run() -> Result<(), redlimit::StoreError> {
    /// let store = redlimit::RedisStore::connect("redis://127.0.0.1:6379").await?;
    /// assert_eq!(store.prefix(), "redlimit");
    /// # Ok(()) }
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
        let mut invocation = SCRIPT.prepare_invoke();
        for limit in policy.limits() {
            invocation.key(state_key(
                &self.inner.prefix,
                policy.name(),
                key.as_str(),
                limit,
            ));
        }
        match now_us {
            Some(now) => invocation.arg(now),
            None => invocation.arg(""),
        };
        invocation.arg(cost);
        for limit in policy.limits() {
            invocation
                .arg(limit.algorithm().code())
                .arg(limit.count())
                .arg(limit.period_us());
        }
        let mut connection = self.inner.connection.clone();
        let policy = Arc::clone(policy);
        Box::pin(async move {
            let reply: Vec<i64> = invocation.invoke_async(&mut connection).await?;
            decode(&policy, &reply)
        })
    }
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
    url: String,
    prefix: String,
    connect_timeout: Duration,
}

impl RedisStoreBuilder {
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

    fn parts(&self) -> Result<(redis::Client, ConnectionManagerConfig), StoreError> {
        let valid = !self.prefix.is_empty()
            && self.prefix.len() <= 64
            && self
                .prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-:/".contains(&b));
        if !valid {
            return Err(ConfigError::InvalidPrefix(self.prefix.clone()).into());
        }
        let client = redis::Client::open(self.url.as_str())
            .map_err(|e| StoreError::Config(ConfigError::Redis(e.to_string())))?;
        // One attempt per reconnect: requests waiting on a reconnect would otherwise wait out
        // its backoff (up to the deadline) while Redis refuses connections. The next request
        // after a failed attempt starts a new one, so limiting resumes as soon as Redis is up.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_number_of_retries(0);
        Ok((client, config))
    }

    /// Connects now; fails if Redis cannot be reached.
    pub async fn connect(self) -> Result<RedisStore, StoreError> {
        let (client, config) = self.parts()?;
        let connection = ConnectionManager::new_with_config(client, config).await?;
        Ok(self.finish(connection))
    }

    /// Returns at once and connects on first use, so a service can start while Redis is down
    /// (its requests then follow the layer's failure policy). Fails only on a bad URL or prefix.
    pub fn connect_lazy(self) -> Result<RedisStore, StoreError> {
        let (client, config) = self.parts()?;
        let connection = ConnectionManager::new_lazy_with_config(client, config)?;
        Ok(self.finish(connection))
    }

    fn finish(self, connection: ConnectionManager) -> RedisStore {
        RedisStore {
            inner: Arc::new(Inner {
                connection,
                prefix: self.prefix,
            }),
        }
    }
}

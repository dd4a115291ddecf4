//! The settings of a [`RedisStore`](super::RedisStore): where the servers are, the key prefix,
//! timeouts and TLS roots; and the deployment built from them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManagerConfig;
use redis::cluster::ClusterClient;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{ConnectionInfo, IntoConnectionInfo};

use super::backend::{Backend, Standalone};
use super::batcher::{Batcher, DEFAULT_MAX};
use super::cluster::{BUCKETS, ClusterDial};
use super::error::config_error;
use super::heal::Healing;
use super::linger::{DEFAULT_LINGER, Window};
use super::overrides::DEFAULT_OVERRIDE_POLL;
use super::redact::Redacted;
use super::sentinel::SentinelBackend;
use super::tcp;
use crate::error::ConfigError;
use crate::store::override_table::OverrideTable;
use crate::store::reset_log::ResetLog;

/// How long a Cluster call may wait for its node's answer, queueing in the client included:
/// a frozen node then fails calls (and the client's own slot-map queries) instead of hanging
/// them. Generous, since thousands of concurrent calls queue for a while on a busy host; the
/// layer's deadline ends a request's wait long before.
const CLUSTER_RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// The default key prefix.
const DEFAULT_PREFIX: &str = "redlimit";

/// Where the servers are. Shown with its URLs redacted to scheme, host and port.
#[derive(Clone)]
pub(super) enum Topology {
    Standalone(String),
    Cluster(Vec<String>),
    Sentinel {
        sentinels: Vec<String>,
        master: String,
    },
}

impl fmt::Debug for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn redacted(urls: &[String]) -> Vec<Redacted<'_>> {
            urls.iter().map(|u| Redacted(u)).collect()
        }
        match self {
            Topology::Standalone(url) => f.debug_tuple("Standalone").field(&Redacted(url)).finish(),
            Topology::Cluster(nodes) => f.debug_tuple("Cluster").field(&redacted(nodes)).finish(),
            Topology::Sentinel { sentinels, master } => f
                .debug_struct("Sentinel")
                .field("sentinels", &redacted(sentinels))
                .field("master", master)
                .finish(),
        }
    }
}

/// What a builder makes: the connections, and what the store shows of itself.
pub(super) struct Deployment {
    pub(super) backend: Backend,
    pub(super) batcher: Arc<Batcher>,
    pub(super) prefix: String,
    pub(super) topology: Topology,
    /// The overrides in Redis, as last read (`overrides.rs`).
    pub(super) overrides: OverrideTable,
    pub(super) override_poll: Duration,
    /// The poll of the overrides and resets (`poll.rs`), and the resets it read or this
    /// store made (`resets.rs`), told apart from other stores' by `origin`.
    pub(super) poll: super::poll::PollState,
    pub(super) resets: ResetLog,
    pub(super) origin: u64,
    /// The ids of this store's leases (concurrency limits).
    pub(super) leases: crate::identity::LeaseIds,
    /// The scripts loaded ahead ([`Store::prepare`](crate::store::Store::prepare)).
    pub(super) prepared: super::script::Prepared,
}

/// Settings for a [`RedisStore`](super::RedisStore): start with
/// [`RedisStore::builder`](super::RedisStore::builder), [`RedisStore::cluster`](super::RedisStore::cluster)
/// or [`RedisStore::sentinel`](super::RedisStore::sentinel), finish with
/// [`connect`](RedisStoreBuilder::connect) or [`connect_lazy`](RedisStoreBuilder::connect_lazy).
///
/// Its `Debug` output shows URLs as scheme, host and port only, and a TLS root certificate as
/// its size: never a password.
///
/// ```no_run
/// use std::time::Duration;
/// use redlimit::store::RedisStore;
/// # async fn run() -> Result<(), redlimit::StoreError> {
/// let store = RedisStore::builder("redis://10.0.0.5:6379")
///     .prefix("checkout")
///     .connect_timeout(Duration::from_millis(250))
///     .connect_lazy()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[must_use]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub struct RedisStoreBuilder {
    topology: Topology,
    prefix: String,
    connect_timeout: Duration,
    batch: usize,
    linger: Duration,
    pipeline_window: Duration,
    pipeline_limit: usize,
    override_poll: Duration,
    #[cfg(feature = "tls")]
    tls: super::tls::TlsOptions,
}

impl fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("RedisStoreBuilder");
        s.field("topology", &self.topology)
            .field("prefix", &self.prefix)
            .field("connect_timeout", &self.connect_timeout)
            .field("batch", &self.batch)
            .field("linger", &self.linger)
            .field("pipeline_window", &self.pipeline_window)
            .field("pipeline_limit", &self.pipeline_limit)
            .field("override_poll", &self.override_poll);
        #[cfg(feature = "tls")]
        s.field("tls", &self.tls);
        s.finish()
    }
}

impl RedisStoreBuilder {
    pub(super) fn new(topology: Topology) -> Self {
        RedisStoreBuilder {
            topology,
            prefix: DEFAULT_PREFIX.to_owned(),
            connect_timeout: Duration::from_millis(500),
            batch: DEFAULT_MAX,
            linger: DEFAULT_LINGER,
            pipeline_window: Duration::ZERO,
            pipeline_limit: 0,
            override_poll: DEFAULT_OVERRIDE_POLL,
            #[cfg(feature = "tls")]
            tls: super::tls::TlsOptions::default(),
        }
    }

    /// How often the store polls Redis for what other replicas changed (default 250 ms; at
    /// least 10 ms): the overrides' version and, when it moved, every override; and the
    /// resets made since the last poll. An override set or a key reset through any replica
    /// applies on this one within about this long (a reset drops the cached denials of the
    /// key in every layer in front of this store). Each poll is one script call, which reads
    /// the hash of overrides only after a change; the decisions themselves look overrides up
    /// in memory and cost Redis nothing more (`benches/README.md`). The first poll is made
    /// at once, and checks wait for it (`connect` makes it before it returns).
    ///
    /// ```
    /// use std::time::Duration;
    /// let builder = redlimit::store::RedisStore::builder("redis://127.0.0.1:6380")
    ///     .override_poll(Duration::from_millis(100));
    /// ```
    pub fn override_poll(mut self, every: Duration) -> Self {
        self.override_poll = every.max(Duration::from_millis(10));
        self
    }

    /// The prefix of every key this store writes (default `redlimit`): 1 to 64 of
    /// `A-Z a-z 0-9 . _ - : /`.
    ///
    /// ```
    /// let builder = redlimit::store::RedisStore::builder("redis://127.0.0.1:6379").prefix("api");
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long one connection attempt may take (default 500 ms). Requests never wait for it
    /// longer than the layer's store deadline.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = redlimit::store::RedisStore::builder("redis://127.0.0.1:6379")
    ///     .connect_timeout(Duration::from_millis(250));
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// At most `max` decisions per script call (default 32); `1` sends every decision as its
    /// own `EVALSHA`, as before batching.
    ///
    /// A decision made while none of the store's calls is in flight is sent at once, alone
    /// (unless the last batch held several decisions and Redis answers within the
    /// [`batch_linger`](Self::batch_linger): it then waits one turn of the scheduler for the
    /// decisions made in the same turn, and shares their call). Under
    /// load, the decisions that are waiting at the same moment for the same script
    /// (and, in a Cluster, the same hash slot) go out as one call that evaluates and commits
    /// each on its own, in order; how long a batch may wait for more is
    /// [`batch_linger`](Self::batch_linger)'s. At 64 concurrent requests that costs Redis
    /// about half the CPU per GCRA decision (`benches/README.md`). Each decision's answer,
    /// error and failure handling are those of its own call: a key of the wrong type fails its
    /// own decision only; a lost call fails each decision in it and is never sent again.
    ///
    /// ```
    /// let unbatched = redlimit::store::RedisStore::builder("redis://127.0.0.1:6379").batch(1);
    /// ```
    pub fn batch(mut self, max: usize) -> Self {
        self.batch = max.max(1);
        self
    }

    /// How long a batch may wait for more decisions while a call is in flight (default
    /// 1 ms); zero never holds one.
    ///
    /// Each script call costs Redis a wake-up, a read and a write besides its scripts, so
    /// fewer and larger calls cost it less CPU. A batch taken
    /// while a call is in flight is held until that call is answered (what arrived meanwhile
    /// goes with it), until `max` decisions wait, or for at most `linger` (Tokio's timer
    /// rounds it up to its next millisecond), whichever comes first; and only while the
    /// store's recent calls were answered within `linger` (smoothed over the last few). On
    /// loopback or a LAN a decision then waits less than one round trip more; with Redis
    /// further away than `linger`, nothing is held: a batch goes out at once, pipelined
    /// behind the calls in flight, since waiting would cost up to a round trip. A held
    /// decision's deadline (the layer's) runs meanwhile, as for any call.
    ///
    /// ```
    /// use std::time::Duration;
    /// let never_held = redlimit::store::RedisStore::builder("redis://127.0.0.1:6379")
    ///     .batch_linger(Duration::ZERO);
    /// ```
    pub fn batch_linger(mut self, linger: Duration) -> Self {
        self.linger = linger;
        self
    }

    /// Holds every batch for `window` (default zero: none), whatever is in flight and however
    /// far Redis is, as envoyproxy/ratelimit's `REDIS_PIPELINE_WINDOW` holds its commands:
    /// the decisions made meanwhile go in the same calls (at most [`batch`](Self::batch) per
    /// call), ended early by [`pipeline_limit`](Self::pipeline_limit) decisions waiting.
    ///
    /// A decision then waits up to `window` more (even one alone: every decision joins a
    /// batch), and Redis reads, runs and answers fewer, larger calls: less Redis CPU per
    /// decision where calls are few in flight or Redis is far, which the
    /// [`batch_linger`](Self::batch_linger) (used only without a window) does not hold for.
    /// Sub-millisecond windows are kept to within about 50 µs (a thread of the store sleeps
    /// to each hold's end, which costs two more thread wake-ups a hold); longer ones are
    /// Tokio's timer's, which rounds up to its next millisecond. No effect with `.batch(1)`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let builder = redlimit::store::RedisStore::builder("redis://127.0.0.1:6379")
    ///     .pipeline_window(Duration::from_micros(150))
    ///     .pipeline_limit(8);
    /// ```
    pub fn pipeline_window(mut self, window: Duration) -> Self {
        self.pipeline_window = window;
        self
    }

    /// Ends a [`pipeline_window`](Self::pipeline_window)'s hold once `limit` decisions wait
    /// (default 0: once a batch is full, [`batch`](Self::batch)'s maximum), as
    /// envoyproxy/ratelimit's `REDIS_PIPELINE_LIMIT` flushes its pipeline. A limit above the
    /// batch's maximum sends that many decisions at once, in several calls. No effect without
    /// a window.
    ///
    /// ```
    /// use std::time::Duration;
    /// let builder = redlimit::store::RedisStore::builder("redis://127.0.0.1:6379")
    ///     .pipeline_window(Duration::from_millis(1))
    ///     .pipeline_limit(16);
    /// ```
    pub fn pipeline_limit(mut self, limit: usize) -> Self {
        self.pipeline_limit = limit;
        self
    }

    fn check_prefix(&self) -> Result<(), ConfigError> {
        let valid = !self.prefix.is_empty()
            && self.prefix.len() <= 64
            && self
                .prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-:/".contains(&b));
        if valid {
            Ok(())
        } else {
            Err(ConfigError::InvalidPrefix(self.prefix.clone()))
        }
    }

    fn client(&self, url: &str) -> Result<redis::Client, ConfigError> {
        let info = connection_info(url)?;
        #[cfg(feature = "tls")]
        if self.tls.is_custom() {
            return self.tls.client(info).map_err(|e| config_error([url], &e));
        }
        redis::Client::open(info).map_err(|e| config_error([url], &e))
    }

    fn manager_config(&self) -> ConnectionManagerConfig {
        // One attempt per reconnect: requests waiting on a reconnect would otherwise wait out
        // its backoff (up to the deadline) while Redis refuses connections. The next request
        // after a failed attempt starts a new one, so limiting resumes as soon as Redis is up.
        ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_number_of_retries(0)
    }

    /// Every URL the store dials first (the masters Sentinels name are dialled as they say).
    #[cfg(feature = "tls")]
    fn urls(&self) -> &[String] {
        match &self.topology {
            Topology::Standalone(url) => std::slice::from_ref(url),
            Topology::Cluster(nodes) => nodes,
            Topology::Sentinel { sentinels, .. } => sentinels,
        }
    }

    fn backend(&self) -> Result<Backend, ConfigError> {
        self.check_prefix()?;
        #[cfg(feature = "tls")]
        if self.urls().iter().any(|url| super::tls::is_tls(url)) {
            super::tls::ensure_provider()?;
        }
        #[cfg(feature = "tls")]
        super::tls::refuse_insecure(self.urls())?;
        let target = format!("{:?}", self.topology);
        match &self.topology {
            Topology::Standalone(url) => {
                let dial = Standalone {
                    client: self.client(url)?,
                    config: self.manager_config(),
                };
                Ok(Backend::Standalone(Arc::new(Healing::new(dial, target, 1))))
            }
            Topology::Cluster(nodes) => {
                let urls = nodes.iter().map(String::as_str);
                // No retries inside the client: it would replay a call after an I/O error.
                let builder = ClusterClient::builder(urls.clone())
                    .retries(0)
                    .connection_timeout(self.connect_timeout)
                    .response_timeout(CLUSTER_RESPONSE_TIMEOUT)
                    .tcp_settings(tcp::settings());
                #[cfg(feature = "tls")]
                let builder = if self.tls.is_custom() {
                    builder
                        .certs(self.tls.certificates())
                        .danger_accept_invalid_hostnames(self.tls.skip_hostname_verification)
                } else {
                    builder
                };
                let client = builder.build().map_err(|e| config_error(urls, &e))?;
                let dial = ClusterDial(client);
                Ok(Backend::Cluster(Arc::new(Healing::new(
                    dial, target, BUCKETS,
                ))))
            }
            Topology::Sentinel { sentinels, master } => {
                let urls = sentinels.iter().map(String::as_str);
                let infos = urls
                    .clone()
                    .map(connection_info)
                    .collect::<Result<Vec<_>, _>>()?;
                let to_master =
                    SentinelNodeConnectionInfo::default().set_tcp_settings(tcp::settings());
                let client = SentinelClient::build(
                    infos,
                    master.clone(),
                    Some(to_master),
                    SentinelServerType::Master,
                )
                .map_err(|e| config_error(urls, &e))?;
                Ok(Backend::Sentinel(Arc::new(SentinelBackend::new(
                    client,
                    self.manager_config(),
                    target,
                ))))
            }
        }
    }

    /// The deployment, connected on first use. Fails only on a bad URL or prefix.
    pub(super) fn build(self) -> Result<Deployment, ConfigError> {
        let backend = self.backend()?;
        Ok(Deployment {
            batcher: Arc::new(Batcher::new(
                backend.clone(),
                self.prefix.clone(),
                self.batch,
                self.linger,
                Window::new(
                    self.pipeline_window,
                    match self.pipeline_limit {
                        0 => self.batch,
                        limit => limit,
                    },
                ),
            )),
            backend,
            prefix: self.prefix,
            topology: self.topology,
            overrides: OverrideTable::new(),
            override_poll: self.override_poll,
            poll: Default::default(),
            resets: ResetLog::default(),
            origin: crate::identity::instance(),
            leases: crate::identity::LeaseIds::new(),
            prepared: super::script::Prepared::default(),
        })
    }
}

/// The connection details of `url`, with the store's TCP settings (keepalive, user timeout).
fn connection_info(url: &str) -> Result<ConnectionInfo, ConfigError> {
    let info = url
        .into_connection_info()
        .map_err(|e| config_error([url], &e))?;
    Ok(info.set_tcp_settings(tcp::settings()))
}

#[cfg(test)]
mod tests;
#[cfg(feature = "tls")]
mod tls;

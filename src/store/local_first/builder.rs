//! Building a [`LocalFirstStore`]: its settings, checked, and its background task started.

use std::sync::Arc;
use std::time::Duration;

use super::core::Core;
use super::settings::Settings;
use super::{LocalFirstStore, Running, task};
use crate::error::ConfigError;
use crate::store::{Clock, RedisStore, SystemClock};

/// Settings for a [`LocalFirstStore`]: start with [`LocalFirstStore::builder`] or
/// [`RedisStore::local_first`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::ConfigError> {
/// use std::time::Duration;
/// use redlimit::store::{LocalFirstStore, RedisStore};
/// let redis = RedisStore::builder("redis://127.0.0.1:6379").connect_lazy()?;
/// let store = LocalFirstStore::builder(redis)
///     .interval(Duration::from_millis(200))
///     .marks(0.85, 1.0)
///     .early_sync(0.05)
///     .build()?;
/// assert!(LocalFirstStore::builder(store_redis()).marks(1.0, 0.5).build().is_err());
/// # fn store_redis() -> RedisStore { RedisStore::builder("redis://127.0.0.1:6379").connect_lazy().unwrap() }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub struct LocalFirstStoreBuilder {
    redis: RedisStore,
    settings: Settings,
}

impl LocalFirstStoreBuilder {
    pub(super) fn new(redis: RedisStore) -> Self {
        LocalFirstStoreBuilder {
            redis,
            settings: Settings::default(),
        }
    }

    /// How often the store syncs with Redis (default 100 ms; 1 ms to 60 s). Each sync costs
    /// Redis one script call per 64 touched keys (per hash slot in a Cluster), whatever the
    /// request rate.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.settings.interval = interval;
        self
    }

    /// The admission marks, as fractions of each limit (default 0.8 and 1.0, chosen with the
    /// simulation in `benches/local_first_sim.rs`): below `low` a request is admitted, above
    /// `high` denied, in between denied with a probability rising linearly from 0 to 1.
    /// `0 < low <= high <= 2`. A hard threshold (`1.0, 1.0`) brings back the see-saw.
    pub fn marks(mut self, low: f64, high: f64) -> Self {
        self.settings.low = low;
        self.settings.high = high;
        self
    }

    /// Syncs a key early when the units it counted since the last sync reach this share of its
    /// smallest limit (default 0.5; in `(0, 1]`): an instance that alone took half a limit since
    /// the last sync tells the fleet at once.
    pub fn early_sync(mut self, share: f64) -> Self {
        self.settings.early_share = share;
        self
    }

    /// The instances assumed until the first heartbeat answers (default 1): the share each
    /// takes if Redis is unreachable from the start.
    pub fn instances(mut self, instances: u32) -> Self {
        self.settings.instances = instances.max(1);
        self
    }

    /// How many decisions of a key within one sync interval turn it hot on this instance
    /// (default [`DEFAULT_LOCAL_AFTER`](crate::store::DEFAULT_LOCAL_AFTER); at least 1), once
    /// the interval before saw at least a quarter of that (so a lone burst stays exact): from
    /// then on it is decided in memory and synced in the background, until a whole interval
    /// sees fewer than a quarter of that. A key is decided exactly, by Redis, while it is
    /// cold, and always when one of its policy's limits admits fewer than this many units per
    /// interval at its rate (a limit of 100 a minute, at 100 ms syncs: 0.17): such a key's
    /// admissions cost Redis little, and its denials are the deny cache's.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::ConfigError> {
    /// use redlimit::store::{LocalFirstStore, RedisStore};
    /// let redis = RedisStore::builder("redis://127.0.0.1:6379").connect_lazy()?;
    /// let store = LocalFirstStore::builder(redis).local_after(32).build()?;
    /// assert!(store.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn local_after(mut self, decisions: u32) -> Self {
        self.settings.local_after = decisions;
        self
    }

    /// The most keys the store holds decided state for (default
    /// [`DEFAULT_MAX_KEYS`](crate::store::DEFAULT_MAX_KEYS); at least 64, one per shard), as
    /// the memory store's cap ([`MemoryStoreBuilder::max_keys`](crate::store::MemoryStoreBuilder::max_keys)):
    /// at the cap, a new key evicts the key that is soonest idle among 8 sampled.
    ///
    /// Evicting never loses units this instance counted that Redis has not acknowledged yet:
    /// the fleet would never see them, and would admit them again. A key holding such units
    /// is not evicted; when every key sampled holds some, the new key is kept beyond the cap
    /// until the next sync acknowledges them. Units are counted only by hot keys (a key turns
    /// hot only with a sync), so the keys beyond the cap are at most those that counted units
    /// since the last acknowledged sync; while Redis is unreachable, at most the keys that were
    /// hot when it went. An evicted key that comes back is a cold key:
    /// it decides on its share of each limit until its first sync.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::ConfigError> {
    /// use redlimit::store::{LocalFirstStore, RedisStore};
    /// let redis = RedisStore::builder("redis://127.0.0.1:6379").connect_lazy()?;
    /// let store = LocalFirstStore::builder(redis).max_keys(1_000_000).build()?;
    /// assert!(store.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.settings.max_keys = max_keys;
        self
    }

    /// Builds the store and starts its background task on the current Tokio runtime; refuses
    /// settings out of range, or a call outside a runtime.
    pub fn build(self) -> Result<LocalFirstStore, ConfigError> {
        let settings = self.settings.validate()?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            ConfigError::InvalidLocalFirst("build it inside a Tokio runtime".to_owned())
        })?;
        let core = Arc::new(Core::new(
            settings,
            Box::new(SystemClock) as Box<dyn Clock>,
            instance_id(),
            seed(),
        ));
        let task = runtime.spawn(task::run(Arc::clone(&core), self.redis.clone()));
        Ok(LocalFirstStore {
            shared: Arc::new(Running {
                core,
                redis: self.redis,
                task: task.abort_handle(),
            }),
        })
    }
}

impl RedisStore {
    /// This store in local-first mode, syncing every `interval`, with the default settings
    /// otherwise ([`LocalFirstStore::builder`] for the others). Must be called inside a Tokio
    /// runtime.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), redlimit::ConfigError> {
    /// use std::time::Duration;
    /// use redlimit::store::RedisStore;
    /// let store = RedisStore::builder("redis://127.0.0.1:6379")
    ///     .connect_lazy()?
    ///     .local_first(Duration::from_millis(100))?;
    /// # Ok(()) }
    /// ```
    pub fn local_first(self, interval: Duration) -> Result<LocalFirstStore, ConfigError> {
        LocalFirstStore::builder(self).interval(interval).build()
    }
}

/// An id unique to this store among the fleet's: random, never reused.
fn instance_id() -> String {
    format!("{:016x}", seed())
}

fn seed() -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::RandomState::default().hash_one((std::process::id(), SystemClock.now_us()))
}

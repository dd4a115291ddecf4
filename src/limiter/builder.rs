//! The limiter's settings.

use std::sync::Arc;
use std::time::Duration;

use super::Limiter;
use super::shared::{Settings, Shared};
use crate::policy::Policy;
use crate::store::{MemoryStore, Store};

/// The store's default deadline: a reservation not answered within it is decided in memory.
///
/// ```
/// assert_eq!(redlimit::limiter::DEFAULT_STORE_DEADLINE.as_millis(), 500);
/// ```
pub const DEFAULT_STORE_DEADLINE: Duration = Duration::from_millis(500);

/// How long the store is left alone after it failed before one call tries it again.
///
/// ```
/// assert_eq!(redlimit::limiter::DEFAULT_COOL_DOWN.as_secs(), 1);
/// ```
pub const DEFAULT_COOL_DOWN: Duration = Duration::from_secs(1);

/// Configures a [`Limiter`]: [`Limiter::builder`].
///
/// ```
/// use std::time::Duration;
/// use redlimit::limiter::Limiter;
/// use redlimit::store::MemoryStore;
/// use redlimit::{Limit, Policy};
/// let policy = Policy::new("payments", [Limit::gcra(100, Duration::from_secs(1))?])?;
/// let limiter = Limiter::builder(MemoryStore::new(), policy)
///     .max_wait(Duration::from_secs(5))
///     .local_share(20) // 20 processes share the quota: 5/s each while the store is down
///     .build();
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[must_use]
pub struct LimiterBuilder {
    store: Arc<dyn Store>,
    policy: Policy,
    max_wait: Option<Duration>,
    deadline: Duration,
    instances: Option<u32>,
    cool_down: Duration,
    local: Option<MemoryStore>,
    per_request: Vec<usize>,
}

impl std::fmt::Debug for LimiterBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LimiterBuilder")
            .field("store", &self.store.kind())
            .field("policy", &self.policy.name())
            .field("max_wait", &self.max_wait)
            .finish_non_exhaustive()
    }
}

impl LimiterBuilder {
    pub(super) fn new(store: Arc<dyn Store>, policy: Policy) -> Self {
        LimiterBuilder {
            store,
            policy,
            max_wait: None,
            deadline: DEFAULT_STORE_DEADLINE,
            instances: Some(1),
            cool_down: DEFAULT_COOL_DOWN,
            local: None,
            per_request: Vec::new(),
        }
    }

    /// The limits (by position in the policy) that count permits, one unit each, rather than
    /// their cost: an LLM quota of 500 requests and 90 000 tokens a minute is a policy
    /// `[gcra(500/min), gcra(90000/min)]` whose limit 0 counts requests, and a permit's cost
    /// is its tokens. Reservations only (GCRA and token buckets): a policy that checks charges
    /// the cost to every limit. Positions past the policy's limits are ignored.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let minute = Duration::from_secs(60);
    /// let llm = Policy::new("llm", [Limit::gcra(500, minute).unwrap(), Limit::gcra(90_000, minute).unwrap()]).unwrap();
    /// let limiter = Limiter::builder(MemoryStore::new(), llm).per_request([0]).build();
    /// let permit = limiter.acquire("provider", 4_000).await.unwrap(); // 1 request, 4 000 tokens
    /// permit.settle(3_100).await.unwrap(); // 900 tokens back, still 1 request
    /// # });
    /// ```
    pub fn per_request(mut self, positions: impl IntoIterator<Item = usize>) -> Self {
        self.per_request = positions.into_iter().collect();
        self
    }

    /// The longest [`Limiter::acquire`] waits for a slot; a slot further away is not taken
    /// ([`AcquireError::TooLong`](super::AcquireError::TooLong)). The default: the policy's
    /// longest period.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let limiter = Limiter::builder(MemoryStore::new(), policy).max_wait(Duration::from_secs(30)).build();
    /// assert_eq!(limiter.max_wait(), Duration::from_secs(30));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = Some(max_wait);
        self
    }

    /// How long a store call may take before the limiter decides in memory instead
    /// ([`DEFAULT_STORE_DEADLINE`]). A reservation that answers late may still have been
    /// booked in the store: that slot is lost to the fleet, never handed out twice.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let limiter = Limiter::builder(MemoryStore::new(), policy)
    ///     .store_deadline(Duration::from_millis(100))
    ///     .build();
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn store_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// While the store fails, reserve in this process's memory with its share of the
    /// policy: every count divided by `instances` (rounded up), the meaning of the layer's
    /// `local:N`. Never unlimited. The default: 1 (the whole policy in each process).
    /// Reservations the store grants are mirrored into that memory as far as the share goes
    /// by the same slot, so a process that just used its share through the store does not
    /// get it again when the store fails; what memory books while the store fails is charged
    /// to the store when it answers again.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # let policy = Policy::new("p", [Limit::gcra(100, Duration::from_secs(1))?])?;
    /// let limiter = Limiter::builder(MemoryStore::new(), policy).local_share(4).build();
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn local_share(mut self, instances: u32) -> Self {
        self.instances = Some(instances.max(1));
        self
    }

    /// While the store fails, give no permit:
    /// [`AcquireError::Store`](super::AcquireError::Store) instead of a decision in memory.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let limiter = Limiter::builder(MemoryStore::new(), policy).fail_on_store_error().build();
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn fail_on_store_error(mut self) -> Self {
        self.instances = None;
        self
    }

    /// After a store failure, how long calls go to memory before one call tries the store
    /// again ([`DEFAULT_COOL_DOWN`]); the others keep deciding in memory until it answers, so
    /// a store that comes back gets one call, not a stampede. It is the engine's circuit
    /// breaker, as the layer's, per failure domain of the store (a Redis Cluster's shard),
    /// opening on the first failure.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let limiter = Limiter::builder(MemoryStore::new(), policy)
    ///     .cool_down(Duration::from_millis(250))
    ///     .build();
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn cool_down(mut self, cool_down: Duration) -> Self {
        self.cool_down = cool_down;
        self
    }

    /// The memory store to decide in while the store fails (a fresh one by default); share
    /// one between limiters to have their local shares in one place.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let limiter = Limiter::builder(MemoryStore::new(), policy).local_store(MemoryStore::new()).build();
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn local_store(mut self, store: MemoryStore) -> Self {
        self.local = Some(store);
        self
    }

    /// The limiter.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let limiter = Limiter::builder(MemoryStore::new(), policy).build();
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn build(self) -> Limiter {
        let max_wait = self.max_wait.unwrap_or_else(|| self.policy.max_period());
        match self.store.reservations() {
            Some(reservations) if crate::store::reservable(&self.policy) => {
                reservations.prepare_reservations();
            }
            _ => self.store.prepare(&self.policy),
        }
        let per_request = (0..self.policy.limits().len())
            .map(|i| self.per_request.contains(&i))
            .collect();
        Limiter {
            shared: Arc::new(Shared::new(
                self.store,
                self.policy,
                self.local.unwrap_or_default(),
                Settings {
                    max_wait,
                    deadline: self.deadline,
                    instances: self.instances,
                    cool_down: self.cool_down,
                    per_request,
                },
            )),
        }
    }
}

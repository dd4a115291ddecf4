//! [`Limiter`], the handle callers clone: a store and a policy, and the three ways to ask it
//! for a permit.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::shared::Booking;
use super::shared::Shared;
use super::{AcquireError, LimiterBuilder, Permit};
use crate::key::Key;
use crate::policy::Policy;
use crate::store::Store;

/// A store and a policy, shared by every clone: callers ask for permits and wait their turn
/// instead of being refused. Cheap to clone.
///
/// ```
/// use std::time::Duration;
/// use redlimit::limiter::Limiter;
/// use redlimit::store::MemoryStore;
/// use redlimit::{Limit, Policy};
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let policy = Policy::new("payments", [Limit::gcra(100, Duration::from_secs(1)).unwrap()]).unwrap();
/// let limiter = Limiter::new(MemoryStore::new(), policy);
/// let permit = limiter.acquire("api.payments.example", 1).await.unwrap();
/// // ... call the payment API ...
/// # drop(permit);
/// # });
/// ```
#[derive(Clone)]
pub struct Limiter {
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("store", &self.shared.store().kind())
            .field("policy", &self.shared.policy.name())
            .field("max_wait", &self.shared.max_wait)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("policy", &self.policy.name())
            .finish_non_exhaustive()
    }
}

impl Limiter {
    /// A limiter with the default settings ([`Limiter::builder`] for others).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// let policy = Policy::new("crawler", [Limit::gcra(2, Duration::from_secs(1))?])?;
    /// let limiter = Limiter::new(MemoryStore::new(), policy);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn new(store: impl Store, policy: Policy) -> Self {
        Limiter::builder(store, policy).build()
    }

    /// Starts configuring a limiter over `store` for `policy`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// let policy = Policy::new("crawler", [Limit::gcra(2, Duration::from_secs(1))?])?;
    /// let limiter = Limiter::builder(MemoryStore::new(), policy).max_wait(Duration::from_secs(10)).build();
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn builder(store: impl Store, policy: Policy) -> LimiterBuilder {
        LimiterBuilder::new(crate::store::shared(store), policy)
    }

    /// A permit for `cost` units of `key`, waiting at most the limiter's
    /// [`max_wait`](LimiterBuilder::max_wait) for it.
    ///
    /// Over a policy of GCRA and token bucket limits and a store that reserves (memory,
    /// Redis): one store call books the earliest slot under every limit, then the future
    /// sleeps exactly until it (the wait counted from the answer's arrival: never early, late
    /// by at most the answer's trip back), with no second call; callers are served in the order their
    /// reservations reached the store, across every process. Dropping the future before the
    /// slot gives the units back ([`Reservations::give_back`](crate::store::Reservations::give_back)
    /// says what that means for those who reserved behind). Other policies check, and retry
    /// after the decision's `retry_after` with jitter (see the module docs).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let policy = Policy::new("p", [Limit::gcra(20, Duration::from_secs(1)).unwrap()]).unwrap();
    /// let limiter = Limiter::new(MemoryStore::new(), policy);
    /// let start = std::time::Instant::now();
    /// for _ in 0..21 {
    ///     limiter.acquire("k", 1).await.unwrap();
    /// }
    /// assert!(start.elapsed() >= Duration::from_millis(50), "the 21st waits its slot");
    /// # });
    /// ```
    pub fn acquire(
        &self,
        key: impl Into<Key>,
        cost: u64,
    ) -> impl Future<Output = Result<Permit, AcquireError>> + Send + 'static {
        self.acquire_timeout(key, cost, self.shared.max_wait)
    }

    /// [`acquire`](Self::acquire), waiting at most `max_wait`: a slot further away is not
    /// taken ([`AcquireError::TooLong`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::{AcquireError, Limiter}, store::MemoryStore, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(10)).unwrap()]).unwrap();
    /// let limiter = Limiter::new(MemoryStore::new(), policy);
    /// limiter.acquire("k", 1).await.unwrap();
    /// let late = limiter.acquire_timeout("k", 1, Duration::from_secs(1)).await;
    /// assert!(matches!(late, Err(AcquireError::TooLong { .. })));
    /// # });
    /// ```
    pub fn acquire_timeout(
        &self,
        key: impl Into<Key>,
        cost: u64,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Permit, AcquireError>> + Send + 'static {
        let shared = Arc::clone(&self.shared);
        let key = key.into();
        async move {
            if cost == 0 {
                return Ok(Permit::new(shared, key, Booking::Nothing));
            }
            let (answered, booking) = if shared.native {
                shared.book(&key, cost, max_wait).await?
            } else {
                shared.book_by_checks(&key, cost, max_wait).await?
            };
            let wait = booking.wait();
            let mut permit = Permit::new(shared, key, booking);
            if !wait.is_zero() {
                permit.set_pending(true);
                tokio::time::sleep_until((answered + wait).into()).await;
                permit.set_pending(false);
            }
            Ok(permit)
        }
    }

    /// A permit only if one is free now: never waits (but for the store call), takes nothing
    /// otherwise ([`AcquireError::TooLong`] says how long it would have waited).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(10)).unwrap()]).unwrap();
    /// let limiter = Limiter::new(MemoryStore::new(), policy);
    /// assert!(limiter.try_acquire("k", 1).await.is_ok());
    /// assert!(limiter.try_acquire("k", 1).await.is_err());
    /// # });
    /// ```
    pub fn try_acquire(
        &self,
        key: impl Into<Key>,
        cost: u64,
    ) -> impl Future<Output = Result<Permit, AcquireError>> + Send + 'static {
        self.acquire_timeout(key, cost, Duration::ZERO)
    }

    /// The policy.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(10))?])?;
    /// assert_eq!(Limiter::new(MemoryStore::new(), policy).policy().name(), "p");
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn policy(&self) -> &Policy {
        &self.shared.policy
    }

    /// The longest [`acquire`](Self::acquire) waits.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(10))?])?;
    /// assert_eq!(Limiter::new(MemoryStore::new(), policy).max_wait(), Duration::from_secs(10));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn max_wait(&self) -> Duration {
        self.shared.max_wait
    }

    /// Whether permits cost one store call each (every limit is GCRA or a token bucket and
    /// the store reserves), rather than checks retried.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// let gcra = Policy::new("g", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// assert!(Limiter::new(MemoryStore::new(), gcra).reserves());
    /// let window = Policy::new("w", [Limit::fixed_window(1, Duration::from_secs(1))?])?;
    /// assert!(!Limiter::new(MemoryStore::new(), window).reserves());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn reserves(&self) -> bool {
        self.shared.native
    }

    /// The store calls made so far by this limiter and its clones (reservations, checks,
    /// refunds, charges): one per permit when it [`reserves`](Self::reserves).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(9, Duration::from_secs(1)).unwrap()]).unwrap());
    /// limiter.acquire("k", 1).await.unwrap();
    /// assert_eq!(limiter.store_calls(), 1);
    /// # });
    /// ```
    pub fn store_calls(&self) -> u64 {
        self.shared.calls.load(Ordering::Relaxed)
    }

    /// The bookings made in this process's memory because the store failed or was left
    /// alone after failing.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(9, Duration::from_secs(1))?])?);
    /// assert_eq!(limiter.local_decisions(), 0);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn local_decisions(&self) -> u64 {
        self.shared.local_decisions.load(Ordering::Relaxed)
    }
}

//! Why a permit was not given.

use std::time::Duration;

use crate::error::StoreError;

/// Why [`Limiter::acquire`](super::Limiter::acquire) (or `try_acquire`, or the
/// [`AcquireLayer`](super::AcquireLayer)) gave no permit. Nothing was taken from any limit.
///
/// ```
/// use std::time::Duration;
/// use redlimit::limiter::{AcquireError, Limiter};
/// use redlimit::store::{ManualClock, MemoryStore};
/// use redlimit::{Limit, Policy};
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let policy = Policy::new("api", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
/// let limiter = Limiter::new(MemoryStore::with_clock(ManualClock::new(1 << 40)), policy);
/// limiter.try_acquire("upstream", 1).await.unwrap();
/// let err = limiter.try_acquire("upstream", 1).await.unwrap_err();
/// assert_eq!(err, AcquireError::TooLong { wait: Duration::from_secs(60) });
/// assert_eq!(limiter.try_acquire("upstream", 2).await.unwrap_err(), AcquireError::Never { cost: 2 });
/// # });
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcquireError {
    /// The earliest slot is further away than the longest wait accepted.
    #[error("the earliest slot is {wait:?} away, beyond the longest wait accepted")]
    TooLong {
        /// How long the caller would have had to wait (at least).
        wait: Duration,
    },
    /// A limit of the policy never admits this cost: it is above the limit's count.
    #[error("a cost of {cost} is above a limit of the policy: never admitted")]
    Never {
        /// The cost asked for.
        cost: u64,
    },
    /// The store failed and the limiter was built to fail rather than decide in memory
    /// ([`LimiterBuilder::fail_on_store_error`](super::LimiterBuilder::fail_on_store_error)).
    #[error("the store failed")]
    Store(#[source] StoreError),
}

impl PartialEq for AcquireError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (AcquireError::TooLong { wait: a }, AcquireError::TooLong { wait: b }) => a == b,
            (AcquireError::Never { cost: a }, AcquireError::Never { cost: b }) => a == b,
            (AcquireError::Store(a), AcquireError::Store(b)) => a.to_string() == b.to_string(),
            _ => false,
        }
    }
}

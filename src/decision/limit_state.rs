//! What one limit of a policy says about a request.

use std::time::Duration;

use crate::limit::Limit;

/// What one limit of a policy says about a request.
///
/// ```
/// use std::time::Duration;
/// use redlimit::store::MemoryStore;
/// use redlimit::{Key, Limit, Policy};
///
/// let store = MemoryStore::new();
/// let policy = Policy::new("p", [Limit::fixed_window(2, Duration::from_secs(60))?])?;
/// let decision = store.check_now(&policy, &Key::new("k"), 1);
/// let state = &decision.limits()[0];
/// assert!(state.is_allowed());
/// assert_eq!(state.remaining(), 1);
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitState {
    pub(super) limit: Limit,
    pub(super) allowed: bool,
    pub(super) remaining: u64,
    pub(super) reset_after: Duration,
    pub(super) retry_after: Option<Duration>,
    pub(super) never: bool,
}

impl LimitState {
    /// Builds a state from the integers the algorithms produce. `retry_us` is 0 when allowed
    /// and negative when the cost exceeds the limit's capacity.
    pub(crate) fn from_raw(
        limit: Limit,
        allowed: bool,
        remaining: u64,
        reset_us: u64,
        retry_us: i64,
    ) -> Self {
        LimitState {
            limit,
            allowed,
            remaining,
            reset_after: Duration::from_micros(reset_us),
            retry_after: (!allowed && retry_us >= 0)
                .then(|| Duration::from_micros(retry_us.unsigned_abs())),
            never: !allowed && retry_us < 0,
        }
    }

    /// A denying state that also waits out a penalty box of `penalty`: its retry is at least
    /// that long (and its reset, as the key is not free before).
    pub(crate) fn boxed(&mut self, penalty: Duration) {
        if let Some(retry) = self.retry_after.as_mut() {
            *retry = (*retry).max(penalty);
            self.reset_after = self.reset_after.max(penalty);
        }
    }

    /// This limit admits the request: `remaining` units are left after it, and the limit is
    /// fully free again after `reset_after`. For a [`Store`](crate::store::Store) of your own.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{Limit, LimitState};
    /// let limit = Limit::gcra(10, Duration::from_secs(1))?;
    /// let state = LimitState::allowed(limit, 9, Duration::from_millis(100));
    /// assert!(state.is_allowed());
    /// assert_eq!(state.retry_after(), None);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn allowed(limit: Limit, remaining: u64, reset_after: Duration) -> Self {
        LimitState {
            limit,
            allowed: true,
            remaining,
            reset_after,
            retry_after: None,
            never: false,
        }
    }

    /// This limit denies the request: `remaining` units are left (fewer than the cost), the
    /// limit is fully free again after `reset_after`, and the same request would pass after
    /// `retry_after`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{Limit, LimitState};
    /// let limit = Limit::gcra(10, Duration::from_secs(1))?;
    /// let state = LimitState::denied(limit, 0, Duration::from_secs(1), Duration::from_millis(100));
    /// assert_eq!(state.retry_after(), Some(Duration::from_millis(100)));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn denied(
        limit: Limit,
        remaining: u64,
        reset_after: Duration,
        retry_after: Duration,
    ) -> Self {
        LimitState {
            limit,
            allowed: false,
            remaining,
            reset_after,
            retry_after: Some(retry_after),
            never: false,
        }
    }

    /// This limit can never admit the request: its cost exceeds the limit's capacity.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{Limit, LimitState};
    /// let limit = Limit::gcra(10, Duration::from_secs(1))?;
    /// let state = LimitState::over_capacity(limit, 10, Duration::ZERO);
    /// assert!(state.exceeds_capacity());
    /// assert_eq!(state.retry_after(), None);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn over_capacity(limit: Limit, remaining: u64, reset_after: Duration) -> Self {
        LimitState {
            limit,
            allowed: false,
            remaining,
            reset_after,
            retry_after: None,
            never: true,
        }
    }

    /// The limit this state is about.
    pub fn limit(&self) -> &Limit {
        &self.limit
    }

    /// Whether this limit alone would admit the request.
    pub fn is_allowed(&self) -> bool {
        self.allowed
    }

    /// Units left: after this request if the decision allowed it, as they stand otherwise.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// How long until this limit is fully free again (0 when it already is).
    pub fn reset_after(&self) -> Duration {
        self.reset_after
    }

    /// How long until this limit would admit the request; `None` when it admits it now or
    /// never can (see [`LimitState::exceeds_capacity`]).
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// Whether the request's cost is larger than this limit could ever admit.
    pub fn exceeds_capacity(&self) -> bool {
        self.never
    }
}

//! What [`Admin::inspect`](super::Admin::inspect) answers: a key's state under a policy, read
//! without consuming anything.

use std::time::{Duration, SystemTime};

use crate::decision::{Decision, LimitState};
use crate::error::StoreError;
use crate::policy::Policy;

/// One key's state under one policy, as a request of cost 1 would find it now, with nothing
/// consumed: per limit, the units left ([`LimitState::remaining`]), how long until it is fully
/// free ([`LimitState::reset_after`]) and how long until a request would pass
/// ([`LimitState::retry_after`]; `None` when it would pass now).
///
/// These are the numbers the next real decision starts from: if it is denied, its headers
/// show the same remaining units, reset time and retry time (less the time passed since).
///
/// ```
/// use std::time::Duration;
/// use redlimit::store::{Admin, MemoryStore};
/// use redlimit::{Key, Limit, Policy};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let policy = Policy::new("p", [Limit::fixed_window(2, Duration::from_secs(60)).unwrap()]).unwrap();
/// store.check_now(&policy, &Key::new("k"), 1);
/// let state = store.inspect(&policy, &Key::new("k")).await.unwrap();
/// assert_eq!(state.limits()[0].remaining(), 1);
/// assert!(state.would_allow());
/// let again = store.inspect(&policy, &Key::new("k")).await.unwrap();
/// assert_eq!(again.limits()[0].remaining(), 1, "nothing consumed");
/// # });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    decision: Decision,
}

impl KeyState {
    /// A key's state from each limit's state for a request of cost 1 that is not committed
    /// (remaining units before it, the wait until fully free, the wait until it would pass),
    /// evaluated at `evaluated_at` on the store's clock: for a [`Store`](super::Store) of your
    /// own. Refused as [`Decision::new`] refuses states that do not fit the policy.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use redlimit::store::KeyState;
    /// use redlimit::{Limit, LimitState, Policy};
    /// let limit = Limit::gcra(5, Duration::from_secs(1))?;
    /// let policy = Policy::new("p", [limit])?;
    /// let fresh = LimitState::allowed(limit, 5, Duration::ZERO);
    /// let state = KeyState::new(&policy, SystemTime::now(), [fresh]).unwrap();
    /// assert_eq!(state.limits()[0].remaining(), 5);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn new(
        policy: &Policy,
        evaluated_at: SystemTime,
        states: impl IntoIterator<Item = LimitState>,
    ) -> Result<Self, StoreError> {
        Decision::new(policy, evaluated_at, states).map(KeyState::from_uncommitted)
    }

    /// The state a store's evaluation of cost 1 reported without committing it.
    pub(crate) fn from_uncommitted(decision: Decision) -> Self {
        KeyState { decision }
    }

    /// The policy's name.
    ///
    /// ```
    /// # use std::time::{Duration, SystemTime};
    /// # use redlimit::{store::KeyState, Limit, LimitState, Policy};
    /// # let limit = Limit::gcra(5, Duration::from_secs(1))?;
    /// # let policy = Policy::new("p", [limit])?;
    /// # let state = KeyState::new(&policy, SystemTime::now(), [LimitState::allowed(limit, 5, Duration::ZERO)]).unwrap();
    /// assert_eq!(state.policy(), "p");
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn policy(&self) -> &str {
        self.decision.policy()
    }

    /// When the store read the state, on its clock (Redis `TIME`).
    ///
    /// ```
    /// # use std::time::{Duration, SystemTime, UNIX_EPOCH};
    /// # use redlimit::{store::KeyState, Limit, LimitState, Policy};
    /// # let limit = Limit::gcra(5, Duration::from_secs(1))?;
    /// # let policy = Policy::new("p", [limit])?;
    /// let state = KeyState::new(&policy, UNIX_EPOCH, [LimitState::allowed(limit, 5, Duration::ZERO)]).unwrap();
    /// assert_eq!(state.evaluated_at(), UNIX_EPOCH);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn evaluated_at(&self) -> SystemTime {
        self.decision.evaluated_at()
    }

    /// Every limit's state, in the policy's order.
    ///
    /// ```
    /// # use std::time::{Duration, SystemTime};
    /// # use redlimit::{store::KeyState, Limit, LimitState, Policy};
    /// # let limit = Limit::gcra(5, Duration::from_secs(1))?;
    /// # let policy = Policy::new("p", [limit])?;
    /// # let state = KeyState::new(&policy, SystemTime::now(), [LimitState::allowed(limit, 5, Duration::ZERO)]).unwrap();
    /// assert_eq!(state.limits()[0].limit(), &limit);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn limits(&self) -> &[LimitState] {
        self.decision.limits()
    }

    /// Whether a request of cost 1 would pass now.
    ///
    /// ```
    /// # use std::time::{Duration, SystemTime};
    /// # use redlimit::{store::KeyState, Limit, LimitState, Policy};
    /// # let limit = Limit::gcra(5, Duration::from_secs(1))?;
    /// # let policy = Policy::new("p", [limit])?;
    /// let spent = LimitState::denied(limit, 0, Duration::from_secs(1), Duration::from_millis(200));
    /// let state = KeyState::new(&policy, SystemTime::now(), [spent]).unwrap();
    /// assert!(!state.would_allow());
    /// assert_eq!(state.retry_after(), Some(Duration::from_millis(200)));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn would_allow(&self) -> bool {
        self.decision.is_allowed()
    }

    /// How long until a request of cost 1 would pass (the longest wait among the limits);
    /// `None` when it would pass now.
    ///
    /// ```
    /// # use std::time::{Duration, SystemTime};
    /// # use redlimit::{store::KeyState, Limit, LimitState, Policy};
    /// # let limit = Limit::gcra(5, Duration::from_secs(1))?;
    /// # let policy = Policy::new("p", [limit])?;
    /// # let state = KeyState::new(&policy, SystemTime::now(), [LimitState::allowed(limit, 5, Duration::ZERO)]).unwrap();
    /// assert_eq!(state.retry_after(), None);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        self.decision.retry_after()
    }
}

//! A named set of limits checked together: all must allow a request, and only then does any
//! of them consume.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::error::ConfigError;
use crate::limit::{Algorithm, Limit};

/// The most limits one policy may have; each is evaluated in the same script call.
pub const MAX_LIMITS: usize = 16;

/// The longest penalty box, as the longest period of a limit (2^45 µs, about a year).
const MAX_PENALTY_US: u128 = 1 << 45;

/// A named policy: one to [`MAX_LIMITS`] [`Limit`]s, checked atomically.
///
/// A request is allowed only if every limit allows it, and only then does any limit consume.
/// A denied request consumes nothing, so a burst denied by a short limit does not use up a long
/// one (e.g. `auth.create_token`: 20 per minute *and* 5 per 3 seconds).
///
/// A `Policy` is valid by construction: [`Policy::new`] refuses a bad name and an empty or
/// oversized set of limits, and every [`Limit`] is valid. The name is part of every Redis key
/// the policy writes, so two policies never share state. Cheap to clone.
///
/// ```
/// use std::time::Duration;
/// use redlimit::{Limit, Policy};
///
/// let policy = Policy::new("auth.create_token", [
///     Limit::sliding_log(20, Duration::from_secs(60))?,
///     Limit::sliding_log(5, Duration::from_secs(3))?,
/// ])?;
/// assert_eq!(policy.limits().len(), 2);
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Policy {
    name: Arc<str>,
    limits: Arc<[Limit]>,
    penalty: Option<Duration>,
    /// [`parts`](Self::parts) and [`box_name`](Self::box_name), made on first use and shared
    /// by every clone.
    parts: Arc<OnceLock<Parts>>,
}

/// A policy split for a key with limit keys (the memory store's state of each level).
struct Parts {
    limits: Box<[Policy]>,
    /// The name of the penalty box's entry: `NAME#box`.
    boxed: Arc<str>,
}

impl PartialEq for Policy {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.limits == other.limits && self.penalty == other.penalty
    }
}

impl Eq for Policy {}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("name", &self.name)
            .field("limits", &self.limits)
            .field("penalty", &self.penalty)
            .finish()
    }
}

impl Policy {
    /// A policy named `name` (1 to 64 of `A-Z a-z 0-9 . _ - /`) of 1 to [`MAX_LIMITS`]
    /// limits, or why it cannot be one.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{ConfigError, Limit, Policy};
    /// // GCRA 10/s plus a daily cap, checked together.
    /// let p = Policy::new("api", [
    ///     Limit::gcra(10, Duration::from_secs(1))?,
    ///     Limit::fixed_window(1000, Duration::from_secs(86_400))?,
    /// ])?;
    /// assert_eq!(p.name(), "api");
    /// assert!(matches!(Policy::new("empty", []), Err(ConfigError::NoLimits(_))));
    /// assert!(matches!(
    ///     Policy::new("no spaces", [Limit::gcra(1, Duration::from_secs(1))?]),
    ///     Err(ConfigError::InvalidPolicyName(_))
    /// ));
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn new(
        name: impl Into<Arc<str>>,
        limits: impl IntoIterator<Item = Limit>,
    ) -> Result<Self, ConfigError> {
        let name: Arc<str> = name.into();
        if name.is_empty()
            || name.len() > 64
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
        {
            return Err(ConfigError::InvalidPolicyName(name.to_string()));
        }
        let limits: Arc<[Limit]> = limits.into_iter().take(MAX_LIMITS + 1).collect();
        if limits.is_empty() {
            return Err(ConfigError::NoLimits(name.to_string()));
        }
        if limits.len() > MAX_LIMITS {
            return Err(ConfigError::TooManyLimits(name.to_string()));
        }
        if let Some(second) = limits
            .iter()
            .filter(|l| l.algorithm() == Algorithm::Concurrency)
            .nth(1)
        {
            // All requests of a key share one set of leases, released in one call.
            return Err(ConfigError::InvalidLimit {
                limit: second.to_string(),
                reason: "a policy holds at most one concurrency limit",
            });
        }
        Ok(Policy::part(name, limits))
    }

    /// The name.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{Limit, Policy};
    /// let p = Policy::new("login", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// assert_eq!(p.name(), "login");
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name, shared.
    pub(crate) fn name_arc(&self) -> Arc<str> {
        Arc::clone(&self.name)
    }

    /// The limits, in the order they were given; [`Decision`](crate::Decision) reports them
    /// in the same order. Never empty.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{Limit, Policy};
    /// let p = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// assert_eq!(p.limits()[0].count(), 1);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn limits(&self) -> &[Limit] {
        &self.limits
    }

    /// A policy of some of another's limits, under a name no public policy can have (the memory
    /// store's state of one limit counted under a key of its own).
    pub(crate) fn part(name: Arc<str>, limits: Arc<[Limit]>) -> Policy {
        Policy {
            name,
            limits,
            penalty: None,
            parts: Arc::default(),
        }
    }

    /// This policy with the penalty box `penalty`, unchecked.
    fn with_penalty(mut self, penalty: Option<Duration>) -> Policy {
        self.penalty = penalty;
        self
    }

    /// The policy split for limits counted under keys of their own: one part per limit but
    /// the sliding logs, in order, named `NAME#POSITION`, then one of all the sliding logs
    /// (which share one log), `NAME#log`. `#` is in no policy's name, so a part never meets a
    /// whole policy's state.
    pub(crate) fn parts(&self) -> &[Policy] {
        &self.split().limits
    }

    /// The name of a key's penalty-box entry when its limits count under keys of their own:
    /// `NAME#box` (the box holds the key itself, not its levels).
    pub(crate) fn box_name(&self) -> &str {
        &self.split().boxed
    }

    fn split(&self) -> &Parts {
        self.parts.get_or_init(|| {
            let is_log = |l: &Limit| l.algorithm() == Algorithm::SlidingLog;
            let mut parts: Vec<Policy> = (0..self.limits.len())
                .filter(|&p| !is_log(&self.limits[p]))
                .map(|p| {
                    let name = format!("{}#{p}", self.name);
                    Policy::part(name.into(), Arc::from([self.limits[p]]))
                })
                .collect();
            let logs: Arc<[Limit]> = self.limits.iter().copied().filter(is_log).collect();
            if !logs.is_empty() {
                parts.push(Policy::part(format!("{}#log", self.name).into(), logs));
            }
            Parts {
                limits: parts.into_boxed_slice(),
                boxed: format!("{}#box", self.name).into(),
            }
        })
    }

    /// Whether a check of this policy takes a lease: it has a concurrency limit.
    pub(crate) fn holds_leases(&self) -> bool {
        (self.limits().iter()).any(|l| l.algorithm() == crate::limit::Algorithm::Concurrency)
    }

    /// The limits, shared (the memory store keeps them beside each key's state).
    pub(crate) fn limits_arc(&self) -> Arc<[Limit]> {
        Arc::clone(&self.limits)
    }

    /// The longest period of the policy's sliding-log limits, which share one log per key.
    pub(crate) fn max_log_period_us(&self) -> u64 {
        self.limits
            .iter()
            .filter(|l| l.algorithm() == Algorithm::SlidingLog)
            .map(Limit::period_us)
            .max()
            .unwrap_or(0)
    }

    /// This policy with every count divided by `instances` (rounded up, at least 1): one
    /// instance's share when several enforce it without a shared store.
    pub(crate) fn scaled(&self, instances: u32) -> Policy {
        let instances = u64::from(instances.max(1));
        Policy::part(
            self.name_arc(),
            self.limits
                .iter()
                .map(|l| l.with_smaller_count(l.count().div_ceil(instances).max(1)))
                .collect(),
        )
        .with_penalty(self.penalty)
    }

    /// This policy with a penalty box of `duration`: a key that any limit denies is then
    /// blocked for `duration`, every request of it denied without consuming anything, with
    /// `Retry-After` the time left in the box (or the denying limit's wait, if longer). The
    /// block lives in the store beside the key's state (Redis: a key of the same hash tag,
    /// set in the same script call), so every replica honours it. A request whose cost no limit
    /// could ever admit is denied without boxing the key: it is a bad request, not a flood.
    /// Refused unless `duration` is at least 1 ms and at most a limit's longest period.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::{Limit, Policy};
    /// // 5 logins a minute; who exceeds it waits 15 minutes.
    /// let login = Policy::new("login", [Limit::sliding_log(5, Duration::from_secs(60))?])?
    ///     .penalty(Duration::from_secs(900))?;
    /// assert_eq!(login.penalty_box(), Some(Duration::from_secs(900)));
    /// assert!(login.clone().penalty(Duration::ZERO).is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn penalty(mut self, duration: Duration) -> Result<Self, ConfigError> {
        if duration < Duration::from_millis(1) || duration.as_micros() > MAX_PENALTY_US {
            return Err(ConfigError::InvalidPenalty(crate::duration::format(
                duration,
            )));
        }
        self.penalty = Some(duration);
        Ok(self)
    }

    /// How long a denied key stays blocked ([`Policy::penalty`]); `None` without a penalty box.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{Limit, Policy};
    /// let p = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// assert_eq!(p.penalty_box(), None);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn penalty_box(&self) -> Option<Duration> {
        self.penalty
    }

    /// The penalty in whole microseconds, 0 without one.
    pub(crate) fn penalty_us(&self) -> u64 {
        self.penalty
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }

    /// `limits` under this policy's name and penalty box (an override of its rates).
    pub(crate) fn with_limits(&self, limits: Vec<Limit>) -> Result<Policy, ConfigError> {
        let mut policy = Policy::new(self.name_arc(), limits)?;
        policy.penalty = self.penalty;
        Ok(policy)
    }

    /// The longest period of all limits.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{Limit, Policy};
    /// let p = Policy::new("p", [
    ///     Limit::gcra(1, Duration::from_secs(1))?,
    ///     Limit::fixed_window(9, Duration::from_secs(60))?,
    /// ])?;
    /// assert_eq!(p.max_period(), Duration::from_secs(60));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn max_period(&self) -> Duration {
        self.limits
            .iter()
            .map(Limit::period)
            .max()
            .unwrap_or_default()
    }
}

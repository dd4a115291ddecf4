//! A named set of limits checked together: all must allow a request, and only then does any
//! of them consume.

use std::sync::Arc;
use std::time::Duration;

use crate::error::ConfigError;
use crate::limit::{Algorithm, Limit};

/// The most limits one policy may have; each is evaluated in the same script call.
pub const MAX_LIMITS: usize = 16;

/// A named policy: one or more [`Limit`]s, checked atomically.
///
/// A request is allowed only if every limit allows it, and only then does any limit consume.
/// A denied request consumes nothing, so a burst denied by a short limit does not use up a long
/// one (e.g. `auth.create_token`: 20 per minute *and* 5 per 3 seconds).
///
/// The name is part of every Redis key the policy writes, so two policies never share state.
///
/// ```
/// use std::time::Duration;
/// use redlimit::{Limit, Policy};
///
/// let policy = Policy::new("auth.create_token")
///     .limit(Limit::sliding_log(20, Duration::from_secs(60)))
///     .limit(Limit::sliding_log(5, Duration::from_secs(3)));
/// assert_eq!(policy.limits().len(), 2);
/// assert!(policy.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    name: Arc<str>,
    limits: Arc<[Limit]>,
}

impl Policy {
    /// A policy with no limits yet; add them with [`Policy::limit`].
    ///
    /// ```
    /// let p = redlimit::Policy::new("api");
    /// assert_eq!(p.name(), "api");
    /// ```
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Policy {
            name: name.into(),
            limits: Arc::new([]),
        }
    }

    /// Adds a limit.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{Limit, Policy};
    /// // GCRA 10/s plus a daily cap, checked together.
    /// let p = Policy::new("api")
    ///     .limit(Limit::gcra(10, Duration::from_secs(1)))
    ///     .limit(Limit::fixed_window(1000, Duration::from_secs(86_400)));
    /// ```
    #[must_use]
    pub fn limit(mut self, limit: Limit) -> Self {
        let mut limits = self.limits.to_vec();
        limits.push(limit);
        self.limits = limits.into();
        self
    }

    /// The name.
    ///
    /// ```
    /// assert_eq!(redlimit::Policy::new("login").name(), "login");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name, shared.
    pub(crate) fn name_arc(&self) -> Arc<str> {
        Arc::clone(&self.name)
    }

    /// The limits, in the order they were added; [`Decision`](crate::Decision) reports them
    /// in the same order.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{Limit, Policy};
    /// let p = Policy::new("p").limit(Limit::gcra(1, Duration::from_secs(1)));
    /// assert_eq!(p.limits()[0].count(), 1);
    /// ```
    pub fn limits(&self) -> &[Limit] {
        &self.limits
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
        self.limits
            .iter()
            .fold(Policy::new(self.name_arc()), |p, l| {
                p.limit(Limit::new(
                    l.algorithm(),
                    l.count().div_ceil(instances).max(1),
                    l.period(),
                ))
            })
    }

    /// The longest period of all limits.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{Limit, Policy};
    /// let p = Policy::new("p")
    ///     .limit(Limit::gcra(1, Duration::from_secs(1)))
    ///     .limit(Limit::fixed_window(9, Duration::from_secs(60)));
    /// assert_eq!(p.max_period(), Duration::from_secs(60));
    /// ```
    pub fn max_period(&self) -> Duration {
        self.limits
            .iter()
            .map(Limit::period)
            .max()
            .unwrap_or_default()
    }

    /// Checks the policy: a usable name, 1 to [`MAX_LIMITS`] limits, each valid.
    ///
    /// ```
    /// use redlimit::{ConfigError, Policy};
    /// assert!(matches!(Policy::new("empty").validate(), Err(ConfigError::NoLimits(_))));
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.name.is_empty()
            || self.name.len() > 64
            || !self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
        {
            return Err(ConfigError::InvalidPolicyName(self.name.to_string()));
        }
        if self.limits.is_empty() {
            return Err(ConfigError::NoLimits(self.name.to_string()));
        }
        if self.limits.len() > MAX_LIMITS {
            return Err(ConfigError::TooManyLimits(self.name.to_string()));
        }
        self.limits.iter().try_for_each(Limit::validate)
    }
}

//! One limit of a rule: the Go service's `rate_limit` (or one entry of our `rate_limits`),
//! with the redlimit [`Limit`] that enforces it.

use crate::calendar::Calendar;
use crate::{Algorithm, Limit, Policy};

use super::unit::Unit;

/// One limit of a descriptor rule: `requests_per_unit` per `unit_multiplier` × `unit`, enforced
/// by an [`Algorithm`] (by default the Go service's own: a fixed window aligned to the epoch).
///
/// ```
/// use redlimit::rls::config::{RlsConfig, Unit};
/// use redlimit::Algorithm;
///
/// let config = RlsConfig::parse([("c.yaml", "
/// domain: api
/// descriptors:
///   - key: user
///     rate_limit: {unit: minute, requests_per_unit: 100, unit_multiplier: 5, algorithm: gcra, name: per-user}
/// ")], false)?;
/// let rule = config.domain("api").unwrap().find(&[("user", "alice")]).unwrap();
/// let limit = &rule.limits()[0];
/// assert_eq!((limit.requests_per_unit(), limit.unit(), limit.unit_multiplier()), (100, Unit::Minute, 5));
/// assert_eq!(limit.algorithm(), Algorithm::Gcra);
/// assert_eq!(limit.name(), Some("per-user"));
/// assert_eq!(limit.limit().unwrap().period().as_secs(), 300);
/// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RlsLimit {
    limit: Option<Limit>,
    /// The RLS check's policy of this limit alone, made once: a request's counter of it is
    /// checked under a clone (three `Arc`s shared), not a policy made anew per call.
    policy: Option<Policy>,
    requests_per_unit: u32,
    unit: Unit,
    unit_multiplier: u32,
    name: Option<String>,
    algorithm: Algorithm,
    calendar: Option<Calendar>,
}

impl RlsLimit {
    /// Builds a limit; the error is why redlimit cannot enforce it (see [`Limit::new`]).
    pub(crate) fn new(
        requests_per_unit: u32,
        unit: Unit,
        unit_multiplier: u32,
        name: Option<String>,
        algorithm: Algorithm,
        calendar: Option<Calendar>,
    ) -> Result<Self, crate::ConfigError> {
        let limit = match (requests_per_unit, &calendar) {
            (0, _) => None,
            (n, Some(calendar)) => Some(Limit::calendar(u64::from(n), calendar.clone())?),
            (n, None) => {
                let period = unit.duration().saturating_mul(unit_multiplier);
                Some(Limit::new(algorithm, u64::from(n), period)?)
            }
        };
        let policy = limit.and_then(|l| Policy::new(crate::rls::run::POLICY, [l]).ok());
        Ok(RlsLimit {
            limit,
            policy,
            requests_per_unit,
            unit,
            unit_multiplier,
            name,
            algorithm,
            calendar,
        })
    }

    /// The redlimit limit: `requests_per_unit` per `unit_multiplier` units with the
    /// algorithm. `None` when `requests_per_unit` is 0: every request that hits this limit is
    /// over it (the Go service's way to ban a value), and no store needs asking.
    ///
    /// ```
    /// use redlimit::rls::config::RlsConfig;
    /// let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: banned, rate_limit: {unit: minute, requests_per_unit: 0}}\n")], false)?;
    /// let rule = c.domain("d").unwrap().find(&[("banned", "x")]).unwrap();
    /// assert!(rule.limits()[0].limit().is_none());
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn limit(&self) -> Option<&Limit> {
        self.limit.as_ref()
    }

    /// The policy a check of this limit alone is made under (`None` with no limit).
    pub(crate) fn policy(&self) -> Option<&Policy> {
        self.policy.as_ref()
    }

    /// `requests_per_unit` as written (what `current_limit.requests_per_unit` carries).
    ///
    /// ```
    /// # use redlimit::rls::config::RlsConfig;
    /// # let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 7}}\n")], false)?;
    /// assert_eq!(c.domain("d").unwrap().find(&[("k", "")]).unwrap().limits()[0].requests_per_unit(), 7);
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn requests_per_unit(&self) -> u32 {
        self.requests_per_unit
    }

    /// The unit (what `current_limit.unit` carries).
    ///
    /// ```
    /// # use redlimit::rls::config::{RlsConfig, Unit};
    /// # let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: WEEK, requests_per_unit: 7}}\n")], false)?;
    /// assert_eq!(c.domain("d").unwrap().find(&[("k", "")]).unwrap().limits()[0].unit(), Unit::Week);
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn unit(&self) -> Unit {
        self.unit
    }

    /// How many units make the period (our `unit_multiplier`, 1 unless given; the name of
    /// Envoy's pending `RateLimit.unit_multiplier`).
    ///
    /// ```
    /// # use redlimit::rls::config::RlsConfig;
    /// # let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 7}}\n")], false)?;
    /// assert_eq!(c.domain("d").unwrap().find(&[("k", "")]).unwrap().limits()[0].unit_multiplier(), 1);
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn unit_multiplier(&self) -> u32 {
        self.unit_multiplier
    }

    /// The limit's `name` (`current_limit.name`, and what `replaces` refers to), if any.
    ///
    /// ```
    /// # use redlimit::rls::config::RlsConfig;
    /// # let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 7}}\n")], false)?;
    /// assert_eq!(c.domain("d").unwrap().find(&[("k", "")]).unwrap().limits()[0].name(), None);
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The algorithm (our `algorithm`; [`Algorithm::FixedWindow`], the Go service's aligned
    /// window, unless given).
    ///
    /// ```
    /// # use redlimit::rls::config::RlsConfig;
    /// # let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 7}}\n")], false)?;
    /// let limit = &c.domain("d").unwrap().find(&[("k", "")]).unwrap().limits()[0];
    /// assert_eq!(limit.algorithm(), redlimit::Algorithm::FixedWindow);
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The calendar its windows follow (our `calendar: {time_zone, anchor}`), if any: then its
    /// `unit` is a calendar day, week, month or year in that zone from that anchor, not the Go
    /// service's epoch-aligned span (a month of 30 days), and its [`limit`](Self::limit) is a
    /// [`Limit::calendar`].
    ///
    /// ```
    /// # use redlimit::rls::config::RlsConfig;
    /// let c = RlsConfig::parse([("c.yaml", "
    /// domain: llm
    /// descriptors:
    ///   - key: api_key
    ///     rate_limit:
    ///       unit: month
    ///       requests_per_unit: 5000000
    ///       calendar: {time_zone: Europe/Berlin, anchor: \"15T00:00\"}
    /// ")], false)?;
    /// let limit = &c.domain("llm").unwrap().find(&[("api_key", "k")]).unwrap().limits()[0];
    /// assert_eq!(limit.calendar().unwrap().to_string(), "month (15T00:00 Europe/Berlin)");
    /// assert_eq!(limit.limit().unwrap().algorithm(), redlimit::Algorithm::Calendar);
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn calendar(&self) -> Option<&Calendar> {
        self.calendar.as_ref()
    }

    /// Whether the limit uses none of our extensions (what the Go service could read).
    pub(crate) fn is_plain(&self) -> bool {
        self.algorithm == Algorithm::FixedWindow
            && self.unit_multiplier == 1
            && self.calendar.is_none()
    }
}

/// An `algorithm` name: one of the rate algorithms' names (`fixed-window`, `sliding-window`,
/// `sliding-log`, `token-bucket`, `gcra`), in any case.
pub(crate) fn parse_algorithm(name: &str) -> Option<Algorithm> {
    let lower = name.to_ascii_lowercase();
    Algorithm::ALL.into_iter().find(|a| a.name() == lower)
}

//! What is allowed: one limit of `N` per period, and the algorithm that enforces it.

use std::fmt;
use std::time::Duration;

pub(crate) use crate::algorithm::Algorithm;
use crate::calendar::Calendar;
use crate::error::ConfigError;

/// The largest period a limit may have, so that every time value stays an exact integer in the
/// Lua scripts' doubles (2^53 µs is about 285 years; we stop well before).
const MAX_PERIOD_US: u64 = 1 << 45;

/// One limit: at most `count` (weighted by cost) per `period`, enforced by an [`Algorithm`].
///
/// `N/P` means, per algorithm: fixed window of `N` per `P` (windows aligned to the Unix epoch;
/// a calendar window's follow its [`Calendar`] instead, see [`Limit::calendar`]);
/// sliding window or log of `N` in any `P`; token bucket of capacity `N` refilled at `N` per
/// `P`; GCRA with burst `N` and rate `N` per `P`. Time is kept in whole microseconds; token
/// bucket and GCRA emit one unit every `ceil(P / N)` µs, so their long-run rate never exceeds
/// `N/P`.
///
/// A `Limit` is valid by construction: the constructors refuse a zero count, a period under
/// 1 ms or over about a thousand years, and token bucket / GCRA limits faster than one unit
/// per microsecond, with a [`ConfigError`].
///
/// ```
/// use std::time::Duration;
/// use redlimit::{Algorithm, Limit};
///
/// let limit = Limit::gcra(10, Duration::from_secs(1))?;
/// assert_eq!(limit.algorithm(), Algorithm::Gcra);
/// assert_eq!(limit.count(), 10);
/// assert_eq!(limit.to_string(), "gcra 10/1s");
/// assert!(Limit::gcra(0, Duration::from_secs(1)).is_err());
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limit {
    algorithm: Algorithm,
    count: u64,
    period: Duration,
    /// A calendar window's calendar (kept for the process's life: `calendar::intern`).
    calendar: Option<&'static Calendar>,
}

impl Limit {
    /// A limit of `count` per `period` with the given algorithm, or why it cannot be enforced
    /// exactly.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::{Algorithm, ConfigError, Limit};
    /// let l = Limit::new(Algorithm::FixedWindow, 100, Duration::from_secs(60))?;
    /// assert_eq!(l, Limit::fixed_window(100, Duration::from_secs(60))?);
    /// assert!(matches!(
    ///     Limit::new(Algorithm::Gcra, 5, Duration::from_micros(10)),
    ///     Err(ConfigError::InvalidLimit { .. })
    /// ));
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn new(algorithm: Algorithm, count: u64, period: Duration) -> Result<Self, ConfigError> {
        let limit = Limit {
            algorithm,
            count,
            period,
            calendar: None,
        };
        limit.check()?;
        Ok(limit)
    }

    /// `count` per window of `calendar`: a fixed window whose windows follow the calendar in
    /// its time zone (a day, week, month or year from its anchor), through daylight-saving
    /// changes and months of every length. The budget of a billing period: "5 million tokens
    /// a month per API key, the month starting on the 15th at 00:00 Europe/Berlin".
    ///
    /// Reset times, `Retry-After` and the RLS's `duration_until_reset` are the window's end
    /// exactly. Its [`algorithm`](Self::algorithm) is [`Algorithm::Calendar`]; its
    /// [`period`](Self::period) the longest one of its windows can be
    /// ([`Calendar::longest_window`]). Like a fixed window, it admits up to `2N` across a
    /// window's edge. Only fixed windows follow a calendar: a sliding window, log, token
    /// bucket or GCRA spreads its limit over any span of its period, which a calendar does
    /// not change.
    ///
    /// ```
    /// use redlimit::calendar::Calendar;
    /// use redlimit::{Algorithm, Limit};
    ///
    /// let month = Calendar::month().on_day(15).at(0, 0).in_zone("Europe/Berlin")?;
    /// let budget = Limit::calendar(5_000_000, month.clone())?;
    /// assert_eq!(budget.algorithm(), Algorithm::Calendar);
    /// assert_eq!(budget.aligned_to(), Some(&month));
    /// assert!(Limit::calendar(0, month).is_err());
    /// // A calendar limit is made from its calendar, never from a period.
    /// assert!(Limit::new(Algorithm::Calendar, 5, std::time::Duration::from_secs(60)).is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn calendar(count: u64, calendar: Calendar) -> Result<Self, ConfigError> {
        let limit = Limit {
            algorithm: Algorithm::Calendar,
            count,
            period: calendar.longest_window(),
            calendar: Some(crate::calendar::intern(calendar)),
        };
        limit.check()?;
        Ok(limit)
    }

    /// `count` per epoch-aligned window of `period`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let l = redlimit::Limit::fixed_window(1000, Duration::from_secs(86_400))?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn fixed_window(count: u64, period: Duration) -> Result<Self, ConfigError> {
        Limit::new(Algorithm::FixedWindow, count, period)
    }

    /// `count` in any `period`, approximated from two fixed-window counters.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let l = redlimit::Limit::sliding_window(100, Duration::from_secs(60))?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn sliding_window(count: u64, period: Duration) -> Result<Self, ConfigError> {
        Limit::new(Algorithm::SlidingWindow, count, period)
    }

    /// Exactly `count` in any `period`, from a log of admissions.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let l = redlimit::Limit::sliding_log(5, Duration::from_secs(3))?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn sliding_log(count: u64, period: Duration) -> Result<Self, ConfigError> {
        Limit::new(Algorithm::SlidingLog, count, period)
    }

    /// A bucket of `count` tokens refilled at `count` per `period`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// // Stripe's shape: a burst of 500, refilled at 100 per second.
    /// let l = redlimit::Limit::token_bucket(500, Duration::from_secs(5))?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn token_bucket(count: u64, period: Duration) -> Result<Self, ConfigError> {
        Limit::new(Algorithm::TokenBucket, count, period)
    }

    /// GCRA with burst `count` and rate `count` per `period`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let l = redlimit::Limit::gcra(10, Duration::from_secs(1))?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn gcra(count: u64, period: Duration) -> Result<Self, ConfigError> {
        Limit::new(Algorithm::Gcra, count, period)
    }

    /// At most `count` requests in flight per key, across every replica sharing the store. A
    /// request takes a slot (a lease) when it is admitted and gives it back when its response
    /// body ends or is dropped (a client that disconnects, a handler that panics); a lease
    /// that is never given back (its replica died mid-request) lapses after `lease_timeout`,
    /// so pick a timeout longer than any request may run. Each admitted request holds one
    /// slot, whatever its cost (a cost of 0 holds none).
    ///
    /// It sits in a policy beside rate limits and is checked atomically with them: a request
    /// denied by a rate takes no slot, one denied for want of a slot consumes no rate. A policy
    /// holds at most one concurrency limit.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::{Algorithm, Limit, Policy};
    ///
    /// // Ten uploads in flight per key, each reclaimed after five minutes at the latest,
    /// // and 100 requests a minute.
    /// let uploads = Limit::concurrency(10, Duration::from_secs(300))?;
    /// assert_eq!(uploads.algorithm(), Algorithm::Concurrency);
    /// assert_eq!(uploads.period(), Duration::from_secs(300));
    /// let policy = Policy::new("uploads", [uploads, Limit::gcra(100, Duration::from_secs(60))?])?;
    /// assert!(Limit::concurrency(0, Duration::from_secs(1)).is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn concurrency(count: u64, lease_timeout: Duration) -> Result<Self, ConfigError> {
        Limit::new(Algorithm::Concurrency, count, lease_timeout)
    }

    /// Parses a rate `N/DURATION` (`5/3s`, `1000/1h`, `10/100ms`; units ms, s, m, h, d) into a
    /// limit of the given algorithm.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::{Algorithm, Limit};
    /// let l = Limit::parse(Algorithm::SlidingLog, "5/3s")?;
    /// assert_eq!(l, Limit::sliding_log(5, Duration::from_secs(3))?);
    /// assert!(Limit::parse(Algorithm::Gcra, "5 per second").is_err());
    /// assert!(Limit::parse(Algorithm::Gcra, "0/1s").is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn parse(algorithm: Algorithm, rate: &str) -> Result<Self, ConfigError> {
        let (count, period) = rate
            .split_once('/')
            .ok_or_else(|| ConfigError::InvalidRate(rate.to_owned()))?;
        let count: u64 = count
            .parse()
            .map_err(|_| ConfigError::InvalidRate(rate.to_owned()))?;
        let period = crate::duration::parse(period)
            .map_err(|_| ConfigError::InvalidRate(rate.to_owned()))?;
        Limit::new(algorithm, count, period)
    }

    /// A rate written for this limit (an override's): `N/DURATION` read with its algorithm,
    /// or for a calendar window `N/UNIT` with its calendar's unit (`5000/month`), whose period
    /// is its own. The count and period, or why the text is not one.
    pub(crate) fn parse_rate_like(&self, rate: &str) -> Result<(u64, Duration), ConfigError> {
        let Some(calendar) = self.calendar else {
            return Limit::parse(self.algorithm, rate).map(|l| (l.count, l.period));
        };
        let count = rate
            .split_once('/')
            .filter(|(_, unit)| *unit == calendar.unit().name())
            .and_then(|(n, _)| n.parse::<u64>().ok())
            .ok_or_else(|| ConfigError::InvalidCalendar {
                calendar: rate.to_owned(),
                reason: format!("a rate of a calendar window is N/{}", calendar.unit()),
            })?;
        self.with_count(count).map(|l| (l.count, l.period))
    }

    /// The same limit with another count (an override's), its calendar kept, or why that
    /// count cannot be enforced.
    pub(crate) fn with_count(self, count: u64) -> Result<Limit, ConfigError> {
        let limit = Limit { count, ..self };
        limit.check()?;
        Ok(limit)
    }

    /// The same limit with another count, which must be between 1 and this count (so the
    /// result is as valid as this limit).
    pub(crate) fn with_smaller_count(self, count: u64) -> Limit {
        debug_assert!((1..=self.count).contains(&count));
        Limit {
            count: count.clamp(1, self.count),
            ..self
        }
    }

    /// The algorithm.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{Algorithm, Limit};
    /// assert_eq!(Limit::gcra(1, Duration::from_secs(1))?.algorithm(), Algorithm::Gcra);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub const fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// `N`: the most units admitted per period (the burst, for token bucket and GCRA).
    ///
    /// ```
    /// # use std::time::Duration;
    /// assert_eq!(redlimit::Limit::gcra(7, Duration::from_secs(1))?.count(), 7);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub const fn count(&self) -> u64 {
        self.count
    }

    /// `P`: the period (the lease timeout, for a concurrency limit).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let l = redlimit::Limit::gcra(7, Duration::from_secs(1))?;
    /// assert_eq!(l.period(), Duration::from_secs(1));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub const fn period(&self) -> Duration {
        self.period
    }

    /// The calendar a calendar window's windows are aligned to ([`Limit::calendar`]), `None`
    /// for any other limit.
    ///
    /// ```
    /// # use std::time::Duration;
    /// assert_eq!(redlimit::Limit::gcra(7, Duration::from_secs(1))?.aligned_to(), None);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn aligned_to(&self) -> Option<&Calendar> {
        self.calendar
    }

    /// The period in whole microseconds, as the algorithms see it.
    pub(crate) fn period_us(&self) -> u64 {
        u64::try_from(self.period.as_micros()).unwrap_or(u64::MAX)
    }

    /// What the in-process algorithms take as the period when asked about the time `at`
    /// (Unix µs): the period, but for a calendar window the end of its window that holds `at`
    /// (`algorithm/calendar_window.rs`). Outside the years the time zone database covers
    /// (which no clock reaches), the end of `at`'s epoch-aligned window of the longest period.
    pub(crate) fn period_arg(&self, at: u64) -> u64 {
        match self.calendar {
            None => self.period_us(),
            Some(calendar) => calendar.window(at).map_or_else(
                || crate::algorithm::window_end(at, self.period_us()),
                |w| w.end,
            ),
        }
    }

    /// Why the limit cannot be enforced exactly, if it cannot.
    fn check(&self) -> Result<(), ConfigError> {
        let invalid = |reason: &'static str| ConfigError::InvalidLimit {
            limit: self.to_string(),
            reason,
        };
        if self.count == 0 {
            return Err(invalid("the count must be at least 1"));
        }
        if (self.algorithm == Algorithm::Calendar) != self.calendar.is_some() {
            return Err(invalid(
                "a calendar window is made from its calendar, with Limit::calendar",
            ));
        }
        if self.period < Duration::from_millis(1) {
            return Err(invalid("the period must be at least 1 ms"));
        }
        if self.period_us() > MAX_PERIOD_US {
            return Err(invalid("the period is too long"));
        }
        if self.count > MAX_PERIOD_US {
            return Err(invalid("the count is too large"));
        }
        if matches!(self.algorithm, Algorithm::TokenBucket | Algorithm::Gcra)
            && self.count > self.period_us()
        {
            return Err(invalid(
                "token bucket and GCRA need at least 1 µs between units (count ≤ period in µs)",
            ));
        }
        Ok(())
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(calendar) = self.calendar {
            return write!(f, "{} {}/{calendar}", self.algorithm, self.count);
        }
        write!(
            f,
            "{} {}/{}",
            self.algorithm,
            self.count,
            crate::duration::format(self.period)
        )
    }
}

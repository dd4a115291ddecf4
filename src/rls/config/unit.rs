//! The time units of a limit: the names and numbers of Envoy's `RateLimitResponse.RateLimit.Unit`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A limit's unit, as envoyproxy/ratelimit reads it (any name of Envoy's `Unit` enum but
/// `UNKNOWN`, in any case) and as the response's `current_limit.unit` carries it.
///
/// Week, month and year are 7, 30 and 365 days, as the Go service counts them.
///
/// ```
/// use redlimit::rls::config::Unit;
/// let unit: Unit = "Minute".parse()?;
/// assert_eq!(unit, Unit::Minute);
/// assert_eq!(unit.seconds(), 60);
/// assert_eq!(Unit::Week.proto_number(), 7);
/// assert_eq!(Unit::Month.to_string(), "MONTH");
/// assert!("fortnight".parse::<Unit>().is_err());
/// # Ok::<(), redlimit::rls::config::UnknownUnit>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// One second.
    Second,
    /// 60 seconds.
    Minute,
    /// 3600 seconds.
    Hour,
    /// 86 400 seconds.
    Day,
    /// 7 days.
    Week,
    /// 30 days.
    Month,
    /// 365 days.
    Year,
}

impl Unit {
    /// Every unit, shortest first.
    ///
    /// ```
    /// assert_eq!(redlimit::rls::config::Unit::ALL.len(), 7);
    /// ```
    pub const ALL: [Unit; 7] = [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Week,
        Unit::Month,
        Unit::Year,
    ];

    /// The unit's length in seconds (the Go service's `UnitToDivider`).
    ///
    /// ```
    /// assert_eq!(redlimit::rls::config::Unit::Year.seconds(), 365 * 86_400);
    /// ```
    pub const fn seconds(self) -> u64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3600,
            Unit::Day => 86_400,
            Unit::Week => 7 * 86_400,
            Unit::Month => 30 * 86_400,
            Unit::Year => 365 * 86_400,
        }
    }

    /// The unit's length.
    ///
    /// ```
    /// # use std::time::Duration;
    /// assert_eq!(redlimit::rls::config::Unit::Hour.duration(), Duration::from_secs(3600));
    /// ```
    pub const fn duration(self) -> Duration {
        Duration::from_secs(self.seconds())
    }

    /// The number of the unit in Envoy's `RateLimitResponse.RateLimit.Unit` (SECOND = 1,
    /// MINUTE = 2, HOUR = 3, DAY = 4, MONTH = 5, YEAR = 6, WEEK = 7).
    ///
    /// ```
    /// assert_eq!(redlimit::rls::config::Unit::Day.proto_number(), 4);
    /// ```
    pub const fn proto_number(self) -> i32 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 2,
            Unit::Hour => 3,
            Unit::Day => 4,
            Unit::Month => 5,
            Unit::Year => 6,
            Unit::Week => 7,
        }
    }

    /// The unit for a number of Envoy's enum (`None` for `UNKNOWN` = 0 and numbers it does not
    /// have).
    ///
    /// ```
    /// use redlimit::rls::config::Unit;
    /// assert_eq!(Unit::from_proto_number(7), Some(Unit::Week));
    /// assert_eq!(Unit::from_proto_number(0), None);
    /// ```
    pub fn from_proto_number(number: i32) -> Option<Unit> {
        Unit::ALL.into_iter().find(|u| u.proto_number() == number)
    }

    /// The enum's name, as the Go service prints it (`SECOND`, ...).
    ///
    /// ```
    /// assert_eq!(redlimit::rls::config::Unit::Second.name(), "SECOND");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Unit::Second => "SECOND",
            Unit::Minute => "MINUTE",
            Unit::Hour => "HOUR",
            Unit::Day => "DAY",
            Unit::Week => "WEEK",
            Unit::Month => "MONTH",
            Unit::Year => "YEAR",
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A unit name that is none of Envoy's.
///
/// ```
/// let err = "ms".parse::<redlimit::rls::config::Unit>().unwrap_err();
/// assert_eq!(err.to_string(), "invalid rate limit unit 'ms'");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid rate limit unit '{0}'")]
pub struct UnknownUnit(pub String);

impl FromStr for Unit {
    type Err = UnknownUnit;

    /// Case-insensitive, by Unicode upper case as Go's `strings.ToUpper`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let upper = s.to_uppercase();
        Unit::ALL
            .into_iter()
            .find(|u| u.name() == upper)
            .ok_or_else(|| UnknownUnit(s.to_owned()))
    }
}

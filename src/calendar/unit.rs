//! A calendar's unit and a week's anchor day.

use std::fmt;
use std::time::Duration;

use crate::error::ConfigError;

/// How long each window of a [`Calendar`](super::Calendar) is, in local time.
///
/// ```
/// use redlimit::calendar::Unit;
/// assert_eq!("month".parse::<Unit>()?, Unit::Month);
/// assert_eq!(Unit::Week.to_string(), "week");
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// A day, from the anchor's time to the same time the next day.
    Day,
    /// A week, from the anchor's weekday and time.
    Week,
    /// A month, from the anchor's day of the month and time.
    Month,
    /// A year, from the anchor's month, day and time.
    Year,
}

impl Unit {
    /// The unit's name: `day`, `week`, `month`, `year`.
    ///
    /// ```
    /// assert_eq!(redlimit::calendar::Unit::Year.name(), "year");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
            Unit::Year => "year",
        }
    }

    /// A bound on a window of this unit: its most days, plus three hours for a clock change
    /// within it (zones change their offset by two hours at most today; Antarctica/Troll).
    pub(super) fn longest(self) -> Duration {
        let days = match self {
            Unit::Day => 1,
            Unit::Week => 7,
            Unit::Month => 31,
            Unit::Year => 366,
        };
        Duration::from_secs(days * 86_400 + 3 * 3_600)
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Unit {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Unit::Day, Unit::Week, Unit::Month, Unit::Year]
            .into_iter()
            .find(|u| u.name() == s)
            .ok_or_else(|| ConfigError::InvalidCalendar {
                calendar: s.to_owned(),
                reason: "the unit is one of day, week, month, year".to_owned(),
            })
    }
}

/// A day of the week, the anchor of a weekly [`Calendar`](super::Calendar).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Weekday {
    Monday,
    Tuesday,
    Wednesday,
    Thursday,
    Friday,
    Saturday,
    Sunday,
}

impl Weekday {
    /// Days after Monday (Monday is 0).
    pub(super) fn days_after_monday(self) -> i64 {
        self as i64
    }
}

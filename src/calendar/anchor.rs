//! A calendar's anchor as text (`15T00:00`), and its checks against the unit.

use super::{Anchor, Unit, Weekday};

const WEEKDAYS: [(Weekday, &str, &str); 7] = [
    (Weekday::Monday, "mon", "monday"),
    (Weekday::Tuesday, "tue", "tuesday"),
    (Weekday::Wednesday, "wed", "wednesday"),
    (Weekday::Thursday, "thu", "thursday"),
    (Weekday::Friday, "fri", "friday"),
    (Weekday::Saturday, "sat", "saturday"),
    (Weekday::Sunday, "sun", "sunday"),
];

/// What a unit's anchor reads, for error messages.
fn expected(unit: Unit) -> &'static str {
    match unit {
        Unit::Day => "a day's anchor is HH:MM (`06:00`)",
        Unit::Week => "a week's anchor is WEEKDAY or WEEKDAYTHH:MM (`mon`, `friT18:00`)",
        Unit::Month => "a month's anchor is D or DTHH:MM, D from 1 to 31 (`15`, `15T00:00`)",
        Unit::Year => "a year's anchor is MM-DD or MM-DDTHH:MM (`04-01`, `04-01T00:00`)",
    }
}

/// Reads `text` as an anchor of `unit` (the time 00:00 when it has none); checked.
pub(super) fn parse(unit: Unit, text: &str) -> Result<Anchor, String> {
    let bad = || format!("{}, not `{text}`", expected(unit));
    let mut anchor = super::CalendarBuilder::new(unit).anchor;
    let (date, time) = match unit {
        Unit::Day => ("", Some(text)),
        _ => match text.split_once(['T', 't']) {
            Some((date, time)) => (date, Some(time)),
            None => (text, None),
        },
    };
    if let Some(time) = time {
        let (h, m) = time.split_once(':').ok_or_else(bad)?;
        anchor.hour = two_digits(h).ok_or_else(bad)?;
        anchor.minute = two_digits(m).ok_or_else(bad)?;
    }
    match unit {
        Unit::Day => {}
        Unit::Week => {
            let lower = date.to_ascii_lowercase();
            anchor.weekday = WEEKDAYS
                .iter()
                .find(|(_, short, long)| lower == *short || lower == *long)
                .map(|(w, _, _)| *w)
                .ok_or_else(bad)?;
        }
        Unit::Month => anchor.day = digits(date, 2).ok_or_else(bad)?,
        Unit::Year => {
            let (m, d) = date.split_once('-').ok_or_else(bad)?;
            anchor.month = two_digits(m).ok_or_else(bad)?;
            anchor.day = two_digits(d).ok_or_else(bad)?;
        }
    }
    check(unit, &anchor)?;
    Ok(anchor)
}

/// One or two ASCII digits.
fn digits(text: &str, most: usize) -> Option<i8> {
    if text.is_empty() || text.len() > most || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Exactly two ASCII digits.
fn two_digits(text: &str) -> Option<i8> {
    (text.len() == 2).then(|| digits(text, 2)).flatten()
}

/// Whether `anchor` fits `unit`: a time of day, a day that some month has.
pub(super) fn check(unit: Unit, anchor: &Anchor) -> Result<(), String> {
    if !(0..=23).contains(&anchor.hour) || !(0..=59).contains(&anchor.minute) {
        return Err("the time is HH:MM from 00:00 to 23:59".to_owned());
    }
    match unit {
        Unit::Month if !(1..=31).contains(&anchor.day) => {
            Err("a month's day is 1 to 31 (past a month's end: its last day)".to_owned())
        }
        Unit::Year if !(1..=12).contains(&anchor.month) => {
            Err("a year's month is 1 to 12".to_owned())
        }
        Unit::Year if !(1..=days_in_month(2000, anchor.month)).contains(&anchor.day) => {
            Err(format!(
                "month {} has no day {} (February 29 is February 28 in common years)",
                anchor.month, anchor.day
            ))
        }
        _ => Ok(()),
    }
}

/// The anchor as [`parse`] reads it.
pub(super) fn format(unit: Unit, anchor: &Anchor) -> String {
    let time = format!("{:02}:{:02}", anchor.hour, anchor.minute);
    match unit {
        Unit::Day => time,
        Unit::Week => {
            let name = WEEKDAYS[anchor.weekday as usize].1;
            format!("{name}T{time}")
        }
        Unit::Month => format!("{}T{time}", anchor.day),
        Unit::Year => format!("{:02}-{:02}T{time}", anchor.month, anchor.day),
    }
}

/// The days of `month` (1 to 12) in `year` (proleptic Gregorian).
pub(super) fn days_in_month(year: i64, month: i8) -> i8 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

use super::*;

/// Unix µs of an RFC 3339 instant.
fn us(text: &str) -> u64 {
    let t: jiff::Timestamp = text.parse().unwrap();
    u64::try_from(t.as_microsecond()).unwrap()
}

const HOUR: u64 = 3_600_000_000;

fn span(calendar: &Calendar, at: &str) -> (u64, u64) {
    let w = calendar.window(us(at)).unwrap();
    (w.start, w.end)
}

#[test]
fn civil_days_round_trip() {
    for z in [-800_000, -1, 0, 1, 59, 60, 11_016, 19_782, 2_932_896] {
        let (y, m, d) = bounds::civil_from_days(z);
        assert_eq!(bounds::days_from_civil(y, m, d), z, "{y}-{m}-{d}");
    }
    assert_eq!(bounds::civil_from_days(0), (1970, 1, 1));
    assert_eq!(bounds::days_from_civil(2024, 2, 29), 19_782);
}

#[test]
fn a_month_anchored_on_the_31st_ends_on_short_months_last_day() {
    let c = Calendar::month().on_day(31).utc().unwrap();
    // Jan 31 → Feb 29 (2024, leap) → Mar 31 → Apr 30 → May 31.
    assert_eq!(
        span(&c, "2024-02-10T12:00:00Z"),
        (us("2024-01-31T00:00:00Z"), us("2024-02-29T00:00:00Z"))
    );
    assert_eq!(
        span(&c, "2024-02-29T00:00:00Z"),
        (us("2024-02-29T00:00:00Z"), us("2024-03-31T00:00:00Z"))
    );
    assert_eq!(
        span(&c, "2024-04-30T00:00:00Z"),
        (us("2024-04-30T00:00:00Z"), us("2024-05-31T00:00:00Z"))
    );
    // 2023: Feb 28.
    assert_eq!(
        span(&c, "2023-02-27T23:59:59.999999Z"),
        (us("2023-01-31T00:00:00Z"), us("2023-02-28T00:00:00Z"))
    );
}

#[test]
fn calendar_months_end_at_the_last_instant_of_the_month() {
    let c = Calendar::month().utc().unwrap();
    let (start, end) = span(&c, "2024-01-31T23:59:59.999999Z");
    assert_eq!(
        (start, end),
        (us("2024-01-01T00:00:00Z"), us("2024-02-01T00:00:00Z"))
    );
    assert_eq!(
        span(&c, "2024-02-01T00:00:00Z").0,
        end,
        "the next month starts at its end"
    );
    assert_eq!(
        span(&c, "2023-12-31T23:00:00Z"),
        (us("2023-12-01T00:00:00Z"), us("2024-01-01T00:00:00Z")),
        "December into January"
    );
}

#[test]
fn a_billing_month_in_berlin_follows_local_midnight() {
    let c = Calendar::parse(Unit::Month, Some("15T00:00"), "Europe/Berlin").unwrap();
    // March 15 (CET, +01) to April 15 (CEST, +02): 31 days less the hour DST took.
    let (start, end) = span(&c, "2024-03-31T12:00:00Z");
    assert_eq!(start, us("2024-03-14T23:00:00Z"));
    assert_eq!(end, us("2024-04-14T22:00:00Z"));
    assert_eq!(end - start, 31 * 24 * HOUR - HOUR);
    // 23:30 UTC on the 14th is already the 15th in Berlin.
    assert_eq!(
        span(&c, "2024-01-14T23:30:00Z").0,
        us("2024-01-14T23:00:00Z")
    );
    assert_eq!(
        span(&c, "2024-01-14T22:59:59Z").1,
        us("2024-01-14T23:00:00Z")
    );
}

#[test]
fn days_are_23_and_25_hours_long_when_clocks_change() {
    for (zone, spring, fall) in [
        (
            "Europe/Berlin",
            "2024-03-31T12:00:00Z",
            "2024-10-27T12:00:00Z",
        ),
        (
            "America/New_York",
            "2024-03-10T12:00:00Z",
            "2024-11-03T12:00:00Z",
        ),
    ] {
        let c = Calendar::day().in_zone(zone).unwrap();
        let (s, e) = span(&c, spring);
        assert_eq!(e - s, 23 * HOUR, "{zone} spring forward");
        let (s, e) = span(&c, fall);
        assert_eq!(e - s, 25 * HOUR, "{zone} fall back");
        let (s, e) = span(&c, "2024-06-01T12:00:00Z");
        assert_eq!(e - s, 24 * HOUR, "{zone} summer");
    }
    let berlin = Calendar::day().in_zone("Europe/Berlin").unwrap();
    assert_eq!(
        span(&berlin, "2024-10-27T12:00:00Z"),
        (us("2024-10-26T22:00:00Z"), us("2024-10-27T23:00:00Z"))
    );
    let new_york = Calendar::day().in_zone("America/New_York").unwrap();
    assert_eq!(
        span(&new_york, "2024-03-10T12:00:00Z"),
        (us("2024-03-10T05:00:00Z"), us("2024-03-11T04:00:00Z"))
    );
}

#[test]
fn an_anchor_the_clocks_skip_starts_after_the_gap_and_a_repeated_one_the_first_time() {
    // 02:30 does not exist in New York on 2024-03-10: the window starts at 03:30 EDT.
    let c = Calendar::day()
        .at(2, 30)
        .in_zone("America/New_York")
        .unwrap();
    let (start, end) = span(&c, "2024-03-10T12:00:00Z");
    assert_eq!(start, us("2024-03-10T07:30:00Z"));
    assert_eq!(end, us("2024-03-11T06:30:00Z"));
    // 01:30 occurs twice on 2024-11-03: the first (EDT, -04).
    let c = Calendar::day()
        .at(1, 30)
        .in_zone("America/New_York")
        .unwrap();
    assert_eq!(
        span(&c, "2024-11-03T12:00:00Z").0,
        us("2024-11-03T05:30:00Z")
    );
}

#[test]
fn weeks_start_on_their_weekday() {
    let c = Calendar::week()
        .on(Weekday::Monday)
        .in_zone("Europe/Berlin")
        .unwrap();
    // 2024-03-27 is a Wednesday; the week of the DST change is 167 hours.
    let (s, e) = span(&c, "2024-03-27T12:00:00Z");
    assert_eq!(
        (s, e),
        (us("2024-03-24T23:00:00Z"), us("2024-03-31T22:00:00Z"))
    );
    let c = Calendar::parse(Unit::Week, Some("sunT18:00"), "UTC").unwrap();
    assert_eq!(
        span(&c, "2024-03-27T12:00:00Z"),
        (us("2024-03-24T18:00:00Z"), us("2024-03-31T18:00:00Z"))
    );
    assert_eq!(
        span(&c, "2024-03-31T18:00:00Z").0,
        us("2024-03-31T18:00:00Z")
    );
}

#[test]
fn a_year_anchored_on_february_29_starts_on_the_28th_in_common_years() {
    let c = Calendar::parse(Unit::Year, Some("02-29"), "UTC").unwrap();
    assert_eq!(
        span(&c, "2024-12-01T00:00:00Z"),
        (us("2024-02-29T00:00:00Z"), us("2025-02-28T00:00:00Z"))
    );
}

#[test]
fn a_zone_that_skipped_a_day_has_no_empty_window() {
    // Samoa skipped 2011-12-30 (local): the 29th ends where the 31st starts.
    let c = Calendar::day().in_zone("Pacific/Apia").unwrap();
    let (s, e) = span(&c, "2011-12-30T09:00:00Z");
    assert!(s < e);
    assert!((s..e).contains(&us("2011-12-30T09:00:00Z")));
    let around = c.bounds_around(us("2011-12-30T09:00:00Z")).unwrap();
    assert!(around.windows(2).all(|w| w[0] <= w[1]), "{around:?}");
}

#[test]
fn bounds_around_hold_the_neighbouring_windows() {
    let c = Calendar::month().utc().unwrap();
    assert_eq!(
        c.bounds_around(us("2024-02-29T23:59:00Z")).unwrap(),
        [
            us("2024-01-01T00:00:00Z"),
            us("2024-02-01T00:00:00Z"),
            us("2024-03-01T00:00:00Z"),
            us("2024-04-01T00:00:00Z")
        ]
    );
    // From the cache, the same.
    assert_eq!(
        c.bounds_around(us("2024-02-15T00:00:00Z")).unwrap()[1],
        us("2024-02-01T00:00:00Z")
    );
}

#[test]
fn anchors_read_and_write_back() {
    for (unit, text) in [
        (Unit::Day, "06:00"),
        (Unit::Week, "friT18:30"),
        (Unit::Month, "15T00:00"),
        (Unit::Month, "31T23:59"),
        (Unit::Year, "04-01T09:30"),
    ] {
        assert_eq!(
            Calendar::parse(unit, Some(text), "UTC").unwrap().anchor(),
            text
        );
    }
    let defaults = [
        (Unit::Day, "00:00"),
        (Unit::Week, "monT00:00"),
        (Unit::Month, "1T00:00"),
        (Unit::Year, "01-01T00:00"),
    ];
    for (unit, text) in defaults {
        assert_eq!(Calendar::parse(unit, None, "UTC").unwrap().anchor(), text);
    }
    assert_eq!(
        Calendar::parse(Unit::Month, Some("15"), "UTC")
            .unwrap()
            .anchor(),
        "15T00:00"
    );
    assert_eq!(
        Calendar::parse(Unit::Week, Some("Sunday"), "UTC")
            .unwrap()
            .anchor(),
        "sunT00:00"
    );
    for (unit, bad) in [
        (Unit::Day, "6:00"),
        (Unit::Day, "24:00"),
        (Unit::Day, "12:60"),
        (Unit::Week, "15"),
        (Unit::Month, "0"),
        (Unit::Month, "32"),
        (Unit::Month, "-1"),
        (Unit::Month, "15T"),
        (Unit::Year, "02-30"),
        (Unit::Year, "13-01"),
        (Unit::Year, "4-1"),
    ] {
        let err = Calendar::parse(unit, Some(bad), "UTC").unwrap_err();
        assert!(
            matches!(err, ConfigError::InvalidCalendar { .. }),
            "{bad}: {err}"
        );
    }
    let err = Calendar::parse(Unit::Day, None, "Mars/Olympus").unwrap_err();
    assert!(err.to_string().contains("not a time zone"), "{err}");
}

#[test]
fn equal_calendars_are_kept_once() {
    let a = intern(
        Calendar::month()
            .on_day(15)
            .in_zone("Europe/Berlin")
            .unwrap(),
    );
    let b = intern(Calendar::parse(Unit::Month, Some("15T00:00"), "Europe/Berlin").unwrap());
    assert!(std::ptr::eq(a, b));
    let c = intern(
        Calendar::month()
            .on_day(16)
            .in_zone("Europe/Berlin")
            .unwrap(),
    );
    assert!(!std::ptr::eq(a, c));
}

//! Calendar windows (`Limit::calendar`) on a real Redis and in memory, with the time driven
//! (the scripts' test-only time, a `ManualClock`): reset, retry and the headers are the
//! window's end exactly at a month's end and across daylight-saving changes, both stores
//! answering alike at every step; charges and refunds land in the right window; Redis `TIME`
//! picks among the windows the client computed, and refuses when none holds it.

use crate::support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redlimit::calendar::Calendar;
use redlimit::layer::HeaderStyle;
use redlimit::store::{ManualClock, MemoryStore, RedisStore, Refund};
use redlimit::{Decision, Key, Limit, Policy, StoreError};
use support::{RedisServer, unique_prefix};

const S: u64 = 1_000_000;
const H: u64 = 3_600 * S;

/// Unix µs of an RFC 3339 instant.
fn us(text: &str) -> u64 {
    let t: jiff::Timestamp = text.parse().unwrap();
    u64::try_from(t.as_microsecond()).unwrap()
}

fn policy(name: &str, count: u64, calendar: Calendar) -> Policy {
    Policy::new(name, [Limit::calendar(count, calendar).unwrap()]).unwrap()
}

/// A Redis store and a memory store on a manual clock, asked the same at the same times.
struct Both {
    redis: RedisStore,
    memory: MemoryStore,
    clock: ManualClock,
}

impl Both {
    async fn new(server: &RedisServer) -> Both {
        let redis = RedisStore::builder(server.url())
            .prefix(unique_prefix("calendar"))
            .connect()
            .await
            .unwrap();
        let clock = ManualClock::new(0);
        Both {
            redis,
            memory: MemoryStore::with_clock(clock.clone()),
            clock,
        }
    }

    async fn check(&self, policy: &Policy, key: &Key, cost: u64, now: u64) -> Decision {
        self.clock.set(now);
        let from_redis = redlimit::__private::check_at(&self.redis, policy, key, cost, now)
            .await
            .unwrap();
        let from_memory = self.memory.check_now(policy, key, cost);
        assert_eq!(from_redis, from_memory, "check {cost} at {now}");
        from_redis
    }

    async fn charge(&self, policy: &Policy, key: &Key, cost: u64, now: u64) -> Decision {
        self.clock.set(now);
        let from_redis = redlimit::__private::charge_at(&self.redis, policy, key, cost, now)
            .await
            .unwrap();
        assert_eq!(
            from_redis,
            self.memory.charge_now(policy, key, cost),
            "charge at {now}"
        );
        from_redis
    }
}

fn retry(d: &Decision) -> u64 {
    d.retry_after().unwrap().as_micros() as u64
}

fn reset(d: &Decision) -> u64 {
    d.limits()[0].reset_after().as_micros() as u64
}

#[tokio::test]
async fn a_month_ends_at_local_midnight_and_retry_says_so_to_the_microsecond() {
    let server = RedisServer::start();
    let both = Both::new(&server).await;
    let month = Calendar::month().in_zone("Europe/Berlin").unwrap();
    let p = policy("month", 3, month);
    let key = Key::new("api-key-1");
    // January in Berlin ends at 2024-01-31T23:00Z (midnight CET).
    let end = us("2024-01-31T23:00:00Z");
    let first = both.check(&p, &key, 2, us("2024-01-31T22:59:58.5Z")).await;
    assert!(first.is_allowed());
    assert_eq!(reset(&first), 1_500_000);
    assert_eq!(first.remaining(), Some(1));
    assert!(both.check(&p, &key, 1, end - 2 * S).await.is_allowed());
    let denied = both.check(&p, &key, 1, end - S + 1).await;
    assert!(!denied.is_allowed());
    assert_eq!(retry(&denied), S - 1, "until the month's end exactly");
    assert_eq!(
        denied.reset_at().unwrap(),
        UNIX_EPOCH + Duration::from_micros(end)
    );
    let headers = redlimit::__private::render_headers(&denied, HeaderStyle::Both);
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(headers["x-ratelimit-reset"], (end / S).to_string());
    assert_eq!(
        headers["ratelimit-policy"], "\"month\";q=3",
        "no one window length"
    );
    // One microsecond before the end: still January; at the end: February, afresh.
    assert!(!both.check(&p, &key, 1, end - 1).await.is_allowed());
    let february = both.check(&p, &key, 3, end).await;
    assert!(february.is_allowed());
    // February 2024 has 29 days (leap year); it ends at 2024-02-29T23:00Z.
    assert_eq!(reset(&february), us("2024-02-29T23:00:00Z") - end);
}

#[tokio::test]
async fn a_billing_month_anchored_on_the_31st_resets_on_the_last_day_of_short_months() {
    let server = RedisServer::start();
    let both = Both::new(&server).await;
    let billing = Calendar::month().on_day(31).at(0, 0).utc().unwrap();
    let p = policy("billing31", 10, billing);
    let key = Key::new("tenant");
    let denied_at = us("2023-02-27T12:00:00Z");
    assert!(
        both.check(&p, &key, 10, us("2023-02-01T00:00:00Z"))
            .await
            .is_allowed()
    );
    let denied = both.check(&p, &key, 1, denied_at).await;
    // 2023 is a common year: the window ends on February 28.
    assert_eq!(retry(&denied), us("2023-02-28T00:00:00Z") - denied_at);
    let march = both.check(&p, &key, 1, us("2023-02-28T00:00:00Z")).await;
    assert!(march.is_allowed());
    assert_eq!(reset(&march), 31 * 24 * H, "February 28 to March 31");
}

#[tokio::test]
async fn days_of_23_and_25_hours_across_daylight_saving_changes() {
    let server = RedisServer::start();
    let both = Both::new(&server).await;
    for (zone, spring, spring_end, fall, fall_end) in [
        (
            "Europe/Berlin",
            // 2024-03-31 in Berlin: 00:00 CET (23:00Z the day before) to 00:00 CEST (22:00Z).
            "2024-03-30T23:00:00Z",
            "2024-03-31T22:00:00Z",
            "2024-10-26T22:00:00Z",
            "2024-10-27T23:00:00Z",
        ),
        (
            "America/New_York",
            "2024-03-10T05:00:00Z",
            "2024-03-11T04:00:00Z",
            "2024-11-03T04:00:00Z",
            "2024-11-04T05:00:00Z",
        ),
    ] {
        let p = policy(
            &format!("day-{}", zone.replace('/', "-")),
            1,
            Calendar::day().in_zone(zone).unwrap(),
        );
        let key = Key::new("k");
        let start = us(spring);
        let took = both.check(&p, &key, 1, start).await;
        assert_eq!(reset(&took), 23 * H, "{zone}: a 23-hour day");
        let denied = both.check(&p, &key, 1, start + 3 * H).await;
        assert_eq!(retry(&denied), us(spring_end) - start - 3 * H, "{zone}");
        assert_eq!(
            redlimit::__private::render_headers(&denied, HeaderStyle::XRateLimit)["retry-after"],
            (20 * 3600).to_string()
        );
        assert!(both.check(&p, &key, 1, us(spring_end)).await.is_allowed());

        let start = us(fall);
        let took = both.check(&p, &key, 1, start).await;
        assert_eq!(reset(&took), 25 * H, "{zone}: a 25-hour day");
        let denied = both.check(&p, &key, 1, us(fall_end) - 1).await;
        assert_eq!(retry(&denied), 1);
        assert!(both.check(&p, &key, 1, us(fall_end)).await.is_allowed());
    }
}

#[tokio::test]
async fn a_charge_lands_past_the_budget_in_the_current_window_and_a_refund_in_its_own() {
    let server = RedisServer::start();
    let both = Both::new(&server).await;
    let month = Calendar::month()
        .on_day(15)
        .in_zone("Europe/Berlin")
        .unwrap();
    let p = policy("tokens", 1_000, month);
    let key = Key::new("api-key-2");
    let now = us("2024-04-14T21:00:00Z");
    // A response that used 1500 tokens: 500 owed until the window ends (the 15th, 00:00
    // CEST = 2024-04-14T22:00Z), then forgotten.
    let charged = both.charge(&p, &key, 1_500, now).await;
    assert!(!charged.is_allowed());
    assert_eq!(charged.remaining(), Some(0));
    assert_eq!(retry(&charged), H);
    let next = both.check(&p, &key, 1, now + H).await;
    assert!(next.is_allowed());
    assert_eq!(next.remaining(), Some(999));

    // A refund gives back to the window its admission was counted in, never to the next.
    let admitted = both.check(&p, &key, 100, now + 2 * H).await;
    let refund = || Refund::of(&admitted, 100).unwrap();
    both.clock.set(now + 3 * H);
    let in_redis =
        redlimit::__private::refund_at(&both.redis, &p, &key, refund(), now + 3 * H).await;
    assert!(in_redis.unwrap());
    assert!(both.memory.refund_now(&p, &key, refund()));
    let after = both.check(&p, &key, 0, now + 3 * H).await;
    assert_eq!(after.remaining(), Some(999));
    let late = both.check(&p, &key, 5, us("2024-05-14T22:00:00Z")).await;
    assert!(late.is_allowed());
    let late_refund = Refund::of(&late, 5).unwrap();
    // Refunded after its window ended (June 15, 00:00 CEST): nothing, in either store.
    let at = us("2024-06-14T22:00:00Z");
    both.clock.set(at);
    let again = Refund::of(&late, 5).unwrap();
    assert!(
        !redlimit::__private::refund_at(&both.redis, &p, &key, late_refund, at)
            .await
            .unwrap()
    );
    assert!(!both.memory.refund_now(&p, &key, again));
}

#[tokio::test]
async fn with_redis_time_the_script_picks_the_window_from_the_client_s_boundaries() {
    use redlimit::store::Store;
    let server = RedisServer::start();
    let redis = RedisStore::builder(server.url())
        .prefix(unique_prefix("calendar-time"))
        .connect()
        .await
        .unwrap();
    let day = Calendar::day().in_zone("America/New_York").unwrap();
    let p = policy("today", 2, day.clone());
    let key = Key::new("k");
    let first = redis.check(&p, &key, 1).await.unwrap();
    assert!(first.is_allowed());
    // The window's end, from the client's calendar at Redis's time: the reset lands on it.
    let redis_now = first.evaluated_at().duration_since(UNIX_EPOCH).unwrap();
    let client_now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    assert!(client_now.abs_diff(redis_now) < Duration::from_secs(60));
    let end_of_day = {
        let at = jiff::Timestamp::from_microsecond(redis_now.as_micros() as i64).unwrap();
        let zoned = at.to_zoned(jiff::tz::TimeZone::get("America/New_York").unwrap());
        let tomorrow = zoned
            .date()
            .tomorrow()
            .unwrap()
            .to_zoned(zoned.time_zone().clone())
            .unwrap();
        Duration::from_micros(tomorrow.timestamp().as_microsecond() as u64)
    };
    assert_eq!(first.reset_at().unwrap(), UNIX_EPOCH + end_of_day);
    assert!(redis.check(&p, &key, 1).await.unwrap().is_allowed());
    let denied = redis.check(&p, &key, 1).await.unwrap();
    assert!(!denied.is_allowed());
    assert_eq!(denied.reset_at().unwrap(), UNIX_EPOCH + end_of_day);
}

#[tokio::test]
async fn redis_refuses_boundaries_that_do_not_hold_its_time() {
    let server = RedisServer::start();
    let day = Calendar::day().utc().unwrap();
    let p = policy("skew", 5, day);
    let source = RedisStore::script_source_for(&p);
    let client = redis::Client::open(server.url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let eval = |bounds: String| {
        let mut command = redis::cmd("EVAL");
        // One key; a test time of 2024-06-01T12:00Z; cost 1; count 5 and the boundaries.
        command
            .arg(source)
            .arg(1)
            .arg("skew-key")
            .arg(us("2024-06-01T12:00:00Z"))
            .arg(1)
            .arg(5)
            .arg(bounds);
        command
    };
    let days = |first: &str| {
        let b = us(first);
        format!("{} {} {} {}", b, b + 24 * H, b + 48 * H, b + 72 * H)
    };
    // Boundaries from a clock a day behind: Redis's day is their last window.
    let ok: Vec<i64> = eval(days("2024-05-30T00:00:00Z"))
        .query_async(&mut connection)
        .await
        .unwrap();
    // An admission's short reply (`lua/prelude.lua`): the time, then 4 left and the reset at
    // the end of Redis's day.
    assert_eq!(ok[1..], [4, (12 * H) as i64], "admitted");
    // From a clock three days behind or ahead: refused, nothing written.
    for first in ["2024-05-28T00:00:00Z", "2024-06-02T00:00:00Z"] {
        let err = eval(days(first))
            .query_async::<Vec<i64>>(&mut connection)
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some("CLOCKSKEW"), "{err}");
    }
    let written: Option<String> = redis::cmd("GET")
        .arg("skew-key")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(
        written.unwrap().ends_with(" 1"),
        "only the admitted call counted"
    );
    // The store reports it as a clock skew.
    let err = redlimit::__private::store_error(
        eval(days("2024-05-28T00:00:00Z"))
            .query_async::<Vec<i64>>(&mut connection)
            .await
            .unwrap_err(),
    );
    assert!(matches!(err, StoreError::ClockSkew(_)), "{err:?}");
}

#[tokio::test]
async fn a_limiter_over_a_calendar_day_says_how_long_until_the_day_ends() {
    use redlimit::limiter::{AcquireError, Limiter};
    // 2024-10-27 in Berlin is 25 hours long: it ends at 23:00Z.
    let clock = ManualClock::new(us("2024-10-27T22:00:00Z"));
    let day = Calendar::day().in_zone("Europe/Berlin").unwrap();
    let limiter = Limiter::new(
        MemoryStore::with_clock(clock.clone()),
        policy("jobs", 2, day),
    );
    let permit = limiter.try_acquire("worker", 2).await.unwrap();
    permit.settle(2).await.unwrap();
    assert_eq!(
        limiter.try_acquire("worker", 1).await.unwrap_err(),
        AcquireError::TooLong {
            wait: Duration::from_secs(3600)
        }
    );
    clock.set(us("2024-10-27T23:00:00Z"));
    assert!(
        limiter.try_acquire("worker", 2).await.is_ok(),
        "the next day"
    );
}

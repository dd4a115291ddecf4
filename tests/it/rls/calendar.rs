//! Our `calendar` extension through `redlimit::rls`: a limit whose windows follow a calendar
//! in a time zone answers `duration_until_reset` to the window's end, over the memory store on
//! a fixed clock (exactly, at a billing month's end and on a day of a daylight-saving change)
//! and over a real Redis on its `TIME`; a plain `unit: month` keeps the Go service's 30 days;
//! misuses of the extension are refused with their place.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redlimit::rls::RateLimitService;
use redlimit::rls::config::RlsConfig;
use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus,
};
use redlimit::rls::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use redlimit::store::{ManualClock, MemoryStore, Store};
use tonic::transport::{Channel, Server};

use super::service::{Client, call, d};
use crate::support::redis_server::RedisServer;
use crate::support::redis_store;

const CONFIG: &str = r#"
domain: llm
descriptors:
  - key: api_key
    rate_limit:
      unit: month
      requests_per_unit: 3
      name: monthly_tokens
      calendar: {time_zone: Europe/Berlin, anchor: "15T00:00"}
  - key: user
    rate_limits:
      - {unit: day, requests_per_unit: 2, calendar: {time_zone: America/New_York}}
  - key: utc_month
    rate_limit: {unit: month, requests_per_unit: 5, calendar: {}}
  - key: go_month
    rate_limit: {unit: month, requests_per_unit: 5}
"#;

/// Unix µs of an RFC 3339 instant.
fn us(text: &str) -> u64 {
    let t: jiff::Timestamp = text.parse().unwrap();
    u64::try_from(t.as_microsecond()).unwrap()
}

fn until_reset(status: &DescriptorStatus) -> Duration {
    let d = status
        .duration_until_reset
        .as_ref()
        .expect("duration_until_reset");
    Duration::new(d.seconds as u64, d.nanos as u32)
}

fn req(key: &str, value: &str, hits: u32) -> RateLimitRequest {
    RateLimitRequest {
        domain: "llm".into(),
        descriptors: vec![d(&[(key, value)])],
        hits_addend: hits,
    }
}

async fn serve(store: Arc<dyn Store>) -> Client {
    let config = RlsConfig::parse([("llm.yaml", CONFIG)], false).expect("config");
    let service = RateLimitService::builder(store)
        .config(config)
        .store_deadline(Duration::from_secs(5))
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tokio::spawn(
        Server::builder()
            .add_service(service.into_server())
            .serve_with_incoming(incoming),
    );
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient::new(channel)
}

fn status(r: &RateLimitResponse) -> &DescriptorStatus {
    &r.statuses[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_billing_month_resets_at_its_anchor_to_the_microsecond() {
    // Berlin's billing month ends on April 15, 00:00 CEST: 2024-04-14T22:00Z.
    let end = us("2024-04-14T22:00:00Z");
    let clock = ManualClock::new(end - 90 * 1_000_000 - 250_000);
    let mut client = serve(Arc::new(MemoryStore::with_clock(clock.clone()))).await;
    let first = call(&mut client, req("api_key", "k1", 3)).await;
    assert_eq!(first.overall_code(), Code::Ok);
    let s = status(&first);
    assert_eq!(s.limit_remaining, 0);
    assert_eq!(until_reset(s), Duration::from_micros(90_250_000));
    let limit = s.current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.requests_per_unit, limit.unit, limit.name.as_str()),
        (3, 5, "monthly_tokens"),
        "MONTH"
    );
    clock.set(end - 1);
    let over = call(&mut client, req("api_key", "k1", 1)).await;
    assert_eq!(over.overall_code(), Code::OverLimit);
    assert_eq!(until_reset(status(&over)), Duration::from_micros(1));
    clock.set(end);
    let next = call(&mut client, req("api_key", "k1", 1)).await;
    assert_eq!(next.overall_code(), Code::Ok);
    // To May 15, 00:00 CEST: 30 days (April has 30).
    assert_eq!(until_reset(status(&next)), Duration::from_secs(30 * 86_400));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_in_new_york_is_23_hours_when_the_clocks_spring_forward() {
    // 2024-03-10 in New York: 05:00Z (00:00 EST) to 04:00Z the next day (00:00 EDT).
    let clock = ManualClock::new(us("2024-03-10T05:00:00Z"));
    let mut client = serve(Arc::new(MemoryStore::with_clock(clock.clone()))).await;
    let first = call(&mut client, req("user", "u", 1)).await;
    assert_eq!(until_reset(status(&first)), Duration::from_secs(23 * 3600));
    // A check of nothing on a fresh counter: until the window would be whole after one unit
    // (on the server's own clock, as the Go service computes every reset): within a day.
    let other = call(&mut client, req("user", "fresh", 0)).await;
    assert_eq!(other.overall_code(), Code::Ok);
    let wait = until_reset(status(&other));
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_secs(25 * 3600),
        "{wait:?}"
    );
    clock.set(us("2024-03-11T03:59:59Z"));
    call(&mut client, req("user", "u", 1)).await;
    let over = call(&mut client, req("user", "u", 1)).await;
    assert_eq!(over.overall_code(), Code::OverLimit);
    assert_eq!(until_reset(status(&over)), Duration::from_secs(1));
}

/// The end of the current UTC month, and the Go service's 30-day window's, from `now`.
fn month_ends(now: Duration) -> (Duration, Duration) {
    let at = jiff::Timestamp::from_microsecond(now.as_micros() as i64).unwrap();
    let date = at.to_zoned(jiff::tz::TimeZone::UTC).date();
    let next = date.last_of_month().tomorrow().unwrap();
    let calendar = Duration::from_micros(
        next.to_zoned(jiff::tz::TimeZone::UTC)
            .unwrap()
            .timestamp()
            .as_microsecond() as u64,
    );
    let thirty = 30 * 86_400;
    let go = Duration::from_secs((now.as_secs() / thirty + 1) * thirty);
    (calendar, go)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_redis_a_calendar_month_ends_with_the_month_and_a_plain_one_after_30_days() {
    let server = RedisServer::start();
    let mut client = serve(Arc::new(redis_store(&server, "rls-calendar").await)).await;
    let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let calendar = call(&mut client, req("utc_month", "k", 1)).await;
    let go = call(&mut client, req("go_month", "k", 1)).await;
    let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    // Redis's time lies between the two readings (one host): the reset lands on the end.
    let (month_end, go_end) = month_ends(before);
    assert_eq!(
        month_ends(after),
        (month_end, go_end),
        "not across a month's end"
    );
    for (response, end) in [(calendar, month_end), (go, go_end)] {
        let reset = until_reset(status(&response));
        assert!(
            before + reset <= end + Duration::from_secs(1) && after + reset >= end,
            "{reset:?} from {before:?}..{after:?} is not {end:?}"
        );
    }
}

#[test]
fn the_extension_is_checked_with_its_place() {
    let refused = [
        (
            "rate_limit: {unit: minute, requests_per_unit: 5, calendar: {}}",
            "a calendar's unit is day, week, month or year",
        ),
        (
            "rate_limit: {unit: month, requests_per_unit: 5, algorithm: gcra, calendar: {}}",
            "only fixed windows follow a calendar",
        ),
        (
            "rate_limit: {unit: day, requests_per_unit: 5, unit_multiplier: 2, calendar: {}}",
            "no unit_multiplier",
        ),
        (
            "rate_limit: {unit: month, requests_per_unit: 5, calendar: {time_zone: Mars/Olympus}}",
            "`Mars/Olympus` is not a time zone",
        ),
        (
            "rate_limit: {unit: month, requests_per_unit: 5, calendar: {anchor: \"32T00:00\"}}",
            "a month's day is 1 to 31",
        ),
        (
            "rate_limit: {unit: week, requests_per_unit: 5, calendar: {zone: UTC}}",
            "zone",
        ),
        (
            "rate_limit: {unlimited: true, calendar: {}}",
            "an unlimited limit has no algorithm, unit_multiplier or calendar",
        ),
        (
            "calendar: {}\n    rate_limit: {unit: day, requests_per_unit: 5}",
            "calendar",
        ),
    ];
    for (limit, expected) in refused {
        let text = format!("domain: d\ndescriptors:\n  - key: k\n    {limit}\n");
        let err = RlsConfig::parse([("t.yaml", text.as_str())], false)
            .expect_err(limit)
            .to_string();
        assert!(err.contains(expected), "{limit}: {err}");
        assert!(err.contains("t.yaml"), "{err}");
    }
    let c = RlsConfig::parse([("llm.yaml", CONFIG)], false).unwrap();
    let dump = c.dump();
    assert!(
        dump.contains("llm.api_key: unit=MONTH requests_per_unit=3, shadow_mode: false, quota_mode: false algorithm=fixed-window unit_multiplier=1 calendar=15T00:00 Europe/Berlin\n"),
        "{dump}"
    );
    assert!(dump.contains(
        "llm.go_month: unit=MONTH requests_per_unit=5, shadow_mode: false, quota_mode: false\n"
    ));
}

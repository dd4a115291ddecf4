//! Where envoyproxy/ratelimit's users rely on its answers, over the memory store and a real
//! redis-server: `share_threshold` counts every value a wildcard matches on one counter (its
//! `test/config/share_threshold.yaml` shapes, nested ones too, and its integration test's
//! `share-threshold-test` domain); a request refused for any reason charges nothing, and no
//! concurrent call sees it charged (its `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT` test's
//! numbers); a refused descriptor has `limit_remaining` 0; a counter nothing has charged yet
//! answers `duration_until_reset` to its window's end.

use std::time::{SystemTime, UNIX_EPOCH};

use redlimit::rls::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use redlimit::rls::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus,
};
use redlimit::rls::{RateLimitService, RateLimitServiceBuilder};
use redlimit::store::Commit;

use super::service::{Client, call, d, request_with_hits, serve_yaml, stores};

/// The shapes of the Go service's `test/config/share_threshold.yaml` (its `unit: minute`
/// made `day`, so that no test runs across a window's end) and of its integration test's
/// `share-threshold-test` domain, beside the limits the other tests use.
const CONFIG: &str = "
domain: test-domain
descriptors:
  - {key: files, value: files/*, share_threshold: true, rate_limit: {unit: day, requests_per_unit: 100}}
  - key: nested
    value: parent
    descriptors:
      - {key: files, value: nested/*, share_threshold: true, rate_limit: {unit: day, requests_per_unit: 200}}
  - key: files
    value: top/*
    share_threshold: true
    descriptors:
      - {key: files, value: nested/*, share_threshold: true, rate_limit: {unit: day, requests_per_unit: 300}}
  - key: route
    value: api/*
    share_threshold: true
    value_to_metric: true
    descriptors:
      - {key: method, rate_limit: {unit: day, requests_per_unit: 60}}
  - key: path
    value: path/*
    share_threshold: true
    descriptors:
      - key: file
        value: file/*
        share_threshold: false
        descriptors:
          - {key: type, rate_limit: {unit: day, requests_per_unit: 120}}
  - key: user
    value: user/*
    share_threshold: true
    descriptors:
      - key: resource
        value: res/*
        share_threshold: true
        descriptors:
          - {key: action, rate_limit: {unit: day, requests_per_unit: 150}}
  - {key: file, value: test1, rate_limit: {unit: day, requests_per_unit: 50}}
  - {key: file, value: test*, share_threshold: true, rate_limit: {unit: day, requests_per_unit: 100}}
  - {key: midpath, value: /api*v1, share_threshold: true, rate_limit: {unit: day, requests_per_unit: 100}}
  - {key: multiroute, value: svc*ep*rpc, share_threshold: true, rate_limit: {unit: day, requests_per_unit: 50}}
  - key: tenant
    value: t*prod
    share_threshold: true
    descriptors:
      - {key: resource, value: res*v2, share_threshold: true, rate_limit: {unit: day, requests_per_unit: 60}}
  - {key: shared, value: files/*, share_threshold: true, rate_limit: {unit: day, requests_per_unit: 10}}
  - {key: files_no_share, value: files_no_share/*, rate_limit: {unit: day, requests_per_unit: 10}}
  - {key: key4, rate_limit: {unit: day, requests_per_unit: 15}}
  - {key: key5, rate_limit: {unit: day, requests_per_unit: 14}}
  - {key: big, rate_limit: {unit: day, requests_per_unit: 1000}}
  - {key: small, rate_limit: {unit: day, requests_per_unit: 3}}
  - {key: gcra, rate_limit: {unit: day, requests_per_unit: 3, algorithm: gcra}}
  - {key: log, rate_limit: {unit: hour, requests_per_unit: 4, algorithm: sliding-log}}
";

async fn serve(builder: RateLimitServiceBuilder) -> Client {
    serve_yaml(builder, "test.yaml", CONFIG).await
}

fn request(descriptors: Vec<(RateLimitDescriptor, u64)>) -> RateLimitRequest {
    request_with_hits("test-domain", descriptors)
}

fn one(entries: &[(&str, &str)], hits: u64) -> RateLimitRequest {
    request(vec![(d(entries), hits)])
}

fn code_and_left(status: &DescriptorStatus) -> (Code, u32) {
    (status.code(), status.limit_remaining)
}

fn reset_secs(status: &DescriptorStatus) -> f64 {
    let d = status.duration_until_reset.expect("duration_until_reset");
    d.seconds as f64 + f64::from(d.nanos) / 1e9
}

/// Charges `limit` hits on `a`, then asks `b` with a check of nothing: over (its counter is
/// `a`'s) if `shared`, else untouched.
async fn shares(
    client: &mut Client,
    kind: &str,
    a: &[(&str, &str)],
    b: &[(&str, &str)],
    limit: u32,
    shared: bool,
) {
    let first = call(client, one(a, u64::from(limit))).await;
    assert_eq!(
        code_and_left(&first.statuses[0]),
        (Code::Ok, 0),
        "{kind} {a:?}"
    );
    let other = call(client, one(b, 0)).await;
    let expected = match shared {
        true => (Code::OverLimit, 0),
        false => (Code::Ok, limit),
    };
    assert_eq!(
        code_and_left(&other.statuses[0]),
        expected,
        "{kind}: {b:?} after {a:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_threshold_counts_every_matched_value_on_one_counter() {
    let (_server, stores) = stores("rls-share").await;
    for (kind, store) in stores {
        let mut client = serve(RateLimitService::builder(store).commit(Commit::AllOrNone)).await;
        let c = &mut client;
        shares(
            c,
            kind,
            &[("files", "files/a.pdf")],
            &[("files", "files/b.csv")],
            100,
            true,
        )
        .await;
        // Nested: the sharing level below a plain one, both levels sharing, and a sharing
        // level above the rule's (the Go service keeps its pattern per entry index).
        shares(
            c,
            kind,
            &[("nested", "parent"), ("files", "nested/file1.txt")],
            &[("nested", "parent"), ("files", "nested/file2.csv")],
            200,
            true,
        )
        .await;
        shares(
            c,
            kind,
            &[("files", "top/file1.txt"), ("files", "nested/sub1.txt")],
            &[("files", "top/file2.pdf"), ("files", "nested/sub2.csv")],
            300,
            true,
        )
        .await;
        shares(
            c,
            kind,
            &[("route", "api/v1"), ("method", "GET")],
            &[("route", "api/v2"), ("method", "GET")],
            60,
            true,
        )
        .await;
        // The method below the shared route keeps its value: one counter per method.
        shares(
            c,
            kind,
            &[("route", "api/v1"), ("method", "PUT")],
            &[("route", "api/v3"), ("method", "POST")],
            60,
            false,
        )
        .await;
        // `path/*` shares, `file/*` below it does not: one counter per file value.
        shares(
            c,
            kind,
            &[("path", "path/a"), ("file", "file/x"), ("type", "pdf")],
            &[("path", "path/b"), ("file", "file/x"), ("type", "pdf")],
            120,
            true,
        )
        .await;
        let other_file = call(
            c,
            one(
                &[("path", "path/c"), ("file", "file/y"), ("type", "pdf")],
                0,
            ),
        )
        .await;
        assert_eq!(
            code_and_left(&other_file.statuses[0]),
            (Code::Ok, 120),
            "{kind}"
        );
        shares(
            c,
            kind,
            &[
                ("user", "user/1"),
                ("resource", "res/1"),
                ("action", "read"),
            ],
            &[
                ("user", "user/2"),
                ("resource", "res/2"),
                ("action", "read"),
            ],
            150,
            true,
        )
        .await;
        // An exact value has its own counter; the values the pattern matches share theirs.
        shares(
            c,
            kind,
            &[("file", "test2")],
            &[("file", "test3")],
            100,
            true,
        )
        .await;
        let exact = call(c, one(&[("file", "test1")], 0)).await;
        assert_eq!(code_and_left(&exact.statuses[0]), (Code::Ok, 50), "{kind}");
        shares(
            c,
            kind,
            &[("midpath", "/api/users/v1")],
            &[("midpath", "/api/orders/v1")],
            100,
            true,
        )
        .await;
        shares(
            c,
            kind,
            &[("multiroute", "svc1ep2rpc")],
            &[("multiroute", "svcXepYrpc")],
            50,
            true,
        )
        .await;
        shares(
            c,
            kind,
            &[("tenant", "t1prod"), ("resource", "res1v2")],
            &[("tenant", "t2prod"), ("resource", "resXv2")],
            60,
            true,
        )
        .await;
        // The Go integration test: 10 hits on files/a.pdf leave files/b.csv over the limit;
        // without share_threshold each value has its 10.
        for _ in 0..10 {
            call(c, one(&[("shared", "files/a.pdf")], 1)).await;
        }
        let b = call(c, one(&[("shared", "files/b.csv")], 1)).await;
        assert_eq!(b.overall_code(), Code::OverLimit, "{kind}");
        assert_eq!(
            code_and_left(&b.statuses[0]),
            (Code::OverLimit, 0),
            "{kind}"
        );
        for i in 0..10 {
            let value = format!("files_no_share/{i}");
            let r = call(c, one(&[("files_no_share", &value)], 1)).await;
            assert_eq!(
                code_and_left(&r.statuses[0]),
                (Code::Ok, 9),
                "{kind} {value}"
            );
        }
    }
}

/// The numbers of the Go service's `TestOverLimitWithStopCacheKeyIncrementWhenOverlimitConfig`
/// (`test/redis/fixed_cache_impl_test.go`): key4 15 and key5 14 an hour (a day here), 10 used
/// of each; with its option on, a request one of whose keys would go over charges none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_charges_none_of_its_descriptors() {
    let (_server, stores) = stores("rls-none").await;
    for (kind, store) in stores {
        let mut client = serve(RateLimitService::builder(store).commit(Commit::AllOrNone)).await;
        let c = &mut client;
        let both =
            |h4: u64, h5: u64| request(vec![(d(&[("key4", "v")]), h4), (d(&[("key5", "v")]), h5)]);
        let left = |r: &redlimit::rls::proto::envoy::service::ratelimit::v3::RateLimitResponse| {
            r.statuses.iter().map(code_and_left).collect::<Vec<_>>()
        };
        call(c, both(10, 10)).await;
        assert_eq!(
            left(&call(c, both(1, 1)).await),
            [(Code::Ok, 4), (Code::Ok, 3)],
            "{kind}"
        );
        assert_eq!(
            left(&call(c, both(2, 2)).await),
            [(Code::Ok, 2), (Code::Ok, 1)],
            "{kind}"
        );
        // key5 would go over: refused, key4 not charged (its status as it stands).
        let refused = call(c, both(2, 2)).await;
        assert_eq!(refused.overall_code(), Code::OverLimit, "{kind}");
        assert_eq!(
            left(&refused),
            [(Code::Ok, 2), (Code::OverLimit, 0)],
            "{kind}"
        );
        // One descriptor's hits alone past its whole limit: refused, the other not charged.
        let never = call(c, both(1, 20)).await;
        assert_eq!(
            left(&never),
            [(Code::Ok, 2), (Code::OverLimit, 0)],
            "{kind}"
        );
        let read = call(c, both(0, 0)).await;
        assert_eq!(
            left(&read),
            [(Code::Ok, 2), (Code::Ok, 1)],
            "{kind}: charged"
        );
    }
}

/// Refused requests (one descriptor with 1 hit of 1000, one with 5 of 3) raced by check-only
/// calls of the first: no call ever sees it charged, not even for a moment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_concurrent_call_sees_a_refused_request_charged() {
    let (_server, stores) = stores("rls-race").await;
    for (kind, store) in stores {
        let client = serve(
            RateLimitService::builder(store)
                .commit(Commit::AllOrNone)
                .deny_cache(0),
        )
        .await;
        let refuse = request(vec![(d(&[("big", "b")]), 1), (d(&[("small", "s")]), 5)]);
        let read = one(&[("big", "b")], 0);
        let refusers = (0..4).map(|_| {
            let (mut client, refuse) = (client.clone(), refuse.clone());
            tokio::spawn(async move {
                for _ in 0..100 {
                    let r = call(&mut client, refuse.clone()).await;
                    assert_eq!(r.overall_code(), Code::OverLimit);
                }
            })
        });
        let readers = (0..2).map(|_| {
            let (mut client, read) = (client.clone(), read.clone());
            tokio::spawn(async move {
                let mut seen = Vec::new();
                for _ in 0..200 {
                    let r = call(&mut client, read.clone()).await;
                    seen.push(r.statuses[0].limit_remaining);
                }
                seen
            })
        });
        let readers: Vec<_> = readers.collect();
        for refuser in refusers.collect::<Vec<_>>() {
            refuser.await.expect("refuser");
        }
        for reader in readers {
            let seen = reader.await.expect("reader");
            assert!(seen.iter().all(|&left| left == 1000), "{kind}: {seen:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_descriptor_has_no_units_left() {
    let (_server, stores) = stores("rls-left").await;
    for (kind, store) in stores {
        let mut client = serve(RateLimitService::builder(store).commit(Commit::AllOrNone)).await;
        let c = &mut client;
        let first = call(c, one(&[("small", "x")], 2)).await;
        assert_eq!(code_and_left(&first.statuses[0]), (Code::Ok, 1), "{kind}");
        // 3 asked, 1 left: over, and 0 left for this request (the Go service's answer).
        let over = call(c, one(&[("small", "x")], 3)).await;
        assert_eq!(
            code_and_left(&over.statuses[0]),
            (Code::OverLimit, 0),
            "{kind}"
        );
        // Nothing was charged: the unit is still there.
        let read = call(c, one(&[("small", "x")], 1)).await;
        assert_eq!(code_and_left(&read.statuses[0]), (Code::Ok, 0), "{kind}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_counter_answers_the_time_to_its_window_end() {
    let (_server, stores) = stores("rls-fresh").await;
    for (kind, store) in stores {
        let mut client = serve(RateLimitService::builder(store)).await;
        let c = &mut client;
        // The Go service's `CalculateReset`: the unit's length less the time into it.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let to_midnight = 86_400.0 - now % 86_400.0;
        let fresh = call(c, one(&[("small", "fresh")], 0)).await;
        assert_eq!(code_and_left(&fresh.statuses[0]), (Code::Ok, 3), "{kind}");
        let reset = reset_secs(&fresh.statuses[0]);
        assert!(
            (reset - to_midnight).abs() < 5.0,
            "{kind}: {reset} s, not {to_midnight}"
        );
        // Charged, the window's end still.
        let charged = call(c, one(&[("small", "fresh")], 1)).await;
        assert!(
            (reset_secs(&charged.statuses[0]) - to_midnight).abs() < 5.0,
            "{kind}"
        );
        // Without windows: until one unit charged now would be free again (GCRA: one
        // emission interval, 8 h of 3 a day; a sliding log: its period).
        let gcra = call(c, one(&[("gcra", "fresh")], 0)).await;
        assert!(
            (reset_secs(&gcra.statuses[0]) - 28_800.0).abs() < 5.0,
            "{kind}"
        );
        let log = call(c, one(&[("log", "fresh")], 0)).await;
        assert!(
            (reset_secs(&log.statuses[0]) - 3_600.0).abs() < 5.0,
            "{kind}"
        );
    }
}

//! Every hit lands (the default, `Commit::Always`, as envoyproxy/ratelimit counts with its
//! default `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false`), on the memory store and a real
//! Redis: the token-budget bypass of the all-or-none admission closed, the Go service's own
//! test numbers (`test/redis/fixed_cache_impl_test.go`) in both modes, shadow- and
//! quota-mode descriptors charged as the others.

use redlimit::rls::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use redlimit::rls::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus,
};
use redlimit::rls::{RateLimitService, RateLimitServiceBuilder};
use redlimit::store::Commit;

use super::service::{Client, call, d, request_with_hits, serve_yaml, stores};

const CONFIG: &str = "
domain: tokens
descriptors:
  - {key: tenant, rate_limit: {unit: hour, requests_per_unit: 1000}}
  - {key: key4, rate_limit: {unit: hour, requests_per_unit: 15}}
  - {key: key5, rate_limit: {unit: hour, requests_per_unit: 14}}
  - {key: shadow, shadow_mode: true, rate_limit: {unit: hour, requests_per_unit: 2}}
  - {key: quota, quota_mode: true, rate_limit: {unit: hour, requests_per_unit: 2}}
  - {key: gcra, rate_limit: {unit: hour, requests_per_unit: 10, algorithm: gcra}}
";

async fn serve(builder: RateLimitServiceBuilder) -> Client {
    serve_yaml(builder, "tokens.yaml", CONFIG).await
}

fn request(descriptors: Vec<(RateLimitDescriptor, u64)>) -> RateLimitRequest {
    request_with_hits("tokens", descriptors)
}

fn one(entries: &[(&str, &str)], hits: u64) -> RateLimitRequest {
    request(vec![(d(entries), hits)])
}

fn code_and_left(status: &DescriptorStatus) -> (Code, u32) {
    (status.code(), status.limit_remaining)
}

/// The bypass, as an Envoy Gateway user meets it: 1 000 tokens an hour, a check of nothing on
/// the request path (`cost.request` 0), a charge of 300 after each response
/// (`apply_on_stream_done`). After three responses 100 are left; the fourth response's 300
/// land all the same, and every check after is refused until the hour ends.
#[tokio::test]
async fn a_charge_after_the_response_lands_and_stops_the_next_requests() {
    let (_server, stores) = stores("every-hit-bypass").await;
    for (name, store) in stores {
        let mut client = serve(RateLimitService::builder(store.clone())).await;
        let tenant = [("tenant", "t1")];
        for left in [1000, 700, 400, 100] {
            let check = call(&mut client, one(&tenant, 0)).await;
            assert_eq!(check.overall_code(), Code::Ok, "{name}");
            assert_eq!(
                code_and_left(&check.statuses[0]),
                (Code::Ok, left),
                "{name}"
            );
            let charge = call(&mut client, one(&tenant, 300)).await;
            let expected = if left > 100 {
                (Code::Ok, left - 300)
            } else {
                (Code::OverLimit, 0)
            };
            assert_eq!(code_and_left(&charge.statuses[0]), expected, "{name}");
        }
        for _ in 0..3 {
            let check = call(&mut client, one(&tenant, 0)).await;
            assert_eq!(check.overall_code(), Code::OverLimit, "{name}: in debt");
            assert_eq!(code_and_left(&check.statuses[0]), (Code::OverLimit, 0));
            let reset = check.statuses[0].duration_until_reset.expect("a reset");
            assert!(reset.seconds <= 3_600, "{name}: {reset:?}");
        }
        // An all-or-none service on the same store sees the debt: nothing fits.
        let mut strict = serve(RateLimitService::builder(store).commit(Commit::AllOrNone)).await;
        let check = call(&mut strict, one(&tenant, 1)).await;
        assert_eq!(
            code_and_left(&check.statuses[0]),
            (Code::OverLimit, 0),
            "{name}"
        );
    }
}

/// `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true` (all or none) keeps the bypass: the charge
/// that does not fit is refused and never counted, and the checks after it pass.
#[tokio::test]
async fn all_or_none_refuses_the_charge_that_does_not_fit_and_counts_none_of_it() {
    let (_server, stores) = stores("every-hit-strict").await;
    for (name, store) in stores {
        let mut client = serve(RateLimitService::builder(store).commit(Commit::AllOrNone)).await;
        let tenant = [("tenant", "t1")];
        for _ in 0..3 {
            call(&mut client, one(&tenant, 300)).await;
        }
        let charge = call(&mut client, one(&tenant, 300)).await;
        assert_eq!(
            code_and_left(&charge.statuses[0]),
            (Code::OverLimit, 0),
            "{name}"
        );
        let check = call(&mut client, one(&tenant, 0)).await;
        assert_eq!(code_and_left(&check.statuses[0]), (Code::Ok, 100), "{name}");
    }
}

/// `TestOverLimitWithLocalCache`'s counts without its local cache (15 an hour; the counter
/// after each call 11, 13, 16): 4 left, 2 left, then over with 0; every hit counted.
#[tokio::test]
async fn the_go_services_counts_one_descriptor() {
    let (_server, stores) = stores("every-hit-go-one").await;
    for (name, store) in stores {
        let mut client = serve(RateLimitService::builder(store)).await;
        let key4 = [("key4", "value4")];
        call(&mut client, one(&key4, 10)).await;
        for (hits, expected) in [
            (1, (Code::Ok, 4)),
            (2, (Code::Ok, 2)),
            (3, (Code::OverLimit, 0)),
        ] {
            let answer = call(&mut client, one(&key4, hits)).await;
            assert_eq!(code_and_left(&answer.statuses[0]), expected, "{name}");
        }
        // 16 of 15: a check of nothing is over too (the count past the limit).
        let check = call(&mut client, one(&key4, 0)).await;
        assert_eq!(code_and_left(&check.statuses[0]), (Code::OverLimit, 0));
    }
}

/// `TestOverLimitWithStopCacheKeyIncrementWhenOverlimitConfig`'s counts (key4 15 and key5 14
/// an hour, both at 10): hits 1 each leave 4 and 3, hits 2 each leave 2 and 1; then hits 2
/// each put key5 past its limit. All or none (the Go service's `true`): key5 over, key4 not
/// charged, 2 left, as its test says. Every hit landing (its default): both charged, key4
/// at its limit exactly (OK, 0 left), key5 over.
#[tokio::test]
async fn the_go_services_counts_two_descriptors_in_both_modes() {
    let (_server, stores) = stores("every-hit-go-two").await;
    for (name, store) in stores {
        for (commit, third) in [
            (Commit::AllOrNone, [(Code::Ok, 2), (Code::OverLimit, 0)]),
            (Commit::Always, [(Code::Ok, 0), (Code::OverLimit, 0)]),
        ] {
            let mut client = serve(RateLimitService::builder(store.clone()).commit(commit)).await;
            let tag = format!("{commit:?}");
            let (key4, key5) = (d(&[("key4", &tag)]), d(&[("key5", &tag)]));
            let both = |hits| request(vec![(key4.clone(), hits), (key5.clone(), hits)]);
            call(&mut client, both(10)).await;
            for (hits, expected) in [
                (1, [(Code::Ok, 4), (Code::Ok, 3)]),
                (2, [(Code::Ok, 2), (Code::Ok, 1)]),
                (2, third),
            ] {
                let answer = call(&mut client, both(hits)).await;
                let got: Vec<_> = answer.statuses.iter().map(code_and_left).collect();
                assert_eq!(got, expected, "{name} {commit:?}");
                let over = expected.iter().any(|(code, _)| *code == Code::OverLimit);
                assert_eq!(answer.overall_code() == Code::OverLimit, over);
            }
        }
    }
}

/// Shadow- and quota-mode descriptors are charged as the others (the Go service increments
/// every descriptor): over their limits, a shadow one answers OK, a quota one makes the
/// request over only with every quota descriptor over; and a GCRA counter in debt is over for
/// a check of nothing until the debt is paid.
#[tokio::test]
async fn shadow_quota_and_gcra_counters_are_charged_every_hit() {
    let (_server, stores) = stores("every-hit-modes").await;
    for (name, store) in stores {
        let mut client = serve(RateLimitService::builder(store)).await;
        let both = |hits| {
            request(vec![
                (d(&[("shadow", "s")]), hits),
                (d(&[("quota", "q")]), hits),
            ])
        };
        call(&mut client, both(3)).await;
        let answer = call(&mut client, both(0)).await;
        let got: Vec<_> = answer.statuses.iter().map(code_and_left).collect();
        assert_eq!(got, [(Code::Ok, 0), (Code::OverLimit, 0)], "{name}");
        assert_eq!(
            answer.overall_code(),
            Code::OverLimit,
            "{name}: every quota over"
        );
        let gcra = [("gcra", "g")];
        let charge = call(&mut client, one(&gcra, 12)).await;
        assert_eq!(
            code_and_left(&charge.statuses[0]),
            (Code::OverLimit, 0),
            "{name}"
        );
        let check = call(&mut client, one(&gcra, 0)).await;
        assert_eq!(check.statuses[0].code(), Code::OverLimit, "{name}");
        let wait = check.statuses[0].duration_until_reset.expect("a wait");
        // 12 of 10 an hour: 2 owed, paid in 2 emission intervals of 6 minutes.
        assert!((700..=720).contains(&wait.seconds), "{name}: {wait:?}");
    }
}

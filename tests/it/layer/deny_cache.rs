//! The deny cache answers a denied key in memory until the store's retry time. It is exact
//! because every algorithm's `retry_after` is a lower bound: nothing of the denied cost (or
//! more) passes before it, whatever else happens. These tests hold every algorithm to that
//! (random policies of several limits and costs above 1, on the memory store, which the
//! differential test holds equal to the Redis scripts), and show a hammered denied key costs
//! Redis nothing until then.

use crate::support;

use std::time::Duration;

use axum::Router;
use http::StatusCode;
use proptest::prelude::*;
use redlimit::key::PeerIp;
use redlimit::layer::{RateLimitBuilder, Rule};
use redlimit::store::{ManualClock, MemoryStore};
use redlimit::{Algorithm, Decision, DecisionSource, Key, Limit, Policy, RateLimitLayer};
use support::*;

const T0: u64 = 1_700_000_123_456_789;

fn limit() -> impl Strategy<Value = Limit> {
    (
        prop::sample::select(Algorithm::ALL.to_vec()),
        1u64..=12,
        prop_oneof![1u64..=50, 51u64..=10_000],
    )
        .prop_map(|(a, n, ms)| Limit::new(a, n, Duration::from_millis(ms)).unwrap())
}

/// A policy, then (advance µs, cost) steps to bring its state anywhere.
fn trace() -> impl Strategy<Value = (Vec<Limit>, Vec<(u64, u64)>)> {
    prop::collection::vec(limit(), 1..=3).prop_flat_map(|limits| {
        let longest = limits
            .iter()
            .map(|l| l.period().as_micros() as u64)
            .max()
            .unwrap();
        let most = limits.iter().map(Limit::count).max().unwrap();
        let step = (
            prop_oneof![3 => Just(0u64), 4 => 0..=longest / 4, 1 => 0..=longest * 2],
            prop_oneof![5 => Just(1u64), 3 => 1..=most],
        );
        (Just(limits), prop::collection::vec(step, 1..40))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// After any denial of cost `c` at `t` with retry `r`: at `t + r - 1 µs` cost `c`, and any
    /// larger cost a limit could ever admit, is still denied (so a cache until `t + r` is
    /// exact); at `t + r` cost `c` passes (so the cache is as short as it can be).
    #[test]
    fn every_retry_after_is_an_exact_lower_bound((limits, steps) in trace()) {
        let policy = Policy::new("p", limits.clone()).unwrap();
        let clock = ManualClock::new(T0);
        let store = MemoryStore::with_clock(clock.clone());
        let key = Key::new("k");
        let mut now = T0;
        for (advance, cost) in steps {
            now += advance;
            clock.set(now);
            let decision = store.check_now(&policy, &key, cost);
            let Some(retry) = decision.retry_after() else { continue };
            let retry = retry.as_micros() as u64;
            prop_assert!(retry > 0, "a denial with no wait: {decision:?}");
            let capacity = limits.iter().map(Limit::count).min().unwrap();
            for bigger in cost..=capacity {
                clock.set(now + retry - 1);
                let early = store.check_now(&policy, &key, bigger);
                prop_assert!(!early.is_allowed(), "cost {bigger} passed 1 µs before the retry of cost {cost}: {decision:?} then {early:?}");
            }
            clock.set(now + retry);
            let on_time = store.check_now(&policy, &key, cost);
            prop_assert!(on_time.is_allowed(), "cost {cost} still denied at its retry time: {decision:?} then {on_time:?}");
            now += retry;
        }
    }
}

fn commands(server: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connection())
        .unwrap();
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

async fn denied_app(
    server: &RedisServer,
    layer: impl FnOnce(RateLimitBuilder) -> RateLimitBuilder,
) -> Router {
    let store = redis_store(server, "deny").await;
    let policy = Policy::new(
        "deny",
        [
            Limit::gcra(2, Duration::from_secs(3600)).unwrap(),
            Limit::sliding_log(3, Duration::from_secs(7200)).unwrap(),
        ],
    )
    .unwrap();
    source_app(
        layer(RateLimitLayer::builder(store, policy))
            .build()
            .expect("valid layer"),
    )
}

#[tokio::test]
async fn a_hammered_denied_key_costs_redis_nothing_until_its_retry_time() {
    let server = RedisServer::start();
    let app = denied_app(&server, |l| l).await;
    for _ in 0..2 {
        assert_eq!(status_of(&app, "10.0.0.1").await, StatusCode::OK);
    }
    let first = send(&app, request("/", "10.0.0.1", &[])).await;
    assert_eq!(first.status(), StatusCode::TOO_MANY_REQUESTS);
    let decision = first.extensions().get::<Decision>().unwrap().clone();
    assert_eq!(decision.source(), DecisionSource::Store);
    let retry: u64 = header(&first, "retry-after").parse().unwrap();
    let before = commands(&server);
    for _ in 0..200 {
        let res = send(&app, request("/", "10.0.0.1", &[])).await;
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        let cached = res.extensions().get::<Decision>().unwrap();
        assert_eq!(cached.source(), DecisionSource::DenyCache);
        assert_eq!(cached.denied_by(), decision.denied_by());
        assert_eq!(header(&res, "x-ratelimit-remaining"), "0");
        let left: u64 = header(&res, "retry-after").parse().unwrap();
        assert!(left <= retry && left + 5 >= retry, "{left} of {retry}");
        assert!(cached.retry_after() <= decision.retry_after());
    }
    assert_eq!(
        commands(&server),
        before,
        "Redis was asked while the denial stood"
    );
    // Another client still goes to Redis.
    assert_eq!(status_of(&app, "10.0.0.2").await, StatusCode::OK);
    assert_eq!(commands(&server), before + 1);
}

#[tokio::test]
async fn a_cached_denial_ends_at_the_retry_time_and_can_be_turned_off() {
    let server = RedisServer::start();
    let store = redis_store(&server, "deny-short").await;
    let policy = Policy::new(
        "short",
        [Limit::gcra(1, Duration::from_millis(300)).unwrap()],
    )
    .unwrap();
    let app = source_app(RateLimitLayer::new(store, policy.clone()));
    assert_eq!(status_of(&app, "10.0.0.1").await, StatusCode::OK);
    assert_eq!(
        status_of(&app, "10.0.0.1").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Within seconds the store admits the key again, and the cache lets it ask.
    let passed = eventually(Duration::from_secs(5), async || {
        let res = send(&app, request("/", "10.0.0.1", &[])).await;
        res.status() == StatusCode::OK && body_text(res).await == "Store"
    })
    .await;
    assert!(passed, "the cached denial outlived the store's");

    let off = denied_app(&server, |l| l.deny_cache(0)).await;
    for _ in 0..2 {
        assert_eq!(status_of(&off, "10.0.0.3").await, StatusCode::OK);
    }
    for _ in 0..3 {
        let res = send(&off, request("/", "10.0.0.3", &[])).await;
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        let d = res.extensions().get::<Decision>().unwrap();
        assert_eq!(d.source(), DecisionSource::Store);
    }
}

#[tokio::test]
async fn a_smaller_cost_still_asks_the_store() {
    let server = RedisServer::start();
    let store = redis_store(&server, "deny-cost").await;
    let policy = Policy::new(
        "cost",
        [Limit::token_bucket(5, Duration::from_secs(3600)).unwrap()],
    )
    .unwrap();
    let layer = RateLimitLayer::builder(store, policy)
        .cost(|parts: &http::request::Parts| {
            parts
                .headers
                .get("x-cost")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(1)
        })
        .build()
        .expect("valid layer");
    let app = source_app(layer);
    let with_cost = |c: &str| request("/", "10.0.0.1", &[("x-cost", c)]);
    assert_eq!(send(&app, with_cost("3")).await.status(), StatusCode::OK);
    // 2 left: cost 3 is denied by the store, then by the cache; cost 2 still passes.
    let res = send(&app, with_cost("3")).await;
    assert_eq!(
        res.extensions().get::<Decision>().unwrap().source(),
        DecisionSource::Store
    );
    let res = send(&app, with_cost("4")).await;
    assert_eq!(
        res.extensions().get::<Decision>().unwrap().source(),
        DecisionSource::DenyCache
    );
    let res = send(&app, with_cost("2")).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(body_text(res).await, "Store");
}

#[tokio::test]
async fn layers_built_from_one_base_keep_their_own_denials() {
    let server = RedisServer::start();
    let store = redis_store(&server, "deny-base").await;
    let base = RateLimitLayer::builder_per_route(store);
    let policy =
        |name, n| Policy::new(name, [Limit::gcra(n, Duration::from_secs(3600)).unwrap()]).unwrap();
    // Rule 0 of each layer is a different policy.
    let strict = source_app(
        base.clone()
            .rule(Rule::new("/", policy("strict", 1)).unwrap().key(PeerIp))
            .build()
            .expect("valid layer"),
    );
    let loose = source_app(
        base.rule(Rule::new("/", policy("loose", 100)).unwrap().key(PeerIp))
            .build()
            .expect("valid layer"),
    );
    assert_eq!(status_of(&strict, "10.0.0.1").await, StatusCode::OK);
    for _ in 0..2 {
        assert_eq!(
            status_of(&strict, "10.0.0.1").await,
            StatusCode::TOO_MANY_REQUESTS
        );
    }
    let res = send(&loose, request("/", "10.0.0.1", &[])).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(body_text(res).await, "Store");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_a_denial_expires_one_request_asks_for_everyone() {
    let server = RedisServer::start();
    let store = redis_store(&server, "deny-herd").await;
    let period = Duration::from_millis(200);
    let policy = Policy::new("herd", [Limit::gcra(1, period).unwrap()]).unwrap();
    let app = source_app(RateLimitLayer::new(store, policy));
    assert_eq!(status_of(&app, "10.0.0.1").await, StatusCode::OK);
    assert_eq!(
        status_of(&app, "10.0.0.1").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    let before = commands(&server);
    let started = std::time::Instant::now();
    // 32 clients hammering the key across several retry times.
    let clients: Vec<_> = (0..32)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                for _ in 0..300 {
                    let status = status_of(&app, "10.0.0.1").await;
                    assert!(status == StatusCode::OK || status == StatusCode::TOO_MANY_REQUESTS);
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    let calls = commands(&server) - before;
    // Each retry time that passed lets one request ask (admitted), then the next (denied):
    // two calls, not one per waiting client (32).
    let expiries = (started.elapsed().as_micros() / period.as_micros()) as u64 + 1;
    assert!(
        calls <= 3 * expiries,
        "{calls} Redis calls over {expiries} expiries of the denial"
    );
}

//! Refunds (`Store::refund`, `RateLimitLayer::refund_if`): a refund gives back exactly the
//! units of the request it was made for — the state is then what it would have been without
//! that request, at any later time — never more, and only once; the memory store and the
//! Redis script agree; a 5xx through a layer that refunds it leaves the quota unchanged.

use crate::support;

use std::future::IntoFuture;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use redlimit::store::Refunds;
use redlimit::store::{KeyState, ManualClock, MemoryStore, RedisStore, Refund, Store};
use redlimit::{Algorithm, Decision, Key, Limit, Policy, RateLimitLayer};
use support::*;

const T0: u64 = 1_700_000_123_456_789;
const MS: u64 = 1_000;

/// One of the two stores, driven at explicit times.
enum At<'a> {
    Memory(&'a MemoryStore, &'a ManualClock),
    Redis(&'a RedisStore),
}

impl At<'_> {
    async fn check(&self, policy: &Policy, key: &Key, cost: u64, now: u64) -> Decision {
        match self {
            At::Memory(store, clock) => {
                clock.set(now);
                store.check_now(policy, key, cost)
            }
            At::Redis(store) => redlimit::__private::check_at(store, policy, key, cost, now)
                .into_future()
                .await
                .unwrap(),
        }
    }

    async fn inspect(&self, policy: &Policy, key: &Key, now: u64) -> KeyState {
        match self {
            At::Memory(store, clock) => {
                clock.set(now);
                store.inspect_now(policy, key)
            }
            At::Redis(store) => redlimit::__private::inspect_at(store, policy, key, now)
                .await
                .unwrap(),
        }
    }

    async fn refund(&self, policy: &Policy, key: &Key, refund: Refund, now: u64) -> bool {
        match self {
            At::Memory(store, clock) => {
                clock.set(now);
                store.refund(policy, key, refund).await.unwrap()
            }
            At::Redis(store) => redlimit::__private::refund_at(store, policy, key, refund, now)
                .await
                .unwrap(),
        }
    }
}

fn policies() -> Vec<Policy> {
    let mut policies: Vec<Policy> = Algorithm::ALL
        .map(|a| {
            Policy::new(
                a.name(),
                [Limit::new(a, 5, Duration::from_secs(1)).unwrap()],
            )
            .unwrap()
        })
        .to_vec();
    policies.push(every_algorithm_policy("mix", 5, Duration::from_secs(1)));
    policies.push(
        Policy::new(
            "logs",
            [
                Limit::sliding_log(5, Duration::from_secs(1)).unwrap(),
                Limit::sliding_log(4, Duration::from_millis(300)).unwrap(),
            ],
        )
        .unwrap(),
    );
    policies
}

/// Key `a` and key `b` see the same requests but one, `a`'s extra request of cost 2 at
/// `extra`, refunded at `refund`: from then on, `a`'s state is `b`'s. Returns whether the
/// refund gave anything back (a repeat of it never does).
async fn refund_restores_exactly(
    store: &At<'_>,
    policy: &Policy,
    run: u64,
    extra: u64,
    refund_at: u64,
) -> bool {
    let (a, b) = (Key::new(format!("a{run}")), Key::new(format!("b{run}")));
    for key in [&a, &b] {
        assert!(store.check(policy, key, 1, T0).await.is_allowed());
    }
    let admitted = store.check(policy, &a, 2, T0 + extra).await;
    assert!(admitted.is_allowed(), "{policy:?}");
    for key in [&a, &b] {
        assert!(
            store
                .check(policy, key, 1, T0 + extra + MS)
                .await
                .is_allowed()
        );
    }
    let refund = Refund::of(&admitted, 2).unwrap();
    let given = store.refund(policy, &a, refund, T0 + refund_at).await;
    // Another refund of the same decision (a retry, another replica) gives nothing.
    let again = Refund::of(&admitted, 2).unwrap();
    assert!(!store.refund(policy, &a, again, T0 + refund_at).await);
    for later in [
        refund_at,
        refund_at + 150 * MS,
        refund_at + 900 * MS,
        refund_at + 2_000 * MS,
    ] {
        let (sa, sb) = (
            store.inspect(policy, &a, T0 + later).await,
            store.inspect(policy, &b, T0 + later).await,
        );
        assert_eq!(
            sa.limits(),
            sb.limits(),
            "{policy:?}, refunded at +{refund_at} µs, read at +{later} µs"
        );
    }
    given
}

#[tokio::test]
async fn a_refund_restores_exactly_the_units_once_alike_on_redis_and_in_memory() {
    let server = RedisServer::start();
    let redis = redis_store(&server, "refunds").await;
    let clock = ManualClock::new(T0);
    let memory = MemoryStore::with_clock(clock.clone());
    let mut run = 0;
    for policy in policies() {
        // Refunded at once, a little later, across a window edge, and after every span.
        for (extra, refund_at) in [
            (0, 2 * MS),
            (10 * MS, 200 * MS),
            (100 * MS, 950 * MS),
            (100 * MS, 1_200 * MS),
            (0, 3_000 * MS),
        ] {
            run += 1;
            let on_memory = refund_restores_exactly(
                &At::Memory(&memory, &clock),
                &policy,
                run,
                extra,
                refund_at,
            )
            .await;
            let on_redis =
                refund_restores_exactly(&At::Redis(&redis), &policy, run, extra, refund_at).await;
            assert_eq!(
                on_memory, on_redis,
                "{policy:?} refunded at +{refund_at} µs"
            );
            if refund_at <= 200 * MS {
                assert!(
                    on_redis,
                    "{policy:?}: nothing given back at +{refund_at} µs"
                );
            }
            if refund_at >= 3_000 * MS {
                assert!(!on_redis, "too late to matter");
            }
        }
    }
}

#[tokio::test]
async fn a_refund_stops_at_a_fresh_state() {
    let server = RedisServer::start();
    let redis = redis_store(&server, "refund-floor").await;
    let clock = ManualClock::new(T0);
    let memory = MemoryStore::with_clock(clock.clone());
    for store in [At::Memory(&memory, &clock), At::Redis(&redis)] {
        for policy in policies() {
            let (key, unused) = (Key::new("k"), Key::new("unused"));
            let admitted = store.check(&policy, &key, 1, T0).await;
            // Said to have cost 5 though it cost 1: counts stop at 0, a bucket at full, a TAT
            // at now, a log at empty: the state of a key never used, nothing beyond.
            let refund = Refund::of(&admitted, 5).unwrap();
            assert!(store.refund(&policy, &key, refund, T0 + MS).await);
            let after = store.inspect(&policy, &key, T0 + MS).await;
            let fresh = store.inspect(&policy, &unused, T0 + MS).await;
            assert_eq!(after.limits(), fresh.limits(), "{policy:?}");
        }
    }
}

/// The app of the layer tests, plus `GET /fail` answering 500.
fn failing_app(layer: RateLimitLayer) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .route(
            "/fail",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "failed") }),
        )
        .layer(layer)
}

/// The key the layer's `x-api-key` extractor makes of `k`.
fn layer_key() -> Key {
    use redlimit::key::KeyExtractor;
    let (parts, _) = request("/", "10.0.0.1", &[("x-api-key", "k")]).into_parts();
    api_key().extract(&parts).expect("a key")
}

async fn remaining(store: &dyn Store, policy: &Policy) -> u64 {
    store
        .admin()
        .expect("admin")
        .inspect(policy, &layer_key())
        .await
        .unwrap()
        .limits()[0]
        .remaining()
}

/// 5xx answers through a layer that refunds them, on two instances sharing a store, leave
/// the quota as it was: afterwards, exactly the limit's count of good requests pass.
async fn five_hundreds_are_free(store: &dyn Store, a: Router, b: Router, policy: &Policy) {
    let get = |app: &Router, path: &str| {
        let (app, path) = (app.clone(), path.to_owned());
        async move {
            send(&app, request(&path, "10.0.0.1", &[("x-api-key", "k")]))
                .await
                .status()
        }
    };
    assert_eq!(get(&a, "/").await, StatusCode::OK);
    assert_eq!(remaining(store, policy).await, 2);
    for app in [&a, &b, &a, &b, &a, &b] {
        assert_eq!(get(app, "/fail").await, StatusCode::INTERNAL_SERVER_ERROR);
        // The refund is sent after the response: wait for it.
        let back = eventually(Duration::from_secs(10), async || {
            remaining(store, policy).await == 2
        })
        .await;
        assert!(back, "the 5xx was not refunded");
    }
    assert_eq!(get(&b, "/").await, StatusCode::OK);
    assert_eq!(get(&a, "/").await, StatusCode::OK);
    assert_eq!(get(&b, "/").await, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        remaining(store, policy).await,
        0,
        "good answers are not refunded"
    );
}

#[tokio::test]
async fn a_5xx_refunded_through_the_layer_leaves_the_quota_unchanged() {
    let server = RedisServer::start();
    let redis = redis_store(&server, "refund-layer").await;
    let memory = MemoryStore::new();
    for algorithm in Algorithm::ALL {
        let policy = Policy::new(
            algorithm.name(),
            [Limit::new(algorithm, 3, Duration::from_secs(86_400)).unwrap()],
        )
        .unwrap();
        for store in [&redis as &dyn Store, &memory] {
            let layer = |store: &dyn Store| {
                let store: std::sync::Arc<dyn Store> = match store.kind() {
                    "redis" => std::sync::Arc::new(redis.clone()),
                    _ => std::sync::Arc::new(memory.clone()),
                };
                RateLimitLayer::builder(store, policy.clone())
                    .key(api_key())
                    .refund_if(|response: &http::response::Parts| response.status.is_server_error())
                    .build()
                    .expect("valid layer")
            };
            five_hundreds_are_free(
                store,
                failing_app(layer(store)),
                failing_app(layer(store)),
                &policy,
            )
            .await;
            store
                .admin()
                .expect("admin")
                .reset(&policy, &layer_key())
                .await
                .unwrap();
        }
    }
}

#[tokio::test]
async fn without_refund_if_a_5xx_counts() {
    let memory = MemoryStore::new();
    let policy = gcra_policy("p", 3, Duration::from_secs(600));
    let app = failing_app(
        RateLimitLayer::builder(memory.clone(), policy.clone())
            .key(api_key())
            .build()
            .expect("valid layer"),
    );
    let res = send(&app, request("/fail", "10.0.0.1", &[("x-api-key", "k")])).await;
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(remaining(&memory, &policy).await, 2);
}

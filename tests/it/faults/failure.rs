//! Redis failures: a killed Redis never makes requests wait past the deadline (fail open, or
//! 503 when fail-closed), and limiting resumes once Redis is back.

use crate::support;

use std::time::{Duration, Instant};

use http::StatusCode;
use redlimit::layer::{OnStoreError, Rule};
use redlimit::store::RedisStore;
use redlimit::{Limit, Policy, RateLimitLayer};
use support::*;

const DEADLINE: Duration = Duration::from_millis(100);
/// A generous bound for "answered within the deadline", far above it, far below a hang.
const ANSWERED_WITHIN: Duration = Duration::from_secs(2);

async fn layer(server: &RedisServer, mode: OnStoreError) -> RateLimitLayer {
    let store = RedisStore::builder(server.url())
        .prefix(unique_prefix("fail"))
        .connect()
        .await
        .unwrap();
    RateLimitLayer::builder(
        store,
        Policy::new("p", [Limit::gcra(2, Duration::from_secs(3600)).unwrap()]).unwrap(),
    )
    .store_deadline(DEADLINE)
    .on_store_error(mode)
    .build()
    .expect("valid layer")
}

#[tokio::test]
async fn fails_open_when_redis_dies_and_resumes_when_it_returns() {
    let mut server = RedisServer::start();
    let app = app(layer(&server, OnStoreError::Open).await);
    assert_eq!(status_of(&app, "10.0.0.1").await, StatusCode::OK);
    assert_eq!(status_of(&app, "10.0.0.1").await, StatusCode::OK);
    assert_eq!(
        status_of(&app, "10.0.0.1").await,
        StatusCode::TOO_MANY_REQUESTS
    );

    server.kill();
    // The denial stands, Redis or not (the deny cache: Redis would deny it too).
    let res = send(&app, request("/", "10.0.0.1", &[])).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    for _ in 0..20 {
        let started = Instant::now();
        let res = send(&app, request("/", "10.0.0.3", &[])).await;
        assert_eq!(res.status(), StatusCode::OK, "fail open");
        assert_eq!(header(&res, "x-ratelimit-limit"), "", "no state known");
        assert!(
            started.elapsed() < ANSWERED_WITHIN,
            "waited {:?}",
            started.elapsed()
        );
    }

    // Back, empty: limiting resumes (the fresh Redis has forgotten the old count).
    server.restart();
    let resumed = eventually(Duration::from_secs(15), async || {
        let res = send(&app, request("/", "10.0.0.2", &[])).await;
        res.status() == StatusCode::TOO_MANY_REQUESTS
    })
    .await;
    assert!(resumed, "limiting did not resume after Redis came back");
}

#[tokio::test]
async fn fail_closed_answers_503_never_429() {
    let mut server = RedisServer::start();
    let app = app(layer(&server, OnStoreError::Closed).await);
    assert_eq!(status_of(&app, "10.0.0.1").await, StatusCode::OK);
    server.kill();
    for _ in 0..5 {
        let started = Instant::now();
        let res = send(&app, request("/", "10.0.0.1", &[])).await;
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(header(&res, "retry-after"), "");
        assert!(started.elapsed() < ANSWERED_WITHIN);
        // An outer layer can tell why: the decision rides along.
        let decision = res
            .extensions()
            .get::<redlimit::Decision>()
            .expect("a decision");
        assert_eq!(decision.source(), redlimit::DecisionSource::FailClosed);
        assert!(!decision.is_allowed());
        assert!(decision.limits().is_empty());
    }
}

#[tokio::test]
async fn a_silent_redis_costs_at_most_the_deadline() {
    // A listener that accepts connections and never answers: the worst case.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}", silent.local_addr().unwrap());
    let store = RedisStore::builder(url).connect_lazy().unwrap();
    let app = app(RateLimitLayer::builder(
        store,
        Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap(),
    )
    .store_deadline(DEADLINE)
    .build()
    .expect("valid layer"));
    // The default failure mode decides in memory: the first request in, the others limited.
    for i in 0..5 {
        let started = Instant::now();
        let expected = if i == 0 {
            StatusCode::OK
        } else {
            StatusCode::TOO_MANY_REQUESTS
        };
        assert_eq!(status_of(&app, "10.0.0.1").await, expected);
        let waited = started.elapsed();
        assert!(waited < ANSWERED_WITHIN, "waited {waited:?}");
    }
}

/// A store that is always down.
struct Down;

impl redlimit::store::Store for Down {
    fn check(&self, _: &Policy, _: &redlimit::Key, _: u64) -> redlimit::store::Check {
        redlimit::store::Check::ready(Err(redlimit::StoreError::connection("down")))
    }
}

#[tokio::test]
async fn the_local_fallback_scales_every_rule_whatever_the_order_of_the_calls() {
    let policy =
        |name, n| Policy::new(name, [Limit::gcra(n, Duration::from_secs(3600)).unwrap()]).unwrap();
    let local = OnStoreError::Local { instances: 2 };
    let mode_first = RateLimitLayer::builder(Down, policy("all", 4))
        .on_store_error(local)
        .key(redlimit::key::PeerIp)
        .rule(
            Rule::new("/r", policy("r", 6))
                .unwrap()
                .key(redlimit::key::PeerIp),
        )
        .build()
        .expect("valid layer");
    let mode_last = RateLimitLayer::builder(Down, policy("all", 4))
        .rule(
            Rule::new("/r", policy("r", 6))
                .unwrap()
                .key(redlimit::key::PeerIp),
        )
        .key(redlimit::key::PeerIp)
        .on_store_error(local)
        .build()
        .expect("valid layer");
    for layer in [mode_first, mode_last] {
        let app = app(layer);
        // Half of each limit in this instance: 2 of 4, 3 of 6.
        for (path, admitted) in [("/", 2), ("/r", 3)] {
            for _ in 0..admitted {
                let res = send(&app, request(path, "10.0.0.1", &[])).await;
                assert_eq!(res.status(), StatusCode::OK, "{path}");
            }
            let res = send(&app, request(path, "10.0.0.1", &[])).await;
            assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS, "{path}");
            let decision = res.extensions().get::<redlimit::Decision>().unwrap();
            assert_eq!(decision.source(), redlimit::DecisionSource::Local);
        }
    }
}

#[tokio::test]
async fn clones_share_the_local_fallback() {
    let policy = Policy::new("p", [Limit::gcra(2, Duration::from_secs(3600)).unwrap()]).unwrap();
    let layer = RateLimitLayer::builder(Down, policy)
        .on_store_error(OnStoreError::local())
        .build()
        .expect("valid layer");
    let (a, b) = (app(layer.clone()), app(layer));
    assert_eq!(status_of(&a, "10.0.0.1").await, StatusCode::OK);
    assert_eq!(status_of(&b, "10.0.0.1").await, StatusCode::OK);
    assert_eq!(
        status_of(&a, "10.0.0.1").await,
        StatusCode::TOO_MANY_REQUESTS
    );
}

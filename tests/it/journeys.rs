//! The journeys `scripts/journeys.py` counts: each test warms its path up (connections made,
//! scripts loaded, overrides read), then runs one journey between `journey_begins` and
//! `journey_ends`, where the script records which of the crate's functions run. Run alone,
//! they are ordinary tests of the same answers.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use http::{Response, StatusCode};
use redlimit::RateLimitLayer;
use redlimit::limiter::Limiter;
use redlimit::store::RedisStore;
use tower::ServiceExt;

use crate::support::{RedisServer, gcra_policy, request, unique_prefix};

/// A deadline a traced (slow) journey meets: its answer is the store's, not a timeout's.
const DEADLINE: Duration = Duration::from_secs(60);

/// Where the recording starts (a symbol `scripts/journeys.py` breaks on).
#[inline(never)]
fn journey_begins() {
    std::hint::black_box(());
}

/// Where the recording ends.
#[inline(never)]
fn journey_ends() {
    std::hint::black_box(());
}

/// A store whose override poll leaves a slow (traced) journey alone.
async fn store(server: &RedisServer, name: &str) -> RedisStore {
    RedisStore::builder(server.url())
        .prefix(unique_prefix(name))
        .override_poll(Duration::from_secs(3600))
        .connect()
        .await
        .expect("connect to the test redis")
}

/// (a) An HTTP request through the Tower layer, denied by Redis (not the deny cache): 429.
#[tokio::test]
async fn an_http_request_denied_on_redis() {
    let server = RedisServer::start();
    let policy = gcra_policy("api", 1, Duration::from_secs(3600));
    let layer = RateLimitLayer::builder(store(&server, "journey-a").await, policy);
    let layer = layer.store_deadline(DEADLINE).build().unwrap();
    let service = tower::ServiceBuilder::new()
        .layer(layer)
        .service(tower::service_fn(|_| async {
            Ok::<_, Infallible>(Response::new(Body::empty()))
        }));
    let send = |ip: &'static str| service.clone().oneshot(request("/", ip, &[]));
    // Warm-up: another client admitted then denied, this one admitted.
    assert_eq!(send("203.0.113.1").await.unwrap().status(), StatusCode::OK);
    assert_eq!(
        send("203.0.113.1").await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(send("203.0.113.2").await.unwrap().status(), StatusCode::OK);
    journey_begins();
    let response = send("203.0.113.2").await.unwrap();
    journey_ends();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
}

/// (c) `Limiter::acquire` on Redis: a permit booked by a reservation.
#[tokio::test]
async fn an_acquire_on_redis() {
    let server = RedisServer::start();
    let policy = gcra_policy("upstream", 1000, Duration::from_secs(1));
    let limiter = Limiter::builder(store(&server, "journey-c").await, policy);
    let limiter = limiter.store_deadline(DEADLINE).build();
    drop(limiter.acquire("warm", 1).await.expect("a permit"));
    drop(limiter.acquire("key", 1).await.expect("a permit"));
    journey_begins();
    let permit = limiter.acquire("key", 1).await;
    journey_ends();
    assert!(
        permit.expect("a permit").slot().is_some(),
        "booked by a reservation"
    );
}

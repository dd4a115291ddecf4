//! The layer over HTTP: headers on allowed and denied responses, the decision for handlers,
//! custom rejections, costs, missing keys, and composition with axum and tower.

use crate::support;

use std::convert::Infallible;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::routing::get;
use axum::{Extension, Router};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use redlimit::key::{Global, Route};
use redlimit::layer::{HeaderStyle, MissingKey, OnStoreError};
use redlimit::store::{MemoryStore, RedisStore};
use redlimit::{Decision, DecisionSource, Limit, Policy, RateLimitLayer};
use support::*;
use tower::{ServiceBuilder, ServiceExt};

fn policy(limit: Limit) -> Policy {
    Policy::new("api", [limit]).unwrap()
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

async fn headers_on_allowed_and_denied(layer: RateLimitLayer) {
    let app = app(layer);
    for left in ["2", "1", "0"] {
        let res = send(&app, request("/", "203.0.113.7", &[])).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(header(&res, "x-ratelimit-limit"), "3");
        assert_eq!(header(&res, "x-ratelimit-remaining"), left);
        let reset: u64 = header(&res, "x-ratelimit-reset").parse().unwrap();
        assert!(
            reset >= unix_now() && reset <= unix_now() + 61,
            "reset {reset}"
        );
        assert_eq!(header(&res, "retry-after"), "");
        assert_eq!(body_text(res).await, "ok");
    }
    let res = send(&app, request("/", "203.0.113.7", &[])).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&res, "x-ratelimit-limit"), "3");
    assert_eq!(header(&res, "x-ratelimit-remaining"), "0");
    let retry: u64 = header(&res, "retry-after").parse().unwrap();
    assert!((1..=60).contains(&retry), "retry-after {retry}");
    assert_eq!(body_text(res).await, "Too Many Requests\n");
    // Another client has its own quota.
    assert_eq!(status_of(&app, "203.0.113.8").await, StatusCode::OK);
}

#[tokio::test]
async fn headers_with_the_memory_store() {
    let layer = RateLimitLayer::new(
        MemoryStore::new(),
        policy(Limit::sliding_log(3, Duration::from_secs(60)).unwrap()),
    );
    headers_on_allowed_and_denied(layer).await;
}

#[tokio::test]
async fn headers_with_the_redis_store() {
    let server = RedisServer::start();
    let store = RedisStore::builder(server.url())
        .prefix(unique_prefix("headers"))
        .connect()
        .await
        .unwrap();
    headers_on_allowed_and_denied(RateLimitLayer::new(
        store,
        policy(Limit::gcra(3, Duration::from_secs(60)).unwrap()),
    ))
    .await;
}

#[tokio::test]
async fn retry_after_is_rounded_up_and_at_least_one_second() {
    let layer = RateLimitLayer::new(
        MemoryStore::new(),
        policy(Limit::gcra(10, Duration::from_secs(1)).unwrap()),
    );
    let app = app(layer);
    for _ in 0..10 {
        assert_eq!(status_of(&app, "10.0.0.1").await, StatusCode::OK);
    }
    let res = send(&app, request("/", "10.0.0.1", &[])).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&res, "retry-after"), "1", "100 ms rounds up to 1 s");
}

#[tokio::test]
async fn ietf_draft_headers() {
    let layer = RateLimitLayer::builder(
        MemoryStore::new(),
        policy(Limit::fixed_window(5, Duration::from_secs(60)).unwrap()),
    )
    .headers(HeaderStyle::Ietf)
    .build()
    .expect("valid layer");
    let res = send(&app(layer), request("/", "10.0.0.1", &[])).await;
    assert_eq!(header(&res, "ratelimit-policy"), "\"api\";q=5;w=60");
    assert!(header(&res, "ratelimit").starts_with("\"api\";r=4;t="));
    assert_eq!(header(&res, "x-ratelimit-limit"), "");
}

#[tokio::test]
async fn the_handler_sees_the_decision() {
    let layer = RateLimitLayer::new(
        MemoryStore::new(),
        policy(Limit::gcra(5, Duration::from_secs(60)).unwrap()),
    );
    let app = Router::new()
        .route(
            "/",
            get(|Extension(d): Extension<Decision>| async move {
                format!("{} {:?} {:?}", d.policy(), d.remaining(), d.source())
            }),
        )
        .layer(layer);
    let res = send(&app, request("/", "10.0.0.1", &[])).await;
    assert_eq!(body_text(res).await, "api Some(4) Store");
}

#[tokio::test]
async fn custom_rejection_keeps_the_rate_limit_headers() {
    let layer = RateLimitLayer::builder(
        MemoryStore::new(),
        policy(Limit::gcra(1, Duration::from_secs(60)).unwrap()),
    )
    .on_rejection(|d: &Decision| {
        let mut res = Response::new(Bytes::from(format!(
            "{{\"denied_by\":{}}}",
            d.denied_by().unwrap()
        )));
        *res.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        res
    })
    .build()
    .expect("valid layer");
    let app = app(layer);
    status_of(&app, "10.0.0.1").await;
    let res = send(&app, request("/", "10.0.0.1", &[])).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&res, "retry-after"), "60");
    assert_eq!(header(&res, "x-ratelimit-remaining"), "0");
    assert_eq!(body_text(res).await, "{\"denied_by\":0}");
}

#[tokio::test]
async fn cost_from_the_request_and_an_impossible_cost() {
    let layer = RateLimitLayer::builder(
        MemoryStore::new(),
        policy(Limit::token_bucket(10, Duration::from_secs(60)).unwrap()),
    )
    .cost(|parts: &http::request::Parts| {
        parts
            .headers
            .get("x-cost")
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(1)
    })
    .build()
    .expect("valid layer");
    let app = app(layer);
    let res = send(&app, request("/", "10.0.0.1", &[("x-cost", "7")])).await;
    assert_eq!(header(&res, "x-ratelimit-remaining"), "3");
    let res = send(&app, request("/", "10.0.0.1", &[("x-cost", "11")])).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        header(&res, "retry-after"),
        "",
        "retrying can never succeed"
    );
    assert_eq!(
        body_text(res).await,
        "request cost exceeds the rate limit\n"
    );
    let res = send(&app, request("/", "10.0.0.1", &[("x-cost", "4")])).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_ne!(header(&res, "retry-after"), "");
    let res = send(&app, request("/", "10.0.0.1", &[("x-cost", "3")])).await;
    assert_eq!(
        res.status(),
        StatusCode::OK,
        "denied requests consumed nothing"
    );
}

#[tokio::test]
async fn missing_keys() {
    let limit = Limit::gcra(1, Duration::from_secs(60)).unwrap();
    // Default: fall back to the peer IP.
    let app1 = app(RateLimitLayer::builder(MemoryStore::new(), policy(limit))
        .key(api_key())
        .build()
        .expect("valid layer"));
    assert_eq!(status_of(&app1, "10.0.0.1").await, StatusCode::OK);
    assert_eq!(
        status_of(&app1, "10.0.0.1").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    let with_key = request("/", "10.0.0.1", &[("x-api-key", "abc")]);
    assert_eq!(send(&app1, with_key).await.status(), StatusCode::OK);
    // Reject.
    let app2 = app(RateLimitLayer::builder(MemoryStore::new(), policy(limit))
        .key(api_key())
        .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED))
        .build()
        .expect("valid layer"));
    assert_eq!(status_of(&app2, "10.0.0.1").await, StatusCode::UNAUTHORIZED);
    // Allow.
    let app3 = app(RateLimitLayer::builder(MemoryStore::new(), policy(limit))
        .key(api_key())
        .on_missing_key(MissingKey::Allow)
        .build()
        .expect("valid layer"));
    for _ in 0..3 {
        assert_eq!(status_of(&app3, "10.0.0.1").await, StatusCode::OK);
    }
    // No key and no peer address: a misconfigured server, answered 500 unless letting such
    // requests through was chosen (tests/it/layer/undecided.rs serves it on a socket).
    let no_peer = || Request::get("/").body(Body::empty()).unwrap();
    let res = send(
        &app(RateLimitLayer::new(MemoryStore::new(), policy(limit))),
        no_peer(),
    )
    .await;
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let quiet = RateLimitLayer::builder(MemoryStore::new(), policy(limit))
        .on_missing_key(MissingKey::PeerIpOrAllow)
        .build()
        .expect("valid layer");
    let res = send(&app(quiet), no_peer()).await;
    assert_eq!(res.status(), StatusCode::OK);
}

#[tokio::test]
async fn clones_and_separate_services_share_one_limit() {
    let layer = RateLimitLayer::builder(
        MemoryStore::new(),
        policy(Limit::fixed_window(2, Duration::from_secs(3600)).unwrap()),
    )
    .key(Global)
    .build()
    .expect("valid layer");
    let a = app(layer.clone());
    let b = app(layer);
    assert_eq!(status_of(&a, "10.0.0.1").await, StatusCode::OK);
    assert_eq!(status_of(&b, "10.0.0.2").await, StatusCode::OK);
    assert_eq!(
        status_of(&a, "10.0.0.3").await,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn route_layer_and_route_keys() {
    let strict = RateLimitLayer::new(
        MemoryStore::new(),
        Policy::new("login", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap(),
    );
    let loose = RateLimitLayer::builder(
        MemoryStore::new(),
        policy(Limit::gcra(100, Duration::from_secs(60)).unwrap()),
    )
    .key(Route)
    .build()
    .expect("valid layer");
    let app = Router::new()
        .route("/login", get(|| async { "ok" }).route_layer(strict))
        .route("/users/{id}", get(|| async { "ok" }))
        .layer(loose);
    assert_eq!(
        send(&app, request("/login", "10.0.0.1", &[]))
            .await
            .status(),
        StatusCode::OK
    );
    let res = send(&app, request("/login", "10.0.0.1", &[])).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        header(&res, "x-ratelimit-limit"),
        "1",
        "the inner (route) layer's headers win"
    );
    let res = send(&app, request("/users/1", "10.0.0.1", &[])).await;
    assert_eq!(header(&res, "x-ratelimit-remaining"), "99");
    let res = send(&app, request("/users/2", "10.0.0.2", &[])).await;
    assert_eq!(
        header(&res, "x-ratelimit-remaining"),
        "98",
        "one quota for the matched route"
    );
}

#[tokio::test]
async fn works_in_a_tower_service_builder_with_plain_socket_addr() {
    let layer = RateLimitLayer::new(
        MemoryStore::new(),
        policy(Limit::gcra(1, Duration::from_secs(60)).unwrap()),
    );
    let svc = ServiceBuilder::new()
        .layer(layer)
        .service(tower::service_fn(|_: Request<String>| async {
            Ok::<_, Infallible>(Response::new(String::from("hi")))
        }));
    let call = |ip: &str| {
        let mut req = Request::new(String::new());
        req.extensions_mut()
            .insert(format!("{ip}:1").parse::<std::net::SocketAddr>().unwrap());
        svc.clone().oneshot(req)
    };
    assert_eq!(call("10.0.0.1").await.unwrap().status(), StatusCode::OK);
    assert_eq!(
        call("10.0.0.1").await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn fail_open_decision_is_visible_to_the_handler() {
    // Nothing listens on port 1: every check fails fast.
    let store = RedisStore::builder("redis://127.0.0.1:1")
        .connect_lazy()
        .unwrap();
    let layer = RateLimitLayer::builder(
        store,
        policy(Limit::gcra(1, Duration::from_secs(60)).unwrap()),
    )
    .on_store_error(OnStoreError::Open)
    .build()
    .expect("valid layer");
    let app = source_app(layer);
    for _ in 0..3 {
        let res = send(&app, request("/", "10.0.0.1", &[])).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(header(&res, "x-ratelimit-limit"), "");
        assert_eq!(
            body_text(res).await,
            format!("{:?}", DecisionSource::FailOpen)
        );
    }
}

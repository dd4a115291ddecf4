//! One layer on a whole router: policies and keys per route and method, first match wins,
//! an allow-list, and the layer's own policy for everything else.

use crate::support;

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::{get, post};
use http::{Request, StatusCode};
use redlimit::key::{IpRanges, PeerIp};
use redlimit::layer::Rule;
use redlimit::store::MemoryStore;
use redlimit::{ConfigError, KeyExtractor, Limit, Policy, RateLimitLayer};
use support::*;

fn router(layer: RateLimitLayer) -> Router {
    Router::new()
        .route("/login", post(|| async { "ok" }).get(|| async { "form" }))
        .route("/v1/{*rest}", get(|| async { "ok" }))
        .route("/users/{id}", get(|| async { "ok" }))
        .route("/healthz", get(|| async { "ok" }))
        .layer(layer)
}

fn post_login(ip: &str) -> Request<Body> {
    let mut req = request("/login", ip, &[]);
    *req.method_mut() = http::Method::POST;
    req
}

fn layer() -> RateLimitLayer {
    RateLimitLayer::builder(
        MemoryStore::new(),
        Policy::new(
            "default",
            [Limit::gcra(100, Duration::from_secs(60)).unwrap()],
        )
        .unwrap(),
    )
    .rule(
        Rule::new(
            "POST /login",
            Policy::new(
                "login",
                [Limit::sliding_log(2, Duration::from_secs(60)).unwrap()],
            )
            .unwrap(),
        )
        .unwrap()
        .key(PeerIp),
    )
    .rule(
        Rule::new(
            "/v1/*",
            Policy::new(
                "api",
                [Limit::fixed_window(3, Duration::from_secs(3600)).unwrap()],
            )
            .unwrap(),
        )
        .unwrap()
        .key(api_key().or_else(PeerIp)),
    )
    .rule(
        Rule::new(
            "/users/{id}",
            Policy::new("users", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap(),
        )
        .unwrap()
        .key(redlimit::key::Route),
    )
    .allow_ips(IpRanges::parse(["192.0.2.0/24"]).unwrap())
    .allow_if(|parts: &http::request::Parts| parts.uri.path() == "/healthz")
    .build()
    .expect("valid layer")
}

#[tokio::test]
async fn each_route_gets_its_own_policy_and_key() {
    let app = router(layer());
    // POST /login: 2 per minute per IP.
    assert_eq!(
        send(&app, post_login("10.0.0.1")).await.status(),
        StatusCode::OK
    );
    let res = send(&app, post_login("10.0.0.1")).await;
    assert_eq!(header(&res, "x-ratelimit-limit"), "2");
    assert_eq!(
        send(&app, post_login("10.0.0.1")).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        send(&app, post_login("10.0.0.2")).await.status(),
        StatusCode::OK
    );
    // GET /login is not the POST rule: the default policy.
    let res = send(&app, request("/login", "10.0.0.1", &[])).await;
    assert_eq!(header(&res, "x-ratelimit-limit"), "100");

    // /v1/*: 3 per hour per API key, the peer IP without one.
    for _ in 0..3 {
        let res = send(&app, request("/v1/a", "10.0.0.1", &[("x-api-key", "k1")])).await;
        assert_eq!(res.status(), StatusCode::OK);
    }
    let res = send(&app, request("/v1/b/c", "10.0.0.2", &[("x-api-key", "k1")])).await;
    assert_eq!(
        res.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "the key, not the IP, counts"
    );
    let res = send(&app, request("/v1/a", "10.0.0.1", &[("x-api-key", "k2")])).await;
    assert_eq!(header(&res, "x-ratelimit-remaining"), "2");

    // /users/{id}: matched by axum's route, one quota for the route.
    assert_eq!(
        status_of_path(&app, "/users/1", "10.0.0.1").await,
        StatusCode::OK
    );
    assert_eq!(
        status_of_path(&app, "/users/2", "10.0.0.3").await,
        StatusCode::TOO_MANY_REQUESTS
    );
}

async fn status_of_path(app: &Router, path: &str, ip: &str) -> StatusCode {
    send(app, request(path, ip, &[])).await.status()
}

#[tokio::test]
async fn the_allow_list_skips_limiting() {
    let app = router(layer());
    for _ in 0..5 {
        let res = send(&app, post_login("192.0.2.9")).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(header(&res, "x-ratelimit-limit"), "", "not limited at all");
        assert_eq!(
            status_of_path(&app, "/healthz", "10.9.9.9").await,
            StatusCode::OK
        );
    }
}

#[tokio::test]
async fn a_per_route_layer_leaves_other_routes_alone() {
    let layer = RateLimitLayer::builder_per_route(MemoryStore::new())
        .rule(
            Rule::new(
                "POST /login",
                Policy::new("login", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap(),
            )
            .unwrap()
            .key(PeerIp),
        )
        .build()
        .expect("valid layer");
    let app = router(layer);
    assert_eq!(
        send(&app, post_login("10.0.0.1")).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        send(&app, post_login("10.0.0.1")).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    for _ in 0..5 {
        let res = send(&app, request("/v1/x", "10.0.0.1", &[])).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(header(&res, "x-ratelimit-limit"), "");
    }
}

#[test]
fn bad_rules_are_typed_errors() {
    let policy = || Policy::new("p", [Limit::gcra(1, Duration::from_secs(1)).unwrap()]).unwrap();
    assert!(Rule::new("login", policy()).is_err());
    assert!(Rule::new("GET  ", policy()).is_err());
    assert!(IpRanges::parse(["not an ip"]).is_err());
    assert!(IpRanges::parse(["10.0.0.0/33"]).is_err());
    assert!(Rule::new("GET /x", policy()).is_ok());
    // A key on a layer without a policy of its own would key nothing: refused.
    let keyed = RateLimitLayer::builder_per_route(MemoryStore::new()).key(PeerIp);
    assert_eq!(keyed.build().unwrap_err(), ConfigError::KeyWithoutPolicy);
}

#[tokio::test]
async fn rules_added_after_the_key_keep_their_own_keys() {
    // The layer's key applies to its own policy only, whatever the order of the calls.
    let policy =
        |name| Policy::new(name, [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    let layer = RateLimitLayer::builder(MemoryStore::new(), policy("default"))
        .key(redlimit::key::Global)
        .rule(
            Rule::new("/users/{id}", policy("users"))
                .unwrap()
                .key(PeerIp),
        )
        .build()
        .expect("valid layer");
    let app = router(layer);
    assert_eq!(
        status_of_path(&app, "/users/1", "10.0.0.1").await,
        StatusCode::OK
    );
    assert_eq!(
        status_of_path(&app, "/users/1", "10.0.0.2").await,
        StatusCode::OK,
        "per peer on the route"
    );
    assert_eq!(
        status_of_path(&app, "/healthz", "10.0.0.1").await,
        StatusCode::OK
    );
    assert_eq!(
        status_of_path(&app, "/healthz", "10.0.0.2").await,
        StatusCode::TOO_MANY_REQUESTS,
        "one global quota elsewhere"
    );
}

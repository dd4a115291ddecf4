//! The rate limit service's admin API (`redlimit::rls::admin::router`) in front of real
//! stores: a descriptor's counters inspected and reset, its limits overridden, shadow mode
//! set, each seen by the `ShouldRateLimit` answers; two services on one Redis follow each
//! other's changes; hostile input gets a typed JSON answer, never a panic or a 500.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::{Request, StatusCode};
use redlimit::admin::AdminToken;
use redlimit::rls::config::RlsConfig;
use redlimit::rls::proto::envoy::service::ratelimit::v3::RateLimitResponse;
use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use redlimit::rls::{RateLimitService, admin};
use redlimit::store::{MemoryStore, RedisStore, Store};
use serde_json::{Value, json};

use super::service::{d, req, stores};
use crate::support::{RedisServer, body_text, eventually, send, unique_prefix};

const TOKEN: &str = "s3cret-rls-admin";
const AUTH: &str = "Bearer s3cret-rls-admin";

/// Day-long windows: no test runs across a window's end (but one started at midnight UTC).
const CONFIG: &str = "
domain: test
descriptors:
  - key: ip
    rate_limit: {unit: day, requests_per_unit: 2, name: per_ip}
  - key: two
    rate_limits:
      - {unit: day, requests_per_unit: 2}
      - {unit: day, requests_per_unit: 3, algorithm: gcra}
  - key: banned
    rate_limit: {unit: day, requests_per_unit: 0}
  - key: free
    rate_limit: {unlimited: true}
";

fn service(store: Arc<dyn Store>) -> RateLimitService {
    let config = RlsConfig::parse([("test.yaml", CONFIG)], false).expect("config");
    RateLimitService::builder(store)
        .config(config)
        .store_deadline(Duration::from_secs(5))
        .build()
}

fn router(service: &RateLimitService) -> Router {
    admin::router(service.clone(), AdminToken::new(TOKEN).unwrap())
}

/// An admin request with `auth` (none: no header) and an optional JSON body.
async fn call_as(
    admin: &Router,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: Option<&str>,
) -> (StatusCode, Value) {
    let mut builder = Request::builder().method(method).uri(path);
    if let Some(auth) = auth {
        builder = builder.header("authorization", auth);
    }
    if body.is_some() {
        builder = builder.header("content-type", "application/json");
    }
    let request = builder
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned())))
        .expect("request");
    let response = send(admin, request).await;
    let status = response.status();
    let text = body_text(response).await;
    let json =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {text}"));
    (status, json)
}

async fn call(admin: &Router, method: &str, path: &str, body: Option<&str>) -> (StatusCode, Value) {
    call_as(admin, method, path, Some(AUTH), body).await
}

/// One hit of descriptor `ip=VALUE`.
async fn hit(service: &RateLimitService, ip: &str) -> RateLimitResponse {
    service
        .should_rate_limit(req(vec![d(&[("ip", ip)])], 1))
        .await
        .expect("ShouldRateLimit")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_are_inspected_reset_and_overridden_as_envoy_sees_them() {
    let (_server, stores) = stores("rls-admin").await;
    for (kind, store) in stores {
        let service = service(store);
        let admin = router(&service);
        let path = "/rls/test/counters?ip=10.0.0.1";

        let (status, fresh) = call(&admin, "GET", path, None).await;
        assert_eq!(status, 200, "{kind}: {fresh}");
        assert_eq!(fresh["rule"], "test.ip", "{kind}");
        assert_eq!(fresh["mode"], "enforce", "{kind}");
        assert_eq!(
            fresh["descriptor"],
            json!([{"key": "ip", "value": "10.0.0.1"}])
        );
        let limit = &fresh["limits"][0];
        assert_eq!(
            (limit["limit"].as_u64(), limit["remaining"].as_u64()),
            (Some(2), Some(2)),
            "{kind}"
        );
        assert_eq!(limit["key"], "test%00ip%0010.0.0.1%00%230", "{kind}");
        assert_eq!(
            (limit["name"].as_str(), limit["unit"].as_str()),
            (Some("per_ip"), Some("DAY"))
        );

        // Inspecting consumes nothing; hits count.
        assert_eq!(
            hit(&service, "10.0.0.1").await.overall_code(),
            Code::Ok,
            "{kind}"
        );
        let (_, after) = call(&admin, "GET", path, None).await;
        assert_eq!(after["limits"][0]["remaining"], 1, "{kind}: {after}");
        assert_eq!(
            hit(&service, "10.0.0.1").await.overall_code(),
            Code::Ok,
            "{kind}"
        );
        // Denied twice: the second from the deny cache.
        for _ in 0..2 {
            assert_eq!(
                hit(&service, "10.0.0.1").await.overall_code(),
                Code::OverLimit,
                "{kind}"
            );
        }
        let (_, over) = call(&admin, "GET", path, None).await;
        assert_eq!(over["limits"][0]["remaining"], 0, "{kind}: {over}");
        assert!(
            over["limits"][0]["retry_after"].as_u64() > Some(0),
            "{kind}: {over}"
        );

        // A reset: the counter is gone, the cached denial with it.
        let (status, reset) = call(&admin, "DELETE", path, None).await;
        assert_eq!(status, 200, "{kind}: {reset}");
        assert_eq!(
            reset["keys"],
            json!(["test%00ip%0010.0.0.1%00%230"]),
            "{kind}"
        );
        assert_eq!(
            hit(&service, "10.0.0.1").await.overall_code(),
            Code::Ok,
            "{kind}: reset"
        );

        // An override: 10 a day for this address alone, its count kept (1 used).
        let over_path = "/rls/test/override?ip=10.0.0.1";
        let (status, set) = call(&admin, "PUT", over_path, Some(r#"{"limits": ["10/1d"]}"#)).await;
        assert_eq!(status, 200, "{kind}: {set}");
        assert_eq!(set["key"], "test%00ip%0010.0.0.1%00", "{kind}");
        assert_eq!(set["limits"], json!(["10/1d"]), "{kind}");
        let answer = hit(&service, "10.0.0.1").await;
        assert_eq!(answer.overall_code(), Code::Ok, "{kind}");
        let status = &answer.statuses[0];
        assert_eq!(
            status.current_limit.as_ref().unwrap().requests_per_unit,
            10,
            "{kind}"
        );
        assert_eq!(status.limit_remaining, 8, "{kind}: the count carried over");
        let other = hit(&service, "10.0.0.2").await;
        assert_eq!(
            other.statuses[0]
                .current_limit
                .as_ref()
                .unwrap()
                .requests_per_unit,
            2
        );
        let (_, read) = call(&admin, "GET", over_path, None).await;
        assert_eq!(read["limits"], json!(["10/1d"]), "{kind}");
        let (_, counters) = call(&admin, "GET", path, None).await;
        assert_eq!(counters["overridden"], true, "{kind}");
        assert_eq!(counters["limits"][0]["limit"], 10, "{kind}");
        let (status, _) = call(&admin, "DELETE", over_path, None).await;
        assert_eq!(status, 200, "{kind}");
        let (status, gone) = call(&admin, "GET", over_path, None).await;
        assert_eq!(
            (status, &gone["error"]),
            (StatusCode::NOT_FOUND, &json!("no_override"))
        );
        assert_eq!(
            hit(&service, "10.0.0.1").await.overall_code(),
            Code::OverLimit,
            "{kind}"
        );

        // Several limits: one rate each, in order.
        let two = "/rls/test/override?two=x";
        let (status, _) = call(&admin, "PUT", two, Some(r#"{"limits": ["5/1d", "6/1d"]}"#)).await;
        assert_eq!(status, 200, "{kind}");
        let (_, counters) = call(&admin, "GET", "/rls/test/counters?two=x", None).await;
        let limits: Vec<_> = counters["limits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["limit"].clone())
            .collect();
        assert_eq!(limits, [json!(5), json!(6)], "{kind}: {counters}");

        // Shadow mode: for the descriptor, then for the domain.
        let shadow = "/rls/test/shadow?ip=10.0.0.1";
        let (status, on) = call(&admin, "PUT", shadow, Some(r#"{"shadow": true}"#)).await;
        assert_eq!(
            (status, &on["shadow"], &on["set"]),
            (StatusCode::OK, &json!(true), &json!(true))
        );
        let answer = hit(&service, "10.0.0.1").await;
        assert_eq!(answer.overall_code(), Code::Ok, "{kind}: shadow");
        // Counted and answered OK, as a rule's `shadow_mode` descriptor is.
        assert_eq!(answer.statuses[0].code(), Code::Ok, "{kind}");
        assert_eq!(answer.statuses[0].limit_remaining, 0, "{kind}: still counted");
        let (_, counters) = call(&admin, "GET", path, None).await;
        assert_eq!(counters["mode"], "shadow", "{kind}");
        let (status, back) = call(&admin, "DELETE", shadow, None).await;
        assert_eq!(
            (status, &back["shadow"], &back["set"]),
            (StatusCode::OK, &json!(false), &json!(false))
        );
        assert_eq!(
            hit(&service, "10.0.0.1").await.overall_code(),
            Code::OverLimit,
            "{kind}"
        );
        let (status, domain) = call(
            &admin,
            "PUT",
            "/rls/test/shadow",
            Some(r#"{"shadow": true}"#),
        )
        .await;
        assert_eq!(
            (status, &domain["key"]),
            (StatusCode::OK, &json!("test")),
            "{kind}: {domain}"
        );
        assert_eq!(
            hit(&service, "10.0.0.1").await.overall_code(),
            Code::Ok,
            "{kind}: domain shadow"
        );
        let (_, read) = call(&admin, "GET", "/rls/test/shadow", None).await;
        assert_eq!(read["shadow"], true, "{kind}");
        call(
            &admin,
            "PUT",
            "/rls/test/shadow",
            Some(r#"{"shadow": false}"#),
        )
        .await;
        assert_eq!(
            hit(&service, "10.0.0.1").await.overall_code(),
            Code::OverLimit,
            "{kind}"
        );
    }
}

/// Two stores of one fleet: one Redis, one prefix, each polling the other's changes often.
async fn fleet_store(server: &RedisServer, prefix: &str) -> Arc<dyn Store> {
    let store: RedisStore = RedisStore::builder(server.url())
        .prefix(prefix.to_owned())
        .override_poll(Duration::from_millis(50))
        .connect()
        .await
        .expect("connect to the test redis");
    Arc::new(store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_through_one_replica_governs_the_other() {
    let server = RedisServer::start();
    let prefix = unique_prefix("rls-admin-fleet");
    let one = service(fleet_store(&server, &prefix).await);
    let two = service(fleet_store(&server, &prefix).await);
    let admin = router(&one);
    let within = Duration::from_secs(10);

    // The second replica denies, and caches the denial (a day long).
    for _ in 0..2 {
        assert_eq!(hit(&two, "10.9.9.9").await.overall_code(), Code::Ok);
    }
    for _ in 0..2 {
        assert_eq!(hit(&two, "10.9.9.9").await.overall_code(), Code::OverLimit);
    }
    // Reset through the first: the second's deny cache lets the address through.
    let (status, _) = call(&admin, "DELETE", "/rls/test/counters?ip=10.9.9.9", None).await;
    assert_eq!(status, 200);
    assert!(
        eventually(within, async || hit(&two, "10.9.9.9").await.overall_code()
            == Code::Ok)
        .await,
        "the reset did not reach the other replica's deny cache"
    );

    // An override set through the first governs the second.
    let (status, _) = call(
        &admin,
        "PUT",
        "/rls/test/override?ip=10.9.9.9",
        Some(r#"{"limits": ["50/1d"]}"#),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        eventually(within, async || {
            let answer = hit(&two, "10.9.9.9").await;
            answer.statuses[0]
                .current_limit
                .as_ref()
                .map(|l| l.requests_per_unit)
                == Some(50)
        })
        .await,
        "the override did not reach the other replica"
    );
    // It stays in Redis: a replica started now applies it from its first request.
    let three = service(fleet_store(&server, &prefix).await);
    let answer = hit(&three, "10.9.9.9").await;
    assert_eq!(
        answer.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        50
    );

    // Shadow mode for the domain, set through the first, reaches the second.
    for _ in 0..3 {
        hit(&two, "10.9.9.7").await;
    }
    assert_eq!(hit(&two, "10.9.9.7").await.overall_code(), Code::OverLimit);
    call(
        &admin,
        "PUT",
        "/rls/test/shadow",
        Some(r#"{"shadow": true}"#),
    )
    .await;
    assert!(
        eventually(within, async || hit(&two, "10.9.9.7").await.overall_code()
            == Code::Ok)
        .await,
        "shadow mode did not reach the other replica"
    );
}

#[tokio::test]
async fn hostile_requests_get_typed_answers() {
    let service = service(Arc::new(MemoryStore::new()));
    let admin = router(&service);
    // The token first: nothing is reached without it, not even a 404.
    for path in ["/rls/test/counters?ip=1", "/nope"] {
        for auth in [None, Some("Bearer wrong"), Some("Basic czNjcmV0")] {
            let (status, body) = call_as(&admin, "GET", path, auth, None).await;
            assert_eq!(status, 401, "{path} {auth:?}");
            assert!(body["error"].is_string());
        }
    }
    let huge = format!(r#"{{"limits": ["{}"]}}"#, "9".repeat(10_000));
    let too_many = format!("/rls/test/counters?{}", "a=b&".repeat(40));
    let long_query = format!("/rls/test/counters?ip={}", "x".repeat(10_000));
    let cases: Vec<(&str, String, Option<&str>, u16, &str)> = vec![
        (
            "GET",
            "/rls/nope/counters?ip=1".into(),
            None,
            404,
            "no_such_domain",
        ),
        (
            "GET",
            "/rls/test/counters?nothing=1".into(),
            None,
            404,
            "no_rule",
        ),
        (
            "GET",
            "/rls/test/counters?free=1".into(),
            None,
            404,
            "no_rule",
        ),
        (
            "GET",
            "/rls/test/counters".into(),
            None,
            400,
            "bad_descriptor",
        ),
        (
            "GET",
            "/rls/test/counters?ip".into(),
            None,
            400,
            "bad_descriptor",
        ),
        (
            "GET",
            "/rls/test/counters?=1".into(),
            None,
            400,
            "bad_descriptor",
        ),
        (
            "GET",
            "/rls/test/counters?ip=%FF".into(),
            None,
            400,
            "bad_descriptor",
        ),
        ("GET", too_many, None, 400, "bad_descriptor"),
        ("GET", long_query, None, 400, "bad_descriptor"),
        (
            "GET",
            "/rls/%FF/counters?ip=1".into(),
            None,
            400,
            "bad_request",
        ),
        (
            "PUT",
            "/rls/test/override?ip=1".into(),
            Some("{"),
            400,
            "bad_request",
        ),
        (
            "PUT",
            "/rls/test/override?ip=1".into(),
            Some(r#"{"limits": 5}"#),
            400,
            "bad_request",
        ),
        (
            "PUT",
            "/rls/test/override?ip=1".into(),
            Some(r#"{"limits": [], "x": 1}"#),
            400,
            "bad_request",
        ),
        (
            "PUT",
            "/rls/test/override?ip=1".into(),
            Some(huge.as_str()),
            413,
            "bad_request",
        ),
        (
            "PUT",
            "/rls/test/override?ip=1".into(),
            Some(r#"{"limits": []}"#),
            400,
            "bad_override",
        ),
        (
            "PUT",
            "/rls/test/override?ip=1".into(),
            Some(r#"{"limits": ["0/1s"]}"#),
            400,
            "bad_override",
        ),
        (
            "PUT",
            "/rls/test/override?ip=1".into(),
            Some(r#"{"limits": ["lots"]}"#),
            400,
            "bad_override",
        ),
        (
            "PUT",
            "/rls/test/override?two=1".into(),
            Some(r#"{"limits": ["1/1s"]}"#),
            400,
            "bad_override",
        ),
        (
            "PUT",
            "/rls/test/override?banned=1".into(),
            Some(r#"{"limits": ["1/1s"]}"#),
            400,
            "bad_override",
        ),
        (
            "PUT",
            "/rls/test/override?free=1".into(),
            Some(r#"{"limits": []}"#),
            400,
            "bad_override",
        ),
        (
            "PUT",
            "/rls/test/override?nothing=1".into(),
            Some(r#"{"limits": ["1/1s"]}"#),
            404,
            "no_rule",
        ),
        (
            "PUT",
            "/rls/test/shadow?nothing=1".into(),
            Some(r#"{"shadow": true}"#),
            404,
            "no_rule",
        ),
        (
            "PUT",
            "/rls/test/shadow".into(),
            Some(r#"{"shadow": "yes"}"#),
            400,
            "bad_request",
        ),
        (
            "DELETE",
            "/rls/test/override?ip=1".into(),
            None,
            404,
            "no_override",
        ),
        (
            "DELETE",
            "/rls/test/shadow".into(),
            None,
            404,
            "no_override",
        ),
        (
            "POST",
            "/rls/test/counters?ip=1".into(),
            None,
            405,
            "method_not_allowed",
        ),
        ("GET", "/rls/test".into(), None, 404, "not_found"),
    ];
    for (method, path, body, status, code) in cases {
        let (got, answer) = call(&admin, method, &path, body).await;
        assert_eq!(
            (got.as_u16(), answer["error"].as_str()),
            (status, Some(code)),
            "{method} {path:.60}: {answer}"
        );
    }
    // A body without a JSON content type.
    let request = Request::put("/rls/test/override?ip=1")
        .header("authorization", AUTH)
        .body(Body::from(r#"{"limits": ["1/1s"]}"#))
        .unwrap();
    assert_eq!(send(&admin, request).await.status(), 415);
    // Nothing changed the service.
    assert_eq!(hit(&service, "1").await.overall_code(), Code::Ok);
}

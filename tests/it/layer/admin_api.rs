//! The admin API (`redlimit::admin::router`) in front of a real store: the token is required,
//! inspect/reset and overrides round-trip through the layer that serves requests, and hostile
//! input gets a typed JSON answer, never a panic or a 500.

use crate::support;

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::{Request, StatusCode};
use redlimit::admin::{self, AdminToken};
use redlimit::store::{Check, MemoryStore, Store};
use redlimit::{Key, Limit, Policy, RateLimitLayer};
use serde_json::{Value, json};
use support::{RedisServer, app, body_text, send, status_of, unique_prefix};

const TOKEN: &str = "s3cret-admin-token";

fn policy() -> Policy {
    Policy::new(
        "api",
        [
            Limit::sliding_log(2, Duration::from_secs(3600)).unwrap(),
            Limit::gcra(100, Duration::from_secs(60)).unwrap(),
        ],
    )
    .unwrap()
}

fn admin_router(layer: &RateLimitLayer) -> Router {
    admin::router(layer.handle(), AdminToken::new(TOKEN).unwrap())
}

/// An admin request with the token (unless `auth` says otherwise) and an optional JSON body.
async fn call(
    admin: &Router,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: Option<&str>,
) -> (StatusCode, Value, http::HeaderMap) {
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
    let (status, headers) = (response.status(), response.headers().clone());
    let text = body_text(response).await;
    let json = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {text}"))
    };
    (status, json, headers)
}

const AUTH: Option<&str> = Some("Bearer s3cret-admin-token");
const KEY_PATH: &str = "/keys/api/ip%3A127.0.0.1";
const OVERRIDE_PATH: &str = "/overrides/api/ip%3A127.0.0.1";

/// The flow every store must pass: auth, inspect, real decisions, reset, overrides.
async fn round_trips(layer: RateLimitLayer) {
    let admin = admin_router(&layer);
    let app = app(layer);

    // No token, a wrong one, another scheme: 401 with a challenge and a typed body; nothing
    // is reached, not even the 404 of a path that does not exist.
    for path in [KEY_PATH, "/nope"] {
        for auth in [
            None,
            Some("Bearer wrong"),
            Some("Basic czNjcmV0"),
            Some("Bearer "),
        ] {
            let (status, body, headers) = call(&admin, "GET", path, auth, None).await;
            assert_eq!(status, 401, "{auth:?} {path}");
            let code = if auth.is_some_and(|a| a.starts_with("Bearer")) {
                "invalid_token"
            } else {
                "unauthorized"
            };
            assert_eq!(body["error"], code, "{auth:?}: {body}");
            assert!(
                headers["www-authenticate"]
                    .to_str()
                    .unwrap()
                    .starts_with("Bearer")
            );
        }
    }
    let (status, _, _) = call(&admin, "DELETE", KEY_PATH, Some("Bearer x"), None).await;
    assert_eq!(status, 401);

    // The scheme is case-insensitive (RFC 9110).
    let (status, _, _) = call(
        &admin,
        "GET",
        KEY_PATH,
        Some("bearer s3cret-admin-token"),
        None,
    )
    .await;
    assert_eq!(status, 200);

    // Inspect consumes nothing.
    for _ in 0..3 {
        let (status, body, _) = call(&admin, "GET", KEY_PATH, AUTH, None).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["policy"], "api");
        assert_eq!(body["key"], "ip:127.0.0.1");
        assert_eq!(body["allowed"], true);
        assert_eq!(body["limits"][0]["remaining"], 2);
        assert_eq!(body["limits"][0]["limit"], 2);
        assert_eq!(body["limits"][1]["remaining"], 100);
    }
    assert_eq!(status_of(&app, "127.0.0.1").await, 200);
    assert_eq!(status_of(&app, "127.0.0.1").await, 200);
    assert_eq!(status_of(&app, "127.0.0.1").await, 429);
    let (_, body, _) = call(&admin, "GET", KEY_PATH, AUTH, None).await;
    assert_eq!(body["allowed"], false, "{body}");
    assert_eq!(body["limits"][0]["remaining"], 0);
    assert!(
        body["limits"][0]["retry_after"].as_u64().unwrap() >= 1,
        "{body}"
    );

    // Reset: the denied client passes at once (deny cache included).
    let (status, body, _) = call(&admin, "DELETE", KEY_PATH, AUTH, None).await;
    assert_eq!((status, body), (StatusCode::NO_CONTENT, Value::Null));
    assert_eq!(status_of(&app, "127.0.0.1").await, 200);
    assert_eq!(status_of(&app, "127.0.0.1").await, 200);
    assert_eq!(status_of(&app, "127.0.0.1").await, 429);

    // Overrides: none, set (the denied client passes), read, remove.
    let (status, body, _) = call(&admin, "GET", OVERRIDE_PATH, AUTH, None).await;
    assert_eq!(
        (status, body["error"].clone()),
        (StatusCode::NOT_FOUND, json!("no_override"))
    );
    let raised = r#"{"limits": ["5/1h", "100/1m"]}"#;
    let (status, body, _) = call(&admin, "PUT", OVERRIDE_PATH, AUTH, Some(raised)).await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(
        status_of(&app, "127.0.0.1").await,
        200,
        "the raised quota applies at once"
    );
    let (status, body, _) = call(&admin, "GET", OVERRIDE_PATH, AUTH, None).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"policy": "api", "key": "ip:127.0.0.1", "limits": ["5/1h", "100/1m"]})
    );
    let (_, body, _) = call(&admin, "GET", KEY_PATH, AUTH, None).await;
    assert_eq!(
        body["limits"][0]["limit"], 5,
        "inspect sees the override: {body}"
    );
    assert_eq!(
        body["limits"][0]["remaining"], 2,
        "the units used are kept: {body}"
    );
    let (status, _, _) = call(&admin, "DELETE", OVERRIDE_PATH, AUTH, None).await;
    assert_eq!(status, 204);
    let (status, body, _) = call(&admin, "DELETE", OVERRIDE_PATH, AUTH, None).await;
    assert_eq!(
        (status, body["error"].clone()),
        (StatusCode::NOT_FOUND, json!("no_override"))
    );
    assert_eq!(
        status_of(&app, "127.0.0.1").await,
        429,
        "back to the policy's 2/1h"
    );

    hostile_input(&admin).await;
}

/// Everything a hostile or careless caller sends gets its typed answer.
async fn hostile_input(admin: &Router) {
    let huge_key = format!("/keys/api/{}", "k".repeat(60 * 1024));
    let ten_kib_policy = format!("/keys/{}/ip%3A1", "p".repeat(10 * 1024));
    let huge_bad_utf8 = format!("/keys/api/{}", "%FF".repeat(15_000));
    let cases: Vec<(&str, String, Option<String>, u16, &str)> = vec![
        ("GET", huge_key.clone(), None, 400, "bad_key"),
        ("DELETE", huge_key, None, 400, "bad_key"),
        ("GET", "/keys/api/a%7Bb%7D".into(), None, 400, "bad_key"),
        ("GET", "/keys/api/%FF%FE".into(), None, 400, "bad_request"),
        ("GET", huge_bad_utf8, None, 400, "bad_request"),
        (
            "GET",
            "/keys/nope/ip%3A1".into(),
            None,
            404,
            "no_such_policy",
        ),
        ("GET", ten_kib_policy, None, 404, "no_such_policy"),
        ("GET", "/keys/api".into(), None, 404, "not_found"),
        ("GET", "/".into(), None, 404, "not_found"),
        ("POST", KEY_PATH.into(), None, 405, "method_not_allowed"),
        (
            "PUT",
            OVERRIDE_PATH.into(),
            Some("{".into()),
            400,
            "bad_request",
        ),
        (
            "PUT",
            OVERRIDE_PATH.into(),
            Some("5/1h\n100/1m".into()),
            400,
            "bad_request",
        ),
        (
            "PUT",
            OVERRIDE_PATH.into(),
            Some(r#"{"limits": "5/1h"}"#.into()),
            400,
            "bad_request",
        ),
        (
            "PUT",
            OVERRIDE_PATH.into(),
            Some(r#"{"limits": ["5/1h"], "x": 1}"#.into()),
            400,
            "bad_request",
        ),
        (
            "PUT",
            OVERRIDE_PATH.into(),
            Some(r#"{"limits": ["5/1h"]}"#.into()),
            400,
            "bad_override",
        ),
        (
            "PUT",
            OVERRIDE_PATH.into(),
            Some(r#"{"limits": ["five/1h", "1/1s"]}"#.into()),
            400,
            "bad_override",
        ),
        (
            "PUT",
            OVERRIDE_PATH.into(),
            Some(r#"{"limits": ["0/1h", "1/1s"]}"#.into()),
            400,
            "bad_override",
        ),
        (
            "PUT",
            OVERRIDE_PATH.into(),
            Some(r#"{"limits": ["5/1h\n1/1s", "1/1s"]}"#.into()),
            400,
            "bad_override",
        ),
        (
            "PUT",
            OVERRIDE_PATH.into(),
            Some(r#"{"limits": ["18446744073709551616/1s", "1/1s"]}"#.into()),
            400,
            "bad_override",
        ),
        (
            "PUT",
            OVERRIDE_PATH.into(),
            Some(format!(r#"{{"limits": ["{}"]}}"#, "9".repeat(8192))),
            413,
            "bad_request",
        ),
    ];
    for (method, path, body, status, code) in cases {
        let (got, answer, _) = call(admin, method, &path, AUTH, body.as_deref()).await;
        let shown = &path[..path.len().min(60)];
        assert_eq!(
            got.as_u16(),
            status,
            "{method} {shown} {body:.60?}: {answer}"
        );
        assert_eq!(answer["error"], code, "{method} {shown}: {answer}");
        let message = answer["message"].as_str().expect("a message");
        assert!(
            !message.contains('\n') && message.len() < 400,
            "one short line: {message:.500}"
        );
    }
    // A body without a JSON content type.
    let request = Request::put(OVERRIDE_PATH)
        .header("authorization", AUTH.unwrap())
        .body(Body::from(r#"{"limits": ["5/1h", "1/1s"]}"#))
        .unwrap();
    let response = send(admin, request).await;
    assert_eq!(response.status(), 415);
    let answer: Value = serde_json::from_str(&body_text(response).await).unwrap();
    assert_eq!(answer["error"], "bad_request");
}

#[tokio::test]
async fn round_trips_in_memory() {
    round_trips(RateLimitLayer::new(MemoryStore::new(), policy())).await;
}

#[tokio::test]
async fn round_trips_in_redis() {
    let redis = RedisServer::start();
    let store = redlimit::store::RedisStore::builder(redis.url())
        .prefix(unique_prefix("admin-api"))
        .connect()
        .await
        .expect("connect");
    round_trips(RateLimitLayer::new(store, policy())).await;
}

/// A store with neither optional power: every endpoint answers 503 `unsupported`.
struct Bare(MemoryStore);

impl Store for Bare {
    fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        self.0.check(policy, key, cost)
    }
}

#[tokio::test]
async fn a_store_without_the_power_answers_503() {
    let admin = admin_router(&RateLimitLayer::new(Bare(MemoryStore::new()), policy()));
    let put = r#"{"limits": ["5/1h", "1/1s"]}"#;
    for (method, path, body) in [
        ("GET", KEY_PATH, None),
        ("DELETE", KEY_PATH, None),
        ("GET", OVERRIDE_PATH, None),
        ("PUT", OVERRIDE_PATH, Some(put)),
        ("DELETE", OVERRIDE_PATH, None),
    ] {
        let (status, answer, _) = call(&admin, method, path, AUTH, body).await;
        assert_eq!(status, 503, "{method} {path}: {answer}");
        assert_eq!(answer["error"], "unsupported", "{answer}");
    }
}

/// A store whose Redis is gone: 503 `store_unavailable`, never a 500 or a hang.
#[tokio::test]
async fn a_failing_store_answers_503() {
    let redis = RedisServer::start();
    let store = redlimit::store::RedisStore::builder(redis.url())
        .prefix(unique_prefix("admin-down"))
        .connect()
        .await
        .expect("connect");
    let admin = admin_router(&RateLimitLayer::new(store, policy()));
    drop(redis);
    let answer = tokio::time::timeout(
        Duration::from_secs(30),
        call(&admin, "GET", KEY_PATH, AUTH, None),
    )
    .await
    .expect("answers");
    assert_eq!(answer.0, 503, "{}", answer.1);
    assert_eq!(answer.1["error"], "store_unavailable", "{}", answer.1);
}

#[test]
fn the_token_never_shows() {
    let token = AdminToken::new(TOKEN).unwrap();
    assert!(!format!("{token:?}").contains("s3cret"));
    let err = AdminToken::new("two words").unwrap_err();
    support::assert_no_secret(&err, &["two words"]);
}

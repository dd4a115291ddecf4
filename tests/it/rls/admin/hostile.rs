//! Hostile admin requests: typed JSON answers, never a panic or a 500, nothing changed.

use std::sync::Arc;

use axum::body::Body;
use http::Request;
use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use redlimit::store::MemoryStore;

use super::{AUTH, call, call_as, hit, router, service};
use crate::support::send;

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

/// A store with none of the optional powers (no inspect, reset, overrides).
struct Bare(MemoryStore);

impl redlimit::store::Store for Bare {
    fn check(
        &self,
        policy: &redlimit::Policy,
        key: &redlimit::Key,
        cost: u64,
    ) -> redlimit::store::Check {
        self.0.check(policy, key, cost)
    }
}

/// What the shared errors say fits this router too: its paths, a store, not the layer's.
#[tokio::test]
async fn not_found_and_unsupported_speak_of_this_router() {
    let service = service(Arc::new(Bare(MemoryStore::new())));
    let admin = router(&service);
    let (status, answer) = call(&admin, "GET", "/keys/api/1", None).await;
    assert_eq!(status, 404, "{answer}");
    let message = answer["message"].as_str().unwrap_or_default();
    assert!(message.contains("/rls/{domain}/"), "{message}");
    for (method, path, body) in [
        ("GET", "/rls/test/counters?ip=1", None),
        ("DELETE", "/rls/test/counters?ip=1", None),
        (
            "PUT",
            "/rls/test/override?ip=1",
            Some(r#"{"limits": ["5/1d"]}"#),
        ),
        ("GET", "/rls/test/shadow", None),
    ] {
        let (status, answer) = call(&admin, method, path, body).await;
        assert_eq!(
            (status.as_u16(), answer["error"].as_str()),
            (503, Some("unsupported")),
            "{method} {path}: {answer}"
        );
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("the store cannot "), "{message}");
        assert!(!message.contains("layer"), "{message}");
    }
}

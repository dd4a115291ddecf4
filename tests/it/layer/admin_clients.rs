//! The admin API takes a client as the operator knows it (`header:x-api-key=sk_live_123`): for
//! every extractor, a request through a real layer on a real Redis is denied, and inspect,
//! reset and override by that name reach exactly the key the request was counted under, and
//! answer with its stored text. Hostile names get a 4xx JSON answer.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{Request, StatusCode};
use redlimit::admin::{self, AdminToken};
use redlimit::key::{Both, ClientIp, Header, PeerIp, Query, Route, Subject, VerifiedSubject};
use redlimit::store::MemoryStore;
use redlimit::{Key, KeyExtractor, Limit, Policy, RateLimitLayer};
use serde_json::Value;
use support::{RedisServer, body_text, redis_store, send};

const TOKEN: &str = "s3cret-admin-token";

fn policy() -> Policy {
    Policy::new(
        "api",
        [Limit::fixed_window(2, Duration::from_secs(3600)).unwrap()],
    )
    .unwrap()
}

/// An admin request with the token, and an optional JSON body; the answer's status and JSON.
/// An inspect answer without its clock-derived fields (`reset`, `retry_after`, whole seconds
/// that change when a second boundary passes between two reads on a busy machine).
fn same_key_state(state: &Value) -> Value {
    let mut state = state.clone();
    if let Some(limits) = state["limits"].as_array_mut() {
        for limit in limits.iter_mut().filter_map(Value::as_object_mut) {
            limit.remove("reset");
            limit.remove("retry_after");
        }
    }
    state
}

async fn call(admin: &Router, method: &str, path: &str, body: Option<&str>) -> (StatusCode, Value) {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {TOKEN}"));
    if body.is_some() {
        builder = builder.header("content-type", "application/json");
    }
    let request = builder
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned())))
        .expect("request");
    let response = send(admin, request).await;
    let status = response.status();
    let text = body_text(response).await;
    let json = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {text}"))
    };
    (status, json)
}

/// One extractor, a request it keys, and the client's name as an operator writes it in the path.
struct Case {
    what: &'static str,
    key: Arc<dyn KeyExtractor>,
    request: fn() -> Request<Body>,
    name: &'static str,
}

/// A GET of `uri` from the peer `ip`, with headers.
fn get_from(uri: &str, ip: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut request = support::request(uri, ip, headers);
    // What a server's accept loop records too: `extract` below reads the same request.
    let addr: std::net::SocketAddr = format!("{ip}:40000").parse().unwrap();
    request.extensions_mut().insert(addr);
    request
}

fn cases() -> Vec<Case> {
    let trusted = ClientIp::trusting(["10.0.0.0/8"])
        .unwrap()
        .ipv6_prefix(56)
        .unwrap();
    #[cfg_attr(not(feature = "jwt"), allow(unused_mut))]
    let mut cases = vec![
        Case {
            what: "peer ip",
            key: Arc::new(PeerIp),
            request: || get_from("/search", "203.0.113.7", &[]),
            name: "ip=203.0.113.7",
        },
        Case {
            what: "client ip behind a proxy, grouped by /56",
            key: Arc::new(trusted),
            request: || {
                get_from(
                    "/search",
                    "10.0.0.1",
                    &[("x-forwarded-for", "2001:db8:1:2::99")],
                )
            },
            // Another address of the same /56: the same client.
            name: "ip=2001:db8:1:ff::5",
        },
        Case {
            what: "header",
            key: Arc::new(Header::new("x-api-key").unwrap()),
            request: || get_from("/search", "10.0.0.2", &[("x-api-key", "sk_live/1+2&3 %")]),
            name: "header:X-Api-Key=sk_live%2F1+2%263%20%25",
        },
        Case {
            what: "query parameter",
            key: Arc::new(Query::new("api_key")),
            request: || get_from("/search?page=2&api_key=a%20b%2Bc", "10.0.0.3", &[]),
            name: "query:api_key=a%20b+c",
        },
        Case {
            what: "route",
            key: Arc::new(Route),
            request: || get_from("/search", "10.0.0.4", &[]),
            name: "route=%2Fsearch",
        },
        Case {
            what: "global",
            key: Arc::new(redlimit::key::Global),
            request: || get_from("/search", "10.0.0.5", &[]),
            name: "global=",
        },
        Case {
            what: "verified subject",
            key: Arc::new(Subject::verified()),
            request: || {
                let mut request = get_from("/search", "10.0.0.6", &[]);
                request
                    .extensions_mut()
                    .insert(VerifiedSubject("user 42/é".into()));
                request
            },
            name: "sub=user%2042%2F%C3%A9",
        },
        Case {
            what: "route and header",
            key: Arc::new(Both::new(Route, Header::new("x-api-key").unwrap())),
            request: || get_from("/search", "10.0.0.7", &[("x-api-key", "k1")]),
            name: "route=%2Fsearch&header:x-api-key=k1",
        },
        Case {
            what: "header, or else the peer ip",
            key: Arc::new(Header::new("x-api-key").unwrap().or_else(PeerIp)),
            request: || get_from("/search", "10.0.0.8", &[]),
            name: "ip=10.0.0.8",
        },
    ];
    #[cfg(feature = "jwt")]
    cases.extend(jwt_cases());
    cases
}

#[cfg(feature = "jwt")]
const SECRET: &[u8] = b"a test secret of thirty-two bytes";

#[cfg(feature = "jwt")]
fn bearer(claims: serde_json::Value) -> String {
    format!("Bearer {}", support::jwt::sign("HS256", SECRET, &claims))
}

#[cfg(feature = "jwt")]
fn jwt_cases() -> Vec<Case> {
    use redlimit::key::Jwt;
    vec![
        Case {
            what: "jwt subject",
            key: Arc::new(Jwt::hs256(SECRET).unwrap()),
            request: || {
                let exp = support::jwt::now() + 3600;
                let auth = bearer(serde_json::json!({"sub": "user-42", "exp": exp}));
                get_from("/search", "10.0.1.1", &[("authorization", &auth)])
            },
            name: "jwt:sub=user-42",
        },
        Case {
            what: "jwt number claim",
            key: Arc::new(Jwt::hs256(SECRET).unwrap().claim("tenant")),
            request: || {
                let exp = support::jwt::now() + 3600;
                let auth = bearer(serde_json::json!({"tenant": 42, "exp": exp}));
                get_from("/search", "10.0.1.2", &[("authorization", &auth)])
            },
            name: "jwt:tenant=42",
        },
    ]
}

/// `text` percent-encoded as one path segment.
fn path_segment(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn every_extractor_is_found_by_the_operators_name() {
    let server = RedisServer::start();
    for case in cases() {
        let what = case.what;
        let store = redis_store(&server, "admin-names").await;
        let layer = RateLimitLayer::builder(store, policy())
            .key(Arc::clone(&case.key))
            .build()
            .unwrap();
        let admin = admin::router(layer.handle(), AdminToken::new(TOKEN).unwrap());
        let app = Router::new()
            .route("/search", get(|| async { "ok" }))
            .layer(layer);
        let (parts, _) = (case.request)().into_parts();
        let stored: Key = case.key.extract(&parts).expect("the request has a key");

        let mut statuses = Vec::new();
        for _ in 0..3 {
            statuses.push(send(&app, (case.request)()).await.status().as_u16());
        }
        assert_eq!(statuses, [200, 200, 429], "{what}");

        // Inspect by name: exactly the denied key, and its stored text.
        let path = format!("/keys/api/{}", case.name);
        let (status, state) = call(&admin, "GET", &path, None).await;
        assert_eq!(status, StatusCode::OK, "{what}: {state}");
        assert_eq!(state["key"], stored.to_string(), "{what}");
        assert_eq!(state["allowed"], false, "{what}: {state}");
        assert_eq!(state["limits"][0]["remaining"], 0, "{what}: {state}");
        // The stored text names the same key.
        let encoded = path_segment(&stored.to_string());
        let (_, by_text) = call(&admin, "GET", &format!("/keys/api/{encoded}"), None).await;
        assert_eq!(same_key_state(&by_text), same_key_state(&state), "{what}");

        // Reset by name: 200 with the stored key, and the client passes at once.
        let (status, answer) = call(&admin, "DELETE", &path, None).await;
        assert_eq!(status, StatusCode::OK, "{what}: {answer}");
        assert_eq!(answer["key"], stored.to_string(), "{what}");
        assert_eq!(answer["policy"], "api", "{what}");
        let status = send(&app, (case.request)()).await.status();
        assert_eq!(status, StatusCode::OK, "{what}: denied after the reset");

        // An override by name, read back by the stored text.
        let overrides = format!("/overrides/api/{}", case.name);
        let body = r#"{"limits": ["5/1h"]}"#;
        let (status, answer) = call(&admin, "PUT", &overrides, Some(body)).await;
        assert_eq!(status, StatusCode::OK, "{what}: {answer}");
        assert_eq!(answer["key"], stored.to_string(), "{what}");
        let (status, read) = call(&admin, "GET", &format!("/overrides/api/{encoded}"), None).await;
        assert_eq!(status, StatusCode::OK, "{what}: {read}");
        assert_eq!(read["limits"][0], "5/1h", "{what}");
        let (_, read) = call(&admin, "GET", &overrides, None).await;
        assert_eq!(read["key"], stored.to_string(), "{what}");
        let mut passed = 0;
        for _ in 0..5 {
            passed += usize::from(send(&app, (case.request)()).await.status() == StatusCode::OK);
        }
        assert_eq!(passed, 4, "{what}: 1 of 5 used, 4 left under the override");
        let (status, _) = call(&admin, "DELETE", &overrides, None).await;
        assert_eq!(status, StatusCode::OK, "{what}");
    }
}

#[tokio::test]
async fn the_stored_form_answers_as_before() {
    let layer = RateLimitLayer::new(MemoryStore::new(), policy());
    let admin = admin::router(layer.handle(), AdminToken::new(TOKEN).unwrap());
    let (status, body) = call(&admin, "DELETE", "/keys/api/ip%3A203.0.113.7", None).await;
    assert_eq!((status, body), (StatusCode::NO_CONTENT, Value::Null));
    let (status, body) = call(&admin, "DELETE", "/keys/api/ip=203.0.113.7", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["key"], "ip:203.0.113.7");
}

#[tokio::test]
async fn hostile_names_get_a_4xx_json_answer() {
    let layer = RateLimitLayer::builder(MemoryStore::new(), policy())
        .key(Header::new("x-api-key").unwrap())
        .on_missing_key(redlimit::layer::MissingKey::Allow)
        .build()
        .unwrap();
    let admin = admin::router(layer.handle(), AdminToken::new(TOKEN).unwrap());
    let huge = format!("/keys/api/header:x-api-key={}", "a".repeat(20_000));
    let huge_escaped = format!("/keys/api/header:x-api-key={}", "%41".repeat(16_500));
    let many = format!("/keys/api/{}", vec!["header:x-api-key=1"; 17].join("&"));
    for (path, code) in [
        ("/keys/api/cookie:session=abc", "bad_client"),
        ("/keys/api/header:x-other=1", "bad_client"),
        ("/keys/api/ip=203.0.113.7", "bad_client"),
        ("/keys/api/header:x-api-key=", "bad_client"),
        ("/keys/api/header:x-api-key=%ZZ", "bad_client"),
        ("/keys/api/header:x-api-key=%", "bad_client"),
        ("/keys/api/header:x-api-key=1&", "bad_client"),
        ("/keys/api/header:x-api-key=1&route=%2F", "bad_client"),
        ("/keys/api/%FF%FE=1", "bad_client"),
        ("/keys/api/header:bad%20name=1", "bad_client"),
        ("/keys/api/ip=example.com", "bad_client"),
        ("/keys/api/jwt:=x", "bad_client"),
        (huge.as_str(), "bad_client"),
        (huge_escaped.as_str(), "bad_client"),
        (many.as_str(), "bad_client"),
        ("/keys/api/%FF", "bad_request"),
        ("/keys/api/a%20b", "bad_key"),
        ("/keys/nope/header:x-api-key=1", "no_such_policy"),
        ("/keys/%FF/header:x-api-key=1", "bad_request"),
        ("/overrides/api/cookie=1", "bad_client"),
    ] {
        for method in ["GET", "DELETE"] {
            let (status, body) = call(&admin, method, path, None).await;
            assert!(status.is_client_error(), "{method} {path:.60}: {status}");
            assert_eq!(body["error"], code, "{method} {path:.60}: {body}");
            let message = body["message"].as_str().expect("a message");
            assert!(message.len() < 300 && !message.contains('\n'), "{message}");
        }
    }
    // A value that is no UTF-8 is still a header value: named, and found.
    let (status, body) = call(&admin, "GET", "/keys/api/header:x-api-key=%FF%FE", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (parts, _) = Request::get("/")
        .header(
            "x-api-key",
            http::HeaderValue::from_bytes(b"\xff\xfe").unwrap(),
        )
        .body(())
        .unwrap()
        .into_parts();
    let key = Header::new("x-api-key").unwrap().extract(&parts).unwrap();
    assert_eq!(body["key"], key.to_string());
    // A secret is never echoed in an error.
    let (_, body) = call(
        &admin,
        "GET",
        "/keys/api/header:x-other=sk_live_secret",
        None,
    )
    .await;
    assert!(!body.to_string().contains("sk_live_secret"), "{body}");
}

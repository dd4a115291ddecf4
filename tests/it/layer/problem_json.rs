//! `RejectBody::ProblemJson` through a real axum server over TCP, on the memory store and on a
//! real redis-server: a denial is an RFC 9457 `quota-exceeded` problem whose
//! `violated-policies` names every limit that ran out, with the names `RateLimit-Policy`
//! gives them (a hierarchical policy: per API key, per tenant); its `retry-after` is the
//! header's; a fail-closed 503 is an `about:blank` problem.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use redlimit::key::{Header, PerLimit};
use redlimit::layer::{HeaderStyle, OnStoreError, RejectBody};
use redlimit::store::{MemoryStore, RedisStore, Store};
use redlimit::{Limit, Policy, RateLimitLayer};
use serde_json::{Value, json};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn serve(layer: RateLimitLayer) -> SocketAddr {
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });
    addr
}

/// A response as it came off the wire.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map_or_else(|| panic!("no {name} in {:?}", self.headers), |(_, v)| v)
    }

    fn problem(&self) -> Value {
        assert_eq!(self.header("content-type"), "application/problem+json");
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// The item names of `RateLimit-Policy`.
    fn policy_items(&self) -> Vec<String> {
        self.header("ratelimit-policy")
            .split(", ")
            .map(|item| item.split(';').next().unwrap().trim_matches('"').to_owned())
            .collect()
    }
}

/// One HTTP/1.1 GET over a fresh connection.
async fn get_with(addr: SocketAddr, headers: &[(&str, &str)]) -> Reply {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = String::from("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head");
    let mut lines = head.lines();
    let status = lines.next().unwrap()[9..12].parse().unwrap();
    let headers = lines
        .map(|line| {
            let (name, value) = line.split_once(':').unwrap();
            (name.to_owned(), value.trim().to_owned())
        })
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// Per API key 2 a minute; per tenant 3 an hour (GCRA both: waits that do not depend on
/// where the clock is in a window).
fn hierarchical(store: impl Store) -> RateLimitLayer {
    let policy = Policy::new(
        "api",
        [
            Limit::gcra(2, Duration::from_secs(60)).unwrap(),
            Limit::gcra(3, Duration::from_secs(3600)).unwrap(),
        ],
    )
    .unwrap();
    let key =
        PerLimit::new(Header::new("x-api-key").unwrap()).limit(1, Header::new("x-tenant").unwrap());
    RateLimitLayer::builder(store, policy)
        .key(key)
        .headers(HeaderStyle::Both)
        .reject_body(RejectBody::ProblemJson)
        // Every call asks the store: a cached denial of `a` would repeat its first reasons
        // (rightly: it stands until its retry time) where this test looks for new ones.
        .deny_cache(0)
        .build()
        .expect("valid layer")
}

/// Key `a` and then `b` of one tenant spend their quotas until every way to run out is seen.
async fn names_every_violated_quota(store: impl Store) {
    let addr = serve(hierarchical(store)).await;
    let call = |key: &'static str| async move {
        get_with(addr, &[("x-api-key", key), ("x-tenant", "t")]).await
    };
    for _ in 0..2 {
        let ok = call("a").await;
        assert_eq!(ok.status, 200);
        assert_eq!(ok.body, "ok");
    }

    let key_out = call("a").await;
    assert_eq!(key_out.status, 429);
    let problem = key_out.problem();
    assert_eq!(
        problem["type"],
        "https://iana.org/assignments/http-problem-types#quota-exceeded"
    );
    assert_eq!(problem["status"], 429);
    assert_eq!(problem["violated-policies"], json!(["api-1"]));
    assert_eq!(key_out.policy_items(), ["api-1", "api-2"]);
    // GCRA 2 a minute: the next unit in 30 s, less the moments the calls took.
    let wait: u64 = key_out.header("retry-after").parse().unwrap();
    assert!((25..=30).contains(&wait), "{wait}");
    assert_eq!(problem["retry-after"], wait);
    let detail = problem["detail"].as_str().unwrap();
    let exact: f64 = detail
        .strip_prefix("rate limit exceeded; retry in ")
        .and_then(|rest| rest.strip_suffix('s'))
        .and_then(|secs| secs.parse().ok())
        .unwrap_or_else(|| panic!("{detail}"));
    assert_eq!(exact.ceil() as u64, wait, "{detail}");

    // The tenant's third and last unit.
    assert_eq!(call("b").await.status, 200);
    let tenant_out = call("b").await;
    assert_eq!(tenant_out.status, 429);
    assert_eq!(
        tenant_out.problem()["violated-policies"],
        json!(["api-2"]),
        "b has a unit left; its tenant has none"
    );

    let both_out = call("a").await;
    let problem = both_out.problem();
    assert_eq!(problem["violated-policies"], json!(["api-1", "api-2"]));
    let wait: u64 = both_out.header("retry-after").parse().unwrap();
    assert_eq!(problem["retry-after"], wait);
    // The tenant's next unit comes back in 20 minutes, long after the key's.
    assert!(wait > 1100, "the longer wait decides: {wait}");
    for name in problem["violated-policies"].as_array().unwrap() {
        assert!(
            both_out
                .policy_items()
                .contains(&name.as_str().unwrap().to_owned())
        );
    }
}

#[tokio::test]
async fn problem_json_names_every_violated_quota_on_the_memory_store() {
    names_every_violated_quota(MemoryStore::new()).await;
}

#[tokio::test]
async fn problem_json_names_every_violated_quota_on_redis() {
    let redis = RedisServer::start();
    names_every_violated_quota(redis_store(&redis, "problem").await).await;
}

#[tokio::test]
async fn fail_closed_is_an_about_blank_problem_and_text_stays_the_default() {
    let dead = RedisStore::builder("redis://127.0.0.1:1")
        .connect_lazy()
        .unwrap();
    let policy = gcra_policy("p", 1, Duration::from_secs(60));
    let closed = RateLimitLayer::builder(dead, policy.clone())
        .on_store_error(OnStoreError::Closed)
        .reject_body(RejectBody::ProblemJson)
        .build()
        .unwrap();
    let reply = get_with(serve(closed).await, &[]).await;
    assert_eq!(reply.status, 503);
    assert_eq!(
        reply.problem(),
        json!({
            "type": "about:blank",
            "title": "Service Unavailable",
            "status": 503,
            "detail": "rate limiter unavailable",
        })
    );

    let plain = serve(RateLimitLayer::new(MemoryStore::new(), policy)).await;
    assert_eq!(get_with(plain, &[]).await.status, 200);
    let reply = get_with(plain, &[]).await;
    assert_eq!(reply.status, 429);
    assert_eq!(reply.header("content-type"), "text/plain; charset=utf-8");
    assert_eq!(reply.body, "Too Many Requests\n");
}

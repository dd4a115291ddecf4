//! Requests the limiter did not decide, made loud: an axum app served on a real socket without
//! connect info answers 500 with a `KeyMissing` (unless letting such requests through was
//! chosen), and `redlimit_requests_undecided_total{policy,reason}` counts every request that
//! went on (or was answered 500) without the limiter's verdict: `no_key`, `store_unavailable`
//! (Redis down, failing open), `shadow`.
//!
//! Each test reads a Prometheus recorder of its own, set as its thread's default: the tests
//! run on a current-thread runtime, where the servers they spawn run too.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use http::{HeaderValue, Response, StatusCode};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use redlimit::layer::{KeyMissing, MissingKey, OnStoreError, RateLimitBuilder, Shadow};
use redlimit::store::{MemoryStore, RedisStore};
use redlimit::telemetry::REQUESTS_UNDECIDED;
use redlimit::{Limit, Policy, RateLimitLayer};
use support::{RedisServer, body_text, request, send, unique_prefix};
use tower::ServiceBuilder;

/// The value of `redlimit_requests_undecided_total` for `policy` and `reason` (0 if never
/// counted).
fn undecided(recorder: &PrometheusRecorder, policy: &str, reason: &str) -> u64 {
    let text = recorder.handle().render();
    let labels = [
        format!("policy=\"{policy}\""),
        format!("reason=\"{reason}\""),
    ];
    text.lines()
        .filter(|line| line.starts_with(&format!("{REQUESTS_UNDECIDED}{{")))
        .filter(|line| labels.iter().all(|label| line.contains(label.as_str())))
        .map(|line| line.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

fn builder(name: &str, count: u64) -> RateLimitBuilder {
    let limit = Limit::fixed_window(count, Duration::from_secs(3600)).unwrap();
    RateLimitLayer::builder(MemoryStore::new(), Policy::new(name, [limit]).unwrap())
}

/// Reports the `KeyMissing` in a response as `x-key-missing: POLICY`.
fn report<B>(mut response: Response<B>) -> Response<B> {
    let policy = response
        .extensions()
        .get::<KeyMissing>()
        .map(|missing| HeaderValue::from_str(missing.policy()).unwrap());
    if let Some(policy) = policy {
        response.headers_mut().insert("x-key-missing", policy);
    }
    response
}

/// An app answering `ok` behind `layer`, and outside it a layer that reports the
/// `KeyMissing` it finds in a response.
fn app(layer: RateLimitLayer) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(ServiceBuilder::new().map_response(report).layer(layer))
}

/// Serves `app` on a free loopback port, with or without connect info.
async fn serve(app: Router, connect_info: bool) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        if connect_info {
            let app = app.into_make_service_with_connect_info::<SocketAddr>();
            axum::serve(listener, app).await
        } else {
            axum::serve(listener, app).await
        }
    });
    addr
}

/// One HTTP/1.1 GET `/` over a fresh connection: the status, the headers (lower case) and
/// the body.
async fn get_root(addr: SocketAddr) -> (u16, String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head and a body");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_ascii_lowercase(), body.to_owned())
}

#[tokio::test(flavor = "current_thread")]
async fn without_connect_info_the_default_answers_500_and_counts() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let _local = metrics::set_default_local_recorder(&recorder);
    let addr = serve(app(builder("no-peer", 10).build().unwrap()), false).await;
    for _ in 0..2 {
        let (status, head, body) = get_root(addr).await;
        assert_eq!(status, 500, "{head}{body}");
        assert!(body.contains("no peer address"), "{body}");
        assert!(
            body.contains("into_make_service_with_connect_info"),
            "{body}"
        );
        assert!(head.contains("content-type: text/plain"), "{head}");
        assert!(head.contains("x-key-missing: no-peer"), "{head}");
    }
    assert_eq!(undecided(&recorder, "no-peer", "no_key"), 2);

    // The same layer on a server with connect info keys by the peer: nothing undecided.
    let addr = serve(app(builder("with-peer", 1).build().unwrap()), true).await;
    let statuses = [get_root(addr).await.0, get_root(addr).await.0];
    assert_eq!(statuses, [200, 429]);
    assert_eq!(undecided(&recorder, "with-peer", "no_key"), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn the_quiet_settings_and_shadow_mode_let_it_through_and_count() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let _local = metrics::set_default_local_recorder(&recorder);
    let layers = [
        (
            "or-allow",
            builder("or-allow", 1).on_missing_key(MissingKey::PeerIpOrAllow),
        ),
        (
            "allow",
            builder("allow", 1).on_missing_key(MissingKey::Allow),
        ),
        ("shadowed", builder("shadowed", 1).shadow(Shadow::On)),
    ];
    for (policy, layer) in layers {
        let addr = serve(app(layer.build().unwrap()), false).await;
        for _ in 0..3 {
            let (status, head, body) = get_root(addr).await;
            assert_eq!((status, body.as_str()), (200, "ok"), "{policy}: {head}");
            assert!(!head.contains("x-key-missing"), "{policy}: {head}");
        }
        assert_eq!(undecided(&recorder, policy, "no_key"), 3, "{policy}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn failing_open_on_a_dead_redis_counts_store_unavailable() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let _local = metrics::set_default_local_recorder(&recorder);
    let mut redis = RedisServer::start();
    let store = RedisStore::builder(redis.url())
        .prefix(unique_prefix("undecided"))
        .connect()
        .await
        .unwrap();
    let policy = Policy::new(
        "fail-open",
        [Limit::gcra(1, Duration::from_secs(600)).unwrap()],
    );
    let layer = RateLimitLayer::builder(store, policy.unwrap())
        .on_store_error(OnStoreError::Open)
        // A dead Redis refuses at once; a deadline this long keeps a slow machine from
        // turning that into a missed deadline (decided in memory instead).
        .store_deadline(Duration::from_secs(5))
        .build()
        .unwrap();
    let app = support::source_app(layer);
    let source = |ip: &'static str| {
        let app = app.clone();
        async move { body_text(send(&app, request("/", ip, &[])).await).await }
    };
    assert_eq!(source("10.0.0.1").await, "Store");
    assert_eq!(undecided(&recorder, "fail-open", "store_unavailable"), 0);
    redis.kill();
    for _ in 0..4 {
        // Allowed although the limit of 1 is spent: the store could not say no.
        assert_eq!(source("10.0.0.1").await, "FailOpen");
    }
    assert_eq!(undecided(&recorder, "fail-open", "store_unavailable"), 4);
    assert_eq!(undecided(&recorder, "fail-open", "no_key"), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn shadow_mode_counts_the_denials_it_lets_through() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let _local = metrics::set_default_local_recorder(&recorder);
    let app = support::app(
        builder("shadow-undecided", 2)
            .shadow(Shadow::On)
            .build()
            .unwrap(),
    );
    for _ in 0..5 {
        let response = send(&app, request("/", "10.0.0.1", &[])).await;
        assert_eq!(response.status(), StatusCode::OK);
    }
    assert_eq!(undecided(&recorder, "shadow-undecided", "shadow"), 3);
    assert_eq!(undecided(&recorder, "shadow-undecided", "no_key"), 0);
}

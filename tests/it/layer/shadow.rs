//! Shadow mode: every decision is made and recorded (store, metrics, the decision in the
//! request's extensions) and none denies. And the metrics beside the decision counters:
//! breaker transitions, store failures, memory-store evictions.

use crate::support;

use std::sync::LazyLock;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use redlimit::key::PeerIp;
use redlimit::layer::{CircuitBreaker, OnStoreError, Rule, Shadow};
use redlimit::store::{MemoryStore, RedisStore};
use redlimit::{Decision, Key, Limit, Policy, RateLimitLayer};
use support::{RedisServer, header, request, send, unique_prefix};

/// The process's recorder: every test counts under policy names of its own.
static METRICS: LazyLock<PrometheusHandle> = LazyLock::new(|| {
    PrometheusBuilder::new()
        .install_recorder()
        .expect("install the recorder")
});

/// The value of `redlimit_decisions_total` with these labels (0 if never counted).
fn decisions(labels: &[(&str, &str)]) -> u64 {
    sample("redlimit_decisions_total", labels)
}

/// The sum of the samples of `metric` with these labels (0 if never counted).
fn sample(metric: &str, labels: &[(&str, &str)]) -> u64 {
    METRICS
        .render()
        .lines()
        .filter(|line| {
            line.starts_with(&format!("{metric}{{")) || line.starts_with(&format!("{metric} "))
        })
        .filter(|line| {
            labels
                .iter()
                .all(|(k, v)| line.contains(&format!("{k}=\"{v}\"")))
        })
        .map(|line| line.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

fn policy(name: &str, count: u64) -> Policy {
    Policy::new(
        name,
        [Limit::sliding_log(count, Duration::from_secs(3600)).unwrap()],
    )
    .unwrap()
}

/// An app whose handler answers whether its decision allowed the request.
fn app(layer: RateLimitLayer) -> Router {
    let verdict = |d: Decision| async move { if d.is_allowed() { "allowed" } else { "denied" } };
    Router::new()
        .route("/", get(verdict))
        .route("/{*rest}", get(verdict))
        .layer(layer)
}

#[tokio::test]
async fn never_denies_sends_no_headers_and_counts_the_would_be_denials() {
    LazyLock::force(&METRICS);
    let layer = RateLimitLayer::builder(MemoryStore::new(), policy("shadow-on", 2))
        .shadow(Shadow::On)
        .build()
        .expect("valid layer");
    let app = app(layer);
    let mut verdicts = Vec::new();
    for _ in 0..5 {
        let response = send(&app, request("/", "10.0.0.1", &[])).await;
        assert_eq!(response.status(), 200);
        for name in ["x-ratelimit-limit", "x-ratelimit-remaining", "retry-after"] {
            assert_eq!(header(&response, name), "", "{name}");
        }
        verdicts.push(support::body_text(response).await);
    }
    assert_eq!(
        verdicts,
        ["allowed", "allowed", "denied", "denied", "denied"]
    );
    let of = |outcome| decisions(&[("policy", "shadow-on"), ("outcome", outcome)]);
    assert_eq!(of("allowed"), 2);
    assert_eq!(of("shadow_denied"), 3);
    assert_eq!(of("denied"), 0);
    assert_eq!(
        decisions(&[
            ("policy", "shadow-on"),
            ("outcome", "shadow_denied"),
            ("source", "store"),
            ("limit", "sliding-log 2/1h"),
        ]),
        3
    );
}

#[tokio::test]
async fn with_headers_tells_clients_without_retry_after() {
    let layer = RateLimitLayer::builder(MemoryStore::new(), policy("shadow-headers", 1))
        .shadow(Shadow::OnWithHeaders)
        .build()
        .expect("valid layer");
    let app = app(layer);
    assert_eq!(
        send(&app, request("/", "10.0.0.1", &[])).await.status(),
        200
    );
    let response = send(&app, request("/", "10.0.0.1", &[])).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-ratelimit-limit"), "1");
    assert_eq!(header(&response, "x-ratelimit-remaining"), "0");
    assert_eq!(header(&response, "retry-after"), "");
}

#[tokio::test]
async fn a_route_s_own_mode_wins_over_the_layer_s() {
    let layer = RateLimitLayer::builder_per_route(MemoryStore::new())
        .rule(
            Rule::new("/shadowed", policy("route-shadowed", 1))
                .unwrap()
                .key(PeerIp)
                .shadow(Shadow::On),
        )
        .rule(
            Rule::new("/enforced", policy("route-enforced", 1))
                .unwrap()
                .key(PeerIp)
                .shadow(Shadow::Off),
        )
        .rule(
            Rule::new("/default", policy("route-default", 1))
                .unwrap()
                .key(PeerIp),
        )
        .shadow(Shadow::On)
        .build()
        .expect("valid layer");
    let app = app(layer);
    let statuses = |path: &'static str| {
        let app = app.clone();
        async move {
            let mut statuses = Vec::new();
            for _ in 0..3 {
                statuses.push(
                    send(&app, request(path, "10.0.0.1", &[]))
                        .await
                        .status()
                        .as_u16(),
                );
            }
            statuses
        }
    };
    assert_eq!(statuses("/shadowed").await, [200, 200, 200]);
    assert_eq!(statuses("/enforced").await, [200, 429, 429]);
    assert_eq!(
        statuses("/default").await,
        [200, 200, 200],
        "the layer's mode"
    );
}

#[tokio::test]
async fn failing_closed_in_shadow_mode_lets_requests_through() {
    LazyLock::force(&METRICS);
    let mut redis = RedisServer::start();
    let store = RedisStore::builder(redis.url())
        .prefix(unique_prefix("shadow"))
        .connect()
        .await
        .unwrap();
    let layer = RateLimitLayer::builder(store, policy("shadow-closed", 1))
        .on_store_error(OnStoreError::Closed)
        // A dead Redis refuses at once; a deadline this long keeps a slow machine from
        // turning that into a missed deadline (decided in memory instead).
        .store_deadline(Duration::from_secs(5))
        .circuit_breaker(CircuitBreaker::new().min_calls(2))
        .shadow(Shadow::On)
        .build()
        .expect("valid layer");
    let app = app(layer);
    assert_eq!(
        send(&app, request("/", "10.0.0.1", &[])).await.status(),
        200
    );
    assert_eq!(
        send(&app, request("/", "10.0.0.1", &[])).await.status(),
        200
    );
    redis.kill();
    for _ in 0..3 {
        let response = send(&app, request("/", "10.0.0.2", &[])).await;
        assert_eq!(response.status(), 200, "never 503 in shadow mode");
    }
    let of = |outcome, source| {
        decisions(&[
            ("policy", "shadow-closed"),
            ("outcome", outcome),
            ("source", source),
        ])
    };
    assert_eq!(of("allowed", "store"), 1);
    // The second request was denied by the store, then answered from the deny cache or not:
    // a denial either way.
    assert_eq!(
        of("shadow_denied", "store") + of("shadow_denied", "deny_cache"),
        1
    );
    assert_eq!(of("shadow_denied", "fail_closed"), 3);
    // Two failures among four calls: the breaker opened, and the third went unasked.
    assert!(sample("redlimit_breaker_transitions_total", &[("state", "open")]) >= 1);
    assert!(
        sample(
            "redlimit_store_failures_total",
            &[("reason", "circuit_open")]
        ) >= 1
    );
}

#[test]
fn memory_store_evictions_are_counted() {
    LazyLock::force(&METRICS);
    let before = sample("redlimit_memory_evictions_total", &[]);
    let store = MemoryStore::builder().max_keys(64).build();
    let policy = policy("evict", 5);
    for i in 0..10_000 {
        store.check_now(&policy, &Key::new(format!("k{i}")), 1);
    }
    assert!(store.evictions() > 0);
    // Other tests of this binary evict nothing (their stores stay far below the cap).
    assert_eq!(
        sample("redlimit_memory_evictions_total", &[]) - before,
        store.evictions()
    );
}

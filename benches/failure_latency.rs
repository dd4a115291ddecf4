//! What a request costs while Redis misbehaves: the layer's added latency with Redis healthy,
//! refusing connections, and frozen (`SIGSTOP`), with the circuit breaker disabled (every
//! request tries Redis) and open (requests decided at once).
//!
//! ```text
//! cargo bench --bench failure_latency      # ~30 s
//! ```
//!
//! Requests go through `tower::ServiceExt::oneshot` on an axum router (no socket), one at a
//! time, so each latency is the layer's and the store's alone. Each row reports p50 / p99 /
//! max over its requests, and the difference to the same router without the layer.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::Request;
use redlimit::layer::CircuitBreaker;
use redlimit::store::RedisStore;
use redlimit::{Limit, Policy, RateLimitLayer};
use support::redis_server::RedisServer;
use support::{Table, percentile};
use tower::ServiceExt;

const DEADLINE: Duration = Duration::from_millis(100);

fn app() -> Router {
    Router::new().route("/", get(|| async { "ok" }))
}

fn request() -> Request<Body> {
    let mut req = Request::get("/").body(Body::empty()).unwrap();
    let peer: SocketAddr = "203.0.113.7:4000".parse().unwrap();
    req.extensions_mut()
        .insert(axum::extract::ConnectInfo(peer));
    req
}

async fn layered(url: &str, breaker: CircuitBreaker) -> Router {
    let store = RedisStore::builder(url)
        .prefix("lat")
        .connect_lazy()
        .unwrap();
    let policy = Policy::new(
        "lat",
        [Limit::gcra(1_000_000, Duration::from_secs(1)).unwrap()],
    )
    .unwrap();
    app().layer(
        RateLimitLayer::builder(store, policy)
            .store_deadline(DEADLINE)
            .circuit_breaker(breaker)
            .build()
            .expect("valid layer"),
    )
}

/// Latencies in µs of `n` sequential requests.
async fn run(app: &Router, n: usize) -> Vec<f64> {
    let mut took = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let res = app.clone().oneshot(request()).await.unwrap();
        assert!(res.status().is_success(), "{}", res.status());
        took.push(started.elapsed().as_secs_f64() * 1e6);
    }
    took.sort_by(f64::total_cmp);
    took
}

fn table() -> Table {
    Table::new(&[
        "Redis",
        "requests",
        "p50 µs",
        "p99 µs",
        "max µs",
        "p50 added µs",
    ])
}

fn row(name: &str, sorted: &[f64], bare: f64) {
    println!(
        "{}",
        table().row([
            name.to_owned(),
            sorted.len().to_string(),
            format!("{:.0}", percentile(sorted, 0.5)),
            format!("{:.0}", percentile(sorted, 0.99)),
            format!("{:.0}", percentile(sorted, 1.0)),
            format!("{:+.0}", percentile(sorted, 0.5) - bare),
        ])
    );
}

fn main() {
    if !support::bench_mode(
        "failure latency benchmark: run with `cargo bench --bench failure_latency`",
    ) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut redis = RedisServer::start();
        let url = redis.url();
        let bare = run(&app(), 5_000).await;
        let bare_p50 = percentile(&bare, 0.5);
        println!("{}", table().header());
        row("no layer", &bare, bare_p50);

        let healthy = layered(&url, CircuitBreaker::default()).await;
        run(&healthy, 200).await; // connect, load the script
        row("healthy", &run(&healthy, 5_000).await, bare_p50);

        // Refusing connections (killed): each request tries a fresh connection.
        redis.kill();
        let refused = layered(&url, CircuitBreaker::disabled()).await;
        row(
            "refusing connections, breaker disabled",
            &run(&refused, 500).await,
            bare_p50,
        );
        let refused_open = layered(
            &url,
            CircuitBreaker::new()
                .min_calls(5)
                .cool_down(Duration::from_secs(3600)),
        )
        .await;
        run(&refused_open, 5).await; // trips the breaker
        row(
            "refusing connections, breaker open",
            &run(&refused_open, 5_000).await,
            bare_p50,
        );

        // Frozen: connections accepted, nothing answered; every call waits out the deadline.
        redis.restart();
        let frozen = layered(&url, CircuitBreaker::disabled()).await;
        let frozen_open = layered(
            &url,
            CircuitBreaker::new()
                .min_calls(5)
                .cool_down(Duration::from_secs(3600)),
        )
        .await;
        run(&frozen, 20).await;
        run(&frozen_open, 20).await;
        redis.freeze();
        row(
            "frozen (SIGSTOP), breaker disabled",
            &run(&frozen, 20).await,
            bare_p50,
        );
        run(&frozen_open, 5).await; // five missed deadlines trip the breaker
        row(
            "frozen (SIGSTOP), breaker open",
            &run(&frozen_open, 5_000).await,
            bare_p50,
        );
        redis.thaw();
    });
}

//! The layer on Redis and the minimal middleware, 64 requests in flight (or
//! `REDLIMIT_BENCH_IN_FLIGHT`, each task pausing `REDLIMIT_BENCH_GAP_US` between requests).

use std::hint::black_box;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::Request;
use http_body_util::BodyExt;
use redlimit::failure::OnStoreError;
use redlimit::key::Global;
use redlimit::response::HeaderStyle;
use redlimit::store::RedisStore;
use redlimit::{Limit, Policy, RateLimitLayer};
use tower::ServiceExt;

use crate::support::{self, redis_server::RedisServer};
use crate::{app, report_cpu};

pub(super) const NAMES: [&str; 6] = [
    "app-bare-64",
    "app-redis",
    "app-redis-plain",
    "app-minimal",
    "app-redis-100k",
    "app-minimal-100k",
];

/// Distinct keys of the 100k loops, taken in `benches/http.rs`'s stride.
const KEYS: u64 = 100_000;
const STRIDE: u64 = 7_919;

/// Requests in flight, as `benches/http.rs`'s 64 connections; `REDLIMIT_BENCH_IN_FLIGHT=1`
/// sends one at a time, as a paced load at a modest rate does (no batching).
fn in_flight() -> u64 {
    std::env::var("REDLIMIT_BENCH_IN_FLIGHT")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(64)
}

/// `REDLIMIT_BENCH_GAP_US=N`: each request task sleeps N µs after each request, so that the
/// runtime parks between requests as under a paced load (0, the default: no pause).
fn gap() -> Option<Duration> {
    std::env::var("REDLIMIT_BENCH_GAP_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .map(Duration::from_micros)
}
/// 10^6 per second, as `benches/http.rs`: every request admitted.
const RATE: u64 = 1_000_000;

async fn make(name: &str, url: &str) -> Router {
    match name {
        "app-redis" | "app-redis-plain" | "app-redis-100k" => {
            let store = RedisStore::builder(url)
                .prefix("gcra")
                .connect()
                .await
                .expect("connect to the bench redis");
            let policy = Policy::new(
                "bench",
                [Limit::gcra(RATE, Duration::from_secs(1)).expect("a limit")],
            )
            .expect("a policy");
            let builder =
                RateLimitLayer::builder(store, policy).store_deadline(Duration::from_secs(1));
            // `app-redis-plain`: the layer asked to do what the minimal middleware does, no
            // more: no rate limit headers, and a failing store lets requests through (no
            // share of the limit kept in memory for it), so that the difference left is the
            // layer's own cost and not its features'.
            let builder = if name == "app-redis-plain" {
                builder
                    .headers(HeaderStyle::None)
                    .on_store_error(OnStoreError::Open)
            } else {
                builder
            };
            let layer = if name != "app-redis-100k" {
                builder.key(Global).build()
            } else {
                // As `benches/http.rs` keys its 100k rows: the header's text.
                builder
                    .key(|parts: &http::request::Parts| {
                        parts
                            .headers
                            .get("x-key")
                            .map(|v| redlimit::Key::new(v.as_bytes()))
                    })
                    .build()
            };
            app().layer(layer.expect("valid layer"))
        }
        "app-minimal" | "app-minimal-100k" => {
            support::minimal::Minimal::connect(url, RATE, 1_000_000)
                .await
                .layer(app())
        }
        _ => app(),
    }
}

/// A request with `x-key: hot`, or with the `i`-th of the 100k keys when `many`.
fn request(many: bool, i: u64) -> Request<Body> {
    let request = Request::get("/")
        .header("host", "localhost")
        .header("user-agent", "bench/1.0");
    let request = if many {
        request.header("x-key", i.wrapping_mul(STRIDE) % KEYS)
    } else {
        request.header("x-key", "hot")
    };
    request.body(Body::empty()).expect("a request")
}

/// `n` requests, `in_flight()` at a time, each through a clone of `app` as a connection's
/// request would be; over the 100k keys when `many`, from the `first`-th on.
async fn requests(app: &Router, n: u64, many: bool, first: u64) {
    let in_flight = in_flight();
    let gap = gap();
    let tasks: Vec<_> = (0..in_flight)
        .map(|i| {
            let app = app.clone();
            let share = n / in_flight + u64::from(i < n % in_flight);
            tokio::spawn(async move {
                for j in 0..share {
                    let request = request(many, first + j * in_flight + i);
                    let response = app.clone().oneshot(request).await.expect("infallible");
                    assert!(response.status().is_success(), "{}", response.status());
                    black_box(response.into_body().collect().await.expect("a body"));
                    if let Some(gap) = gap {
                        tokio::time::sleep(gap).await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a request task");
    }
}

/// The loop: warmed up (the script loaded, the connection's buffers grown), then `n`
/// requests measured.
pub(super) fn run(runtime: &tokio::runtime::Runtime, name: &str, n: u64) {
    let redis = RedisServer::start();
    let app = runtime.block_on(make(name, &redis.url()));
    let many = name.ends_with("-100k");
    // With 100k keys, every key seen once first, as in a long run.
    let warm = if many { KEYS } else { in_flight() * 10 };
    runtime.block_on(requests(&app, warm, many, 0));
    support::reset_redis_stats(&mut redis.connection());
    let thread = support::current_thread_proc();
    let before = support::cpu_us(&thread);
    runtime.block_on(requests(&app, n, many, warm));
    report_cpu(name, n, support::cpu_us(&thread) - before);
    let stats = support::command_stats(&mut redis.connection());
    let calls: u64 = stats
        .iter()
        .filter(|(name, _)| name.starts_with("eval"))
        .map(|(_, stat)| stat.calls)
        .sum();
    eprintln!(
        "{name}: {:.3} script calls per request",
        calls as f64 / n.max(1) as f64
    );
}

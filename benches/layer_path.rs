//! The layer's own cost per request, without sockets: one request through an axum app (the
//! same tiny app as `benches/http.rs`), body read to the end, on a current-thread runtime.
//! Bare axum, redlimit on the memory store and tower_governor (with its headers), one hot key
//! each; the difference to bare axum is what each limiter adds to a request's CPU time.
//!
//! `cargo bench --bench layer_path` (add `-- --quick` for a fast look).
//!
//! On a busy machine wall time swings; instructions do not. `REDLIMIT_BENCH_LOOP=NAME:N` runs N
//! requests of one app (`bare`, `redlimit`, `governor`) and exits, for `perf stat`:
//!
//! ```text
//! cargo bench --bench layer_path --no-run
//! REDLIMIT_BENCH_LOOP=redlimit:1000000 perf stat -e instructions,task-clock target/release/deps/layer_path-* --bench
//! ```

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use criterion::{criterion_group, Criterion};
use http::Request;
use http_body_util::BodyExt;
use redlimit::key::Global;
use redlimit::store::MemoryStore;
use redlimit::{Limit, Policy, RateLimitLayer};
use tower::ServiceExt;

const RATE: u64 = 1_000_000;

fn app() -> Router {
    Router::new().route("/", get(|| async { "ok" }))
}

fn redlimit_app() -> Router {
    let policy = Policy::new(
        "bench",
        [Limit::gcra(RATE, Duration::from_secs(1)).expect("a limit")],
    )
    .expect("a policy");
    app().layer(
        RateLimitLayer::builder(MemoryStore::new(), policy)
            .key(Global)
            .build()
            .expect("valid layer"),
    )
}

#[derive(Clone)]
struct HotKey;

impl tower_governor::key_extractor::KeyExtractor for HotKey {
    type Key = ();

    fn extract<T>(&self, _: &http::Request<T>) -> Result<(), tower_governor::GovernorError> {
        Ok(())
    }
}

fn governor_app() -> Router {
    let config = tower_governor::governor::GovernorConfigBuilder::default()
        .per_nanosecond(1)
        .burst_size(NonZeroU32::MAX.get())
        .key_extractor(HotKey)
        .use_headers()
        .finish()
        .expect("governor config");
    app().layer(tower_governor::GovernorLayer::new(config))
}

fn request() -> Request<Body> {
    Request::get("/")
        .header("host", "localhost")
        .header("user-agent", "bench/1.0")
        .body(Body::empty())
        .expect("a request")
}

fn apps() -> [(&'static str, Router); 3] {
    [
        ("bare axum", app()),
        ("redlimit memory gcra", redlimit_app()),
        ("tower_governor", governor_app()),
    ]
}

async fn one(app: &Router) {
    let response = app.clone().oneshot(request()).await.expect("infallible");
    assert!(response.status().is_success());
    let body = response.into_body().collect().await.expect("a body");
    black_box(body);
}

/// `REDLIMIT_BENCH_LOOP=NAME:N`: N requests through the app whose name contains NAME, nothing else.
fn run_loop(spec: &str) {
    let (name, n) = spec.split_once(':').expect("REDLIMIT_BENCH_LOOP=NAME:N");
    let n: u64 = n.parse().expect("N is a number");
    let (_, app) = apps()
        .into_iter()
        .find(|(app, _)| app.contains(name))
        .expect("NAME is bare, redlimit or governor");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        for _ in 0..n {
            one(&app).await;
        }
    });
}

fn layer_path(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let mut group = c.benchmark_group("request through the app");
    for (name, app) in apps() {
        group.bench_function(name, |b| b.iter(|| runtime.block_on(one(&app))));
    }
    group.finish();
}

criterion_group!(benches, layer_path);

fn main() {
    if let Ok(spec) = std::env::var("REDLIMIT_BENCH_LOOP") {
        run_loop(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

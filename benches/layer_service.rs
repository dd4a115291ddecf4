//! The layer's own work per request, without sockets, two ways:
//!
//! - **the service called directly**: the tower `Service` with a prebuilt request (cloned per
//!   call), over an inner service that answers at once; no router, no runtime scheduling (each
//!   future is polled once, and is ready). redlimit on the memory store (GCRA, one hot key, with
//!   its `X-RateLimit-*` headers) beside tower_governor's layer (one hot key, `use_headers()`),
//!   on the allowed path (a limit never reached) and the denied path (a limit of one per hour,
//!   spent); the inner service alone is the baseline both are measured against.
//! - **a request through an axum app** (the same tiny app as `benches/http.rs`), its body read
//!   to the end, on a current-thread runtime: bare axum, redlimit and tower_governor as above
//!   (allowed); the difference to bare axum is what each limiter adds to a request's CPU time.
//!
//! - **on Redis, through the app** (loop only, below): the layer on a `RedisStore` (GCRA, one
//!   hot key, as `benches/http.rs`'s "redlimit redis gcra, hot key") beside the minimal
//!   one-`EVALSHA` middleware (`support/minimal.rs`), each request carrying `x-key: hot`, 64
//!   requests in flight on one current-thread runtime (so the store batches as it does under
//!   `benches/http.rs` at 64 connections). No HTTP socket; Redis's socket stays, it is part of
//!   both. `REDLIMIT_BENCH_IN_FLIGHT=1 REDLIMIT_BENCH_GAP_US=1000` sends them one at a time with
//!   a millisecond's pause, as a paced load at ~1 000 a second does (no batching, parked
//!   between). `redis-server` is started here, as a child process: callgrind counts only ours.
//!
//! - **100k keys through the app** (loop only): as above, each request carrying an `x-key`
//!   header, one of 100 000 values in `benches/http.rs`'s order, keyed on by redlimit (the
//!   header's text) and by tower_governor (the same text), both at 10^6 per second; every key
//!   seen once before the measured calls.
//!
//! `cargo bench --bench layer_service` (add `-- --quick` for a fast look). The figure to read
//! is each layer's time minus its baseline's: redlimit's over governor's is the ratio the
//! results report.
//!
//! On a busy machine wall time swings; instructions do not. `REDLIMIT_BENCH_LOOP=NAME:N` runs N
//! calls of one variant and exits, for callgrind or `perf stat`: called directly `bare`,
//! `redlimit-allowed`, `redlimit-denied`, `governor-allowed`, `governor-denied`; through the
//! app `app-bare`, `app-redlimit`, `app-governor`; with 100k keys `app-bare-100k`,
//! `app-redlimit-100k`, `app-governor-100k`; on Redis `app-redis`, `app-minimal`,
//! `app-redis-plain` (the layer without headers, failing open: what the minimal does; and
//! `app-bare-64`, bare axum with 64 in flight, their floor), and with 100k keys
//! `app-redis-100k`, `app-minimal-100k`. Each loop prints its thread's CPU
//! time per call (and on Redis the script calls per request) on stderr:
//!
//! ```text
//! cargo bench --bench layer_service --no-run
//! REDLIMIT_BENCH_LOOP=redlimit-allowed:100000 valgrind --tool=callgrind target/release/deps/layer_service-* --bench
//! REDLIMIT_BENCH_LOOP=app-redlimit:300000 perf stat -e task-clock target/release/deps/layer_service-* --bench
//! ```

#[path = "layer_service/many_keys.rs"]
mod many_keys;
#[cfg(feature = "redis")]
#[path = "layer_service/on_redis.rs"]
mod on_redis;
mod support;

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::hint::black_box;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use criterion::{Criterion, criterion_group};
use futures_util::FutureExt;
use http::{Request, Response};
use http_body_util::BodyExt;
use redlimit::key::Global;
use redlimit::store::MemoryStore;
use redlimit::{Limit, Policy, RateLimitLayer};
use tower::{Layer, Service, ServiceExt};
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfig;
use tower_governor::governor::GovernorConfigBuilder;

/// The inner service: a response at once.
#[derive(Clone)]
struct Ok200;

impl Service<Request<()>> for Ok200 {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<()>) -> Self::Future {
        ready(Ok(Response::new(Body::empty())))
    }
}

/// redlimit on the memory store: `limit` on one hot key, the default `X-RateLimit-*` headers.
fn redlimit_layer(limit: Limit) -> RateLimitLayer {
    let policy = Policy::new("bench", [limit]).expect("a policy");
    RateLimitLayer::builder(MemoryStore::new(), policy)
        .key(Global)
        .build()
        .expect("valid layer")
}

fn redlimit(
    limit: Limit,
) -> impl Service<Request<()>, Response = Response<impl Sized>, Error = Infallible> + Clone {
    redlimit_layer(limit).layer(Ok200)
}

#[derive(Clone)]
struct HotKey;

impl tower_governor::key_extractor::KeyExtractor for HotKey {
    type Key = ();

    fn extract<T>(&self, _: &http::Request<T>) -> Result<(), tower_governor::GovernorError> {
        Ok(())
    }
}

/// tower_governor with its headers: a quota of `burst` replenished one per `period`, one hot key.
fn governor_config(
    period: Duration,
    burst: u32,
) -> GovernorConfig<HotKey, governor::middleware::StateInformationMiddleware> {
    GovernorConfigBuilder::default()
        .period(period)
        .burst_size(burst)
        .key_extractor(HotKey)
        .use_headers()
        .finish()
        .expect("governor config")
}

fn governor(
    period: Duration,
    burst: u32,
) -> impl Service<Request<()>, Response = Response<Body>, Error = Infallible> + Clone {
    GovernorLayer::new(governor_config(period, burst)).layer(Ok200)
}

/// 10^9 at one per ms: never reached, and its state (a TAT 1 ms ahead) outlives the gap
/// between two calls, as a hot key's does; governor's keyed state stays too.
fn never_reached() -> Limit {
    Limit::gcra(1_000_000_000, Duration::from_secs(1_000_000)).expect("a limit")
}

/// governor's quota that is never reached: a burst of `u32::MAX`, one more each nanosecond.
const GOVERNOR_NEVER: (Duration, u32) = (Duration::from_nanos(1), u32::MAX);

fn request() -> Request<()> {
    Request::get("/")
        .header("host", "localhost")
        .header("user-agent", "bench/1.0")
        .body(())
        .expect("a request")
}

/// One call: ready, call, the response's status.
fn one<S, B>(service: &mut S, request: &Request<()>) -> u16
where
    S: Service<Request<()>, Response = Response<B>>,
    S::Error: std::fmt::Debug,
{
    let response = answer(service.call(request.clone()));
    black_box(response.headers().len());
    response.status().as_u16()
}

/// The future's output: polled once (every variant's future is ready at once).
fn answer<F, R, E>(future: F) -> R
where
    F: Future<Output = Result<R, E>>,
    E: std::fmt::Debug,
{
    future
        .now_or_never()
        .expect("an answer without waiting")
        .expect("infallible")
}

/// A variant: its name and a call that returns the status.
type Variant = (&'static str, Box<dyn FnMut(&Request<()>) -> u16>);

fn variants() -> Vec<Variant> {
    let denied = Limit::gcra(1, Duration::from_secs(3_600)).expect("a limit");
    let mut bare = Ok200;
    let mut r_allowed = redlimit(never_reached());
    let mut r_denied = redlimit(denied);
    let mut g_allowed = governor(GOVERNOR_NEVER.0, GOVERNOR_NEVER.1);
    let mut g_denied = governor(Duration::from_secs(3_600), 1);
    vec![
        ("bare", Box::new(move |r| one(&mut bare, r))),
        (
            "redlimit-allowed",
            Box::new(move |r| one(&mut r_allowed, r)),
        ),
        (
            "governor-allowed",
            Box::new(move |r| one(&mut g_allowed, r)),
        ),
        ("redlimit-denied", Box::new(move |r| one(&mut r_denied, r))),
        ("governor-denied", Box::new(move |r| one(&mut g_denied, r))),
    ]
}

/// Checks each variant answers as its name says (the denied ones after their one admission).
fn checked(variants: &mut [Variant], request: &Request<()>) {
    for (name, call) in variants.iter_mut() {
        let first = call(request);
        let status = call(request);
        let expected = if name.ends_with("denied") { 429 } else { 200 };
        assert_eq!((first, status), (200, expected), "{name}");
    }
}

fn app() -> Router {
    Router::new().route("/", get(|| async { "ok" }))
}

/// The apps a request goes through: bare axum, then each limiter as a layer of the app.
fn apps() -> [(&'static str, Router); 3] {
    let (period, burst) = GOVERNOR_NEVER;
    [
        ("app-bare", app()),
        ("app-redlimit", app().layer(redlimit_layer(never_reached()))),
        (
            "app-governor",
            app().layer(GovernorLayer::new(governor_config(period, burst))),
        ),
    ]
}

fn app_request() -> Request<Body> {
    Request::get("/")
        .header("host", "localhost")
        .header("user-agent", "bench/1.0")
        .body(Body::empty())
        .expect("a request")
}

/// One request through `app`, its body read to the end.
async fn through(app: &Router, request: Request<Body>) {
    let response = app.clone().oneshot(request).await.expect("infallible");
    assert!(response.status().is_success());
    let body = response.into_body().collect().await.expect("a body");
    black_box(body);
}

/// `REDLIMIT_BENCH_LOOP=NAME:N`: N calls of the variant NAME, nothing else.
fn run_loop(spec: &str) {
    let (name, n) = spec.split_once(':').expect("REDLIMIT_BENCH_LOOP=NAME:N");
    let n: u64 = n.parse().expect("N is a number");
    let runtime = runtime();
    let thread = support::current_thread_proc();
    if let Some((_, app)) = many_keys::apps().into_iter().find(|(app, _)| *app == name) {
        runtime.block_on(many_keys::warm_up(&app));
        let before = support::cpu_us(&thread);
        runtime.block_on(many_keys::requests(&app, n));
        report_cpu(name, n, support::cpu_us(&thread) - before);
        return;
    }
    if let Some((_, app)) = apps().into_iter().find(|(app, _)| *app == name) {
        let before = support::cpu_us(&thread);
        runtime.block_on(async {
            for _ in 0..n {
                through(&app, app_request()).await;
            }
        });
        report_cpu(name, n, support::cpu_us(&thread) - before);
        return;
    }
    #[cfg(feature = "redis")]
    if on_redis::NAMES.contains(&name) {
        on_redis::run(&runtime, name, n);
        return;
    }
    let _inside = runtime.enter();
    let request = request();
    let mut variants = variants();
    checked(&mut variants, &request);
    let (_, call) = variants
        .iter_mut()
        .find(|(variant, _)| *variant == name)
        .expect(
            "NAME: bare, redlimit-allowed, redlimit-denied, governor-allowed, governor-denied, \
             app-bare, app-redlimit, app-governor, app-bare-100k, app-redlimit-100k, \
             app-governor-100k, app-bare-64, app-redis, app-redis-plain, app-minimal, \
             app-redis-100k, app-minimal-100k",
        );
    let before = support::cpu_us(&thread);
    for _ in 0..n {
        black_box(call(&request));
    }
    report_cpu(name, n, support::cpu_us(&thread) - before);
}

/// The loop's CPU time per call, on stderr (the kernel counts in 10 ms ticks: run enough calls).
fn report_cpu(name: &str, n: u64, cpu_us: f64) {
    eprintln!(
        "{name}: {n} calls, {:.3} µs of CPU each",
        cpu_us / n.max(1) as f64
    );
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

fn layer_service(c: &mut Criterion) {
    let runtime = runtime();
    let _inside = runtime.enter();
    let request = request();
    let mut variants = variants();
    checked(&mut variants, &request);
    let mut group = c.benchmark_group("the service called directly");
    for (name, call) in &mut variants {
        group.bench_function(*name, |b| b.iter(|| call(&request)));
    }
    group.finish();
}

fn layer_path(c: &mut Criterion) {
    let runtime = runtime();
    let mut group = c.benchmark_group("request through the app");
    for (name, app) in apps() {
        group.bench_function(name, |b| {
            b.iter(|| runtime.block_on(through(&app, app_request())))
        });
    }
    group.finish();
}

criterion_group!(benches, layer_service, layer_path);

fn main() {
    if let Ok(spec) = std::env::var("REDLIMIT_BENCH_LOOP") {
        run_loop(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

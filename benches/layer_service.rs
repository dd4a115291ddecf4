//! The layer's own work per request and nothing else: the tower `Service` called directly with
//! a prebuilt request (cloned per call), over an inner service that answers at once; no
//! socket, no router, no runtime scheduling (each future is polled once, and is ready).
//! redlimit on the memory store (GCRA, one hot key, with its `X-RateLimit-*` headers) beside
//! tower_governor's layer (one hot key, `use_headers()`), on the allowed path (a limit never
//! reached) and the denied path (a limit of one per hour, spent); the inner service alone is
//! the baseline both are measured against.
//!
//! `cargo bench --bench layer_service` (add `-- --quick` for a fast look). The figure to read
//! is each layer's time minus the baseline's: redlimit's over governor's is the ratio the
//! results report.
//!
//! `REDLIMIT_BENCH_LOOP=NAME:N` runs N calls of one variant (`bare`, `redlimit-allowed`,
//! `redlimit-denied`, `governor-allowed`, `governor-denied`) and exits, for callgrind:
//!
//! ```text
//! cargo bench --bench layer_service --no-run
//! REDLIMIT_BENCH_LOOP=redlimit-allowed:100000 valgrind --tool=callgrind target/release/deps/layer_service-* --bench
//! ```

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use axum::body::Body;
use criterion::{criterion_group, Criterion};
use futures_util::FutureExt;
use http::{Request, Response};
use redlimit::key::Global;
use redlimit::store::MemoryStore;
use redlimit::{Limit, Policy, RateLimitLayer};
use tower::{Layer, Service};

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

fn redlimit(
    limit: Limit,
) -> impl Service<Request<()>, Response = Response<impl Sized>, Error = Infallible> + Clone {
    let policy = Policy::new("bench", [limit]).expect("a policy");
    RateLimitLayer::builder(MemoryStore::new(), policy)
        .key(Global)
        .build()
        .expect("valid layer")
        .layer(Ok200)
}

#[derive(Clone)]
struct HotKey;

impl tower_governor::key_extractor::KeyExtractor for HotKey {
    type Key = ();

    fn extract<T>(&self, _: &http::Request<T>) -> Result<(), tower_governor::GovernorError> {
        Ok(())
    }
}

/// tower_governor with its headers: a quota of `burst` replenished one per `period`.
fn governor(
    period: Duration,
    burst: u32,
) -> impl Service<Request<()>, Response = Response<Body>, Error = Infallible> + Clone {
    let config = tower_governor::governor::GovernorConfigBuilder::default()
        .period(period)
        .burst_size(burst)
        .key_extractor(HotKey)
        .use_headers()
        .finish()
        .expect("governor config");
    tower_governor::GovernorLayer::new(config).layer(Ok200)
}

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
    // 10^9 at one per ms: never reached, and its state (a TAT 1 ms ahead) outlives the gap
    // between two calls, as a hot key's does; governor's keyed state stays too.
    let allowed = Limit::gcra(1_000_000_000, Duration::from_secs(1_000_000)).expect("a limit");
    let denied = Limit::gcra(1, Duration::from_secs(3_600)).expect("a limit");
    let mut bare = Ok200;
    let mut r_allowed = redlimit(allowed);
    let mut r_denied = redlimit(denied);
    let mut g_allowed = governor(Duration::from_nanos(1), NonZeroU32::MAX.get());
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

/// `REDLIMIT_BENCH_LOOP=NAME:N`: N calls of the variant NAME, nothing else.
fn run_loop(spec: &str) {
    let (name, n) = spec.split_once(':').expect("REDLIMIT_BENCH_LOOP=NAME:N");
    let n: u64 = n.parse().expect("N is a number");
    let runtime = runtime();
    let _inside = runtime.enter();
    let request = request();
    let mut variants = variants();
    checked(&mut variants, &request);
    let (_, call) = variants
        .iter_mut()
        .find(|(variant, _)| *variant == name)
        .expect("NAME: bare, redlimit-allowed, redlimit-denied, governor-allowed, governor-denied");
    for _ in 0..n {
        black_box(call(&request));
    }
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

criterion_group!(benches, layer_service);

fn main() {
    if let Ok(spec) = std::env::var("REDLIMIT_BENCH_LOOP") {
        run_loop(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

//! 100k keys through the app, as `benches/http.rs`'s "100k keys" rows: every request carries
//! an `x-key` header, one of 100 000 values taken in the same stride; redlimit keys on it (the
//! header's text, as a closure), governor on the same text as a `String`; both at 10^6 per
//! second, so every request is admitted and each key's state has lapsed by its next request.

use std::num::NonZeroU32;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::Request;
use redlimit::store::MemoryStore;
use redlimit::{Key, Limit, Policy, RateLimitLayer};
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

use crate::{app, through};

/// Distinct keys, as `benches/http.rs`.
const KEYS: u64 = 100_000;
/// The stride through them, as `benches/http.rs`'s.
const STRIDE: u64 = 7_919;
/// 10^6 per second, as `benches/http.rs`.
const RATE: u64 = 1_000_000;

#[derive(Clone)]
struct ByHeader;

impl tower_governor::key_extractor::KeyExtractor for ByHeader {
    type Key = String;

    fn extract<T>(&self, req: &Request<T>) -> Result<String, tower_governor::GovernorError> {
        Ok(req
            .headers()
            .get("x-key")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned())
    }
}

pub(super) fn apps() -> [(&'static str, Router); 3] {
    let policy = Policy::new(
        "bench",
        [Limit::gcra(RATE, Duration::from_secs(1)).expect("a limit")],
    )
    .expect("a policy");
    let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
        .key(|parts: &http::request::Parts| {
            parts.headers.get("x-key").map(|v| Key::new(v.as_bytes()))
        })
        .build()
        .expect("valid layer");
    let governor = GovernorConfigBuilder::default()
        .per_nanosecond(1_000)
        .burst_size(NonZeroU32::new(RATE as u32).expect("not zero").get())
        .key_extractor(ByHeader)
        .use_headers()
        .finish()
        .expect("governor config");
    [
        ("app-bare-100k", app()),
        ("app-redlimit-100k", app().layer(layer)),
        (
            "app-governor-100k",
            app().layer(GovernorLayer::new(governor)),
        ),
    ]
}

fn request(key: u64) -> Request<Body> {
    Request::get("/")
        .header("host", "localhost")
        .header("user-agent", "bench/1.0")
        .header("x-key", key)
        .body(Body::empty())
        .expect("a request")
}

/// `n` requests, one at a time, the keys in `benches/http.rs`'s order.
pub(super) async fn requests(app: &Router, n: u64) {
    let mut key = 0;
    for _ in 0..n {
        key = (key + STRIDE) % KEYS;
        through(app, request(key)).await;
    }
}

/// Every key seen once, so that each limiter's table holds what it holds in a long run.
pub(super) async fn warm_up(app: &Router) {
    requests(app, KEYS).await;
}

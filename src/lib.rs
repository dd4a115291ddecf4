//! Distributed rate limiting for axum, tonic and hyper: a Tower layer whose limits hold across
//! every replica of a service, with Redis (or Valkey) as the shared state.
//!
//! ```no_run
//! use std::{net::SocketAddr, time::Duration};
//! use axum::{routing::post, Router};
//! use redlimit::store::RedisStore;
//! use redlimit::{Limit, Policy, RateLimitLayer};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = RedisStore::connect("redis://127.0.0.1:6379").await?;
//! let policy = Policy::new("auth.create_token", [
//!     Limit::sliding_log(20, Duration::from_secs(60))?,
//!     Limit::sliding_log(5, Duration::from_secs(3))?,
//! ])?;
//! let app = Router::new()
//!     .route("/token", post(|| async { "token" }))
//!     .layer(RateLimitLayer::new(store, policy)); // key: the peer IP
//! let listener = tokio::net::TcpListener::bind("0.0.0.0:3000").await?;
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(()) }
//! ```
//!
//! # How a request flows
//!
//! 1. A [`KeyExtractor`] turns the request head into a [`Key`]: the socket peer's address
//!    ([`key::PeerIp`], the default), a client IP behind trusted proxies ([`key::ClientIp`]), an
//!    API key ([`key::Header`], hashed), a verified subject, the route, or a combination (see
//!    the [`key`] module).
//! 2. A [`Store`](store::Store) checks every [`Limit`] of the [`Policy`] for that key,
//!    atomically: in Redis one `EVALSHA` of one Lua script that reads Redis `TIME`
//!    (`store::RedisStore`); in memory the same algorithms in Rust ([`store::MemoryStore`]).
//! 3. The [`Decision`] either lets the request through (with `X-RateLimit-*` headers on the
//!    response, and the decision in the request's extensions) or answers `429 Too Many
//!    Requests` with `Retry-After`.
//! 4. If the store fails or takes longer than the deadline (100 ms), the layer's
//!    [`OnStoreError`](layer::OnStoreError) decides (see "Failure modes" below).
//!
//! # Several limits, checked atomically
//!
//! A request is allowed only if every limit of the policy allows it, and only then does any
//! limit consume: a request denied by "5 per 3 s" does not use up "20 per minute". The decision
//! names the limit that denied ([`Decision::denied_by`]) and each limit's remaining units and
//! reset time. Limits of different algorithms mix freely.
//!
//! # Algorithms
//!
//! `N/P` below is [`Limit::count`] per [`Limit::period`].
//!
//! | algorithm | admits | state per key | use it for |
//! |---|---|---|---|
//! | [`fixed_window`](Limit::fixed_window) | `N` per epoch-aligned window | one counter | simple quotas ("1000 per day"); up to `2N` across a window edge |
//! | [`sliding_window`](Limit::sliding_window) | ≈ `N` in any `P` (previous window weighted by overlap) | two counters | smooth limits at O(1) memory (Cloudflare's approach) |
//! | [`sliding_log`](Limit::sliding_log) | exactly `N` in any `P` | one entry per admission | strict, low limits (logins, tokens) |
//! | [`token_bucket`](Limit::token_bucket) | bursts of `N`, refilled at `N/P` | tokens and a time | APIs that allow bursts (Stripe: burst 500, 100/s) |
//! | [`gcra`](Limit::gcra) | bursts of `N`, one unit every `P/N` | one time | smooth per-client rates at the least cost |
//! | [`concurrency`](Limit::concurrency) | `N` requests in flight (`P`: the lease timeout) | one entry per request in flight | uploads, exports, LLM calls: load that is the requests' duration |
//!
//! A concurrency limit is not a rate: a request holds a [`Lease`] from its admission until its
//! response body ends or is dropped (a client gone, a handler panicked), when the layer gives
//! it back ([`Store::release`](store::Store::release)); a lease its replica never gave back
//! lapses after `P`. It mixes with rate limits in one policy, checked atomically with them.
//!
//! Token bucket and GCRA space units `ceil(P/N)` µs apart, so they never exceed `N/P`.
//!
//! # Headers
//!
//! Allowed and denied responses carry `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
//! `X-RateLimit-Reset` (Unix seconds) of the most restrictive limit; a 429 adds `Retry-After`
//! (seconds, rounded up, at least 1). The IETF draft's `RateLimit-Policy` / `RateLimit` fields,
//! listing every limit of the policy, are an option ([`HeaderStyle`](layer::HeaderStyle)), and
//! so is an RFC 9457 `application/problem+json` body naming the violated quota policies
//! ([`RejectBody`](layer::RejectBody)). gRPC and gRPC-Web calls get `grpc-status: 8`
//! (RESOURCE_EXHAUSTED) in an HTTP 200 response instead of a 429
//! ([`GrpcStatus`](layer::GrpcStatus)), with `ErrorInfo`, `RetryInfo` and `QuotaFailure`
//! details (feature `grpc`).
//!
//! # Failure modes
//!
//! | what happens | the layer does |
//! |---|---|
//! | the store answers within the deadline (default 100 ms) | decides by it |
//! | the store misses the deadline, or more than 256 store calls are in flight | decides in memory with this instance's share of each limit ([`DecisionSource::Local`]): a slow store may be a flood, and load must never turn limiting off; the late call finishes in the background for the breaker to count |
//! | the store errs, or its circuit is open | the failure mode: [`OnStoreError::Local`](layer::OnStoreError::Local) (default): decides in memory with this instance's share of each limit; [`OnStoreError::Open`](layer::OnStoreError::Open): lets the request through, logs (`warn` at most once a second); [`OnStoreError::Closed`](layer::OnStoreError::Closed): `503` (gRPC `UNAVAILABLE`), never 429 |
//! | most calls fail (errors, or no answer at all for 1 s) | the [`CircuitBreaker`](layer::CircuitBreaker) opens (half of at least 20 calls in 10 s, per Cluster slot range): requests are decided by the failure mode at once, without waiting out the deadline; one probe per cool-down |
//! | a store call timed out or failed on I/O | it is never replayed (it may have run); only `NOSCRIPT` is retried |
//! | the request has no key | [`MissingKey`](layer::MissingKey) (default: the peer IP) |
//! | neither a key nor a peer address (a server without connect info) | `500` (gRPC `INTERNAL`) with a [`KeyMissing`](layer::KeyMissing), logged at `error` and counted, by default; [`MissingKey::PeerIpOrAllow`](layer::MissingKey::PeerIpOrAllow) lets it through instead |
//! | Redis answers garbage | a typed [`StoreError`], then the failure mode; never a panic, never a 500 from the layer |
//!
//! Every decision says where it came from ([`Decision::source`]).
//!
//! # Seeing and steering
//!
//! - **Metrics** (feature `metrics`, default) through the [`metrics`](https://docs.rs/metrics)
//!   facade: `redlimit_decisions_total{policy,outcome,source,limit}`,
//!   `redlimit_store_duration_seconds{store}`, `redlimit_store_failures_total{store,reason}`,
//!   `redlimit_breaker_state{store,domain,state}`,
//!   `redlimit_breaker_transitions_total{store,domain,state}`,
//!   `redlimit_local_first_isolated`, `redlimit_local_first_sync_age_seconds`,
//!   `redlimit_config_reloads_total{result,reason}`, `redlimit_deny_cache_entries`,
//!   `redlimit_leases_in_flight{policy}`, `redlimit_memory_evictions_total`,
//!   `redlimit_requests_undecided_total{policy,reason}` (requests let through, or answered
//!   500, without the limiter's verdict: `no_key`, `store_unavailable`, `shadow`) (names in
//!   `telemetry`). Install a recorder before the first request: a layer takes its handles at
//!   first use. For Prometheus, give the exporter `telemetry::HISTOGRAM_BUCKETS`; a Grafana
//!   dashboard is in the repository's `docs/grafana/redlimit.json`.
//! - **Tracing**: a `redlimit.decision` span per decision at `debug` (policy, outcome, source,
//!   store latency, the key as a short hash).
//! - **Shadow mode** ([`Shadow`](layer::Shadow), [`RateLimitBuilder::shadow`](layer::RateLimitBuilder::shadow)): every decision made and
//!   recorded, none denied.
//! - **Inspect and reset** a key ([`layer::Handle::inspect`], [`layer::Handle::reset`]), or
//!   over HTTP with the `admin` module (feature `admin`).
//! - **Penalty box** ([`Policy::penalty`]): a key a limit denies stays denied for a while, on
//!   every replica.
//! - **Refunds** ([`RateLimitBuilder::refund_if`](layer::RateLimitBuilder::refund_if), [`store::Refund`]): units given back after a
//!   response that should not count (a 5xx), once, never below the state before the request.
//!
//! # Modules
//!
//! The crate root holds the values a request's decision is made of; the modules hold the
//! parts you assemble. Three fronts: [`layer`] (the middleware, its builder, rules, handle
//! and settings), [`limiter`] (the client side: wait your turn under a quota shared by a
//! fleet) and `rls` (Envoy's rate limit service, feature `rls`). What they share: [`key`]
//! (key extractors), [`store`] (where state lives), [`failure`] (what a front does when the
//! store fails, and its circuit breaker), [`response`] (how a decision is told to a client:
//! rate-limit headers, problem+json, gRPC statuses) and [`duration`] (durations as flags and
//! files write them). Around them: `config` (policies from a file, feature `config`), `admin`
//! (the admin API over HTTP, feature `admin`) and `telemetry` (metric names and Prometheus
//! buckets, feature `metrics`).
//!
//! # Feature flags
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `redis` | yes | `store::RedisStore`: standalone, Cluster and Sentinel Redis or Valkey |
//! | `axum` | yes | reads axum's `MatchedPath`, `ConnectInfo` and `MockConnectInfo`; [`Decision`] as a handler argument |
//! | `tls` | no | `rediss://` URLs (rustls with the webpki roots, or your own CA), with the process's rustls crypto provider |
//! | `tls-ring` | no | `tls`, with rustls's `ring` provider installed when the process has none |
//! | `grpc` | no | tonic's peer address, and `ErrorInfo` / `RetryInfo` / `QuotaFailure` details on gRPC rejections |
//! | `jwt` | no | [`key::Jwt`]: verify an HMAC bearer token (HS256/384/512, or any algorithm through a [`key::JwtVerifier`]) and key on a claim |
//! | `jwks` | no | `jwt`, and `key::JwksVerifier`: RS256/384/512, PS256/384/512, ES256/384 and EdDSA with the public keys of a JWKS file, followed on change |
//! | `metrics` | yes | counters, gauges and histograms through the [`metrics`](https://docs.rs/metrics) facade (see "Seeing and steering" below); `telemetry::HISTOGRAM_BUCKETS` for Prometheus |
//! | `config` | no | `config`: policies and routes from a TOML file, reloaded when it changes or on SIGHUP |
//! | `admin` | no | `admin::router`: an axum router to inspect and reset keys and set overrides, behind a bearer token; with `rls`, `rls::admin::router` does the same for the rate limit service's descriptors, and sets shadow mode |
//! | `rls` | no | `rls`: Envoy's rate limit service (RLS v3 `ShouldRateLimit`) over any store, with envoyproxy/ratelimit's YAML config |
//! | `rlqs` | no | `rlqs`: Envoy's Rate Limit Quota Service (RLQS v3 `StreamRateLimitQuotas`): token-bucket shares of one fleet-wide quota per bucket, from the same YAML, aggregated in Redis with `redis` |
//!
//! Without default features the crate is the layer, the key extractors and the memory store.
//!
//! # Examples
//!
//! The repository's `examples/` run as they are:
//!
//! - `quickstart`: an axum app with two limits on one route (`cargo run --example quickstart`;
//!   the in-memory store unless `REDIS_URL` is set).
//! - `production` (features `admin`, `config`): the parts composed as deployed: Redis from the
//!   environment, a watched config file, Prometheus with buckets, the admin API, graceful
//!   shutdown.
//! - `server`: every option on the command line (`--help`), used by the black-box tests.
//! - `grpc` (feature `grpc`): a tonic health service behind the layer.
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "admin")]
#[cfg_attr(docsrs, doc(cfg(feature = "admin")))]
pub mod admin;
mod algorithm;
pub mod calendar;
#[cfg(feature = "config")]
#[cfg_attr(docsrs, doc(cfg(feature = "config")))]
pub mod config;
mod decision;
pub mod duration;
mod engine;
mod error;
pub mod failure;
mod identity;
pub mod key;
pub mod layer;
mod lease;
mod limit;
pub mod limiter;
mod policy;
pub mod response;
#[cfg(feature = "rlqs")]
#[cfg_attr(docsrs, doc(cfg(feature = "rlqs")))]
pub mod rlqs;
#[cfg(feature = "rls")]
#[cfg_attr(docsrs, doc(cfg(feature = "rls")))]
pub mod rls;
pub mod store;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod telemetry;
#[cfg(not(feature = "metrics"))]
mod telemetry;

/// Not part of the API: the hooks the crate's own tests and benches use, compiled only with
/// the `__test-hooks` feature (no semver promise).
#[cfg(feature = "__test-hooks")]
#[doc(hidden)]
#[path = "private/mod.rs"]
pub mod __private;

// The README's and the guides' Rust blocks are compiled (and run, but for `no_run`) as doc
// tests, so the pages cannot drift from the API.
#[cfg(all(
    doctest,
    feature = "redis",
    feature = "axum",
    feature = "config",
    feature = "grpc",
    feature = "metrics"
))]
mod doc_pages {
    #[doc = include_str!("../README.md")]
    struct Readme;
    #[doc = include_str!("../docs/guide/keys.md")]
    struct Keys;
    #[doc = include_str!("../docs/guide/algorithms.md")]
    struct Algorithms;
    #[doc = include_str!("../docs/guide/policies.md")]
    struct Policies;
    #[doc = include_str!("../docs/guide/stores.md")]
    struct Stores;
    #[doc = include_str!("../docs/guide/failure-modes.md")]
    struct FailureModes;
    #[doc = include_str!("../docs/guide/responses.md")]
    struct Responses;
    #[doc = include_str!("../docs/guide/operations.md")]
    struct Operations;
    #[doc = include_str!("../docs/guide/performance.md")]
    struct Performance;
    #[doc = include_str!("../docs/guide/outbound.md")]
    struct Outbound;
    #[doc = include_str!("../docs/guide/token-budgets.md")]
    struct TokenBudgets;
}

pub use algorithm::Algorithm;
pub use calendar::Calendar;
pub use decision::{Decision, DecisionSource, LimitState};
pub use error::{BoxError, ConfigError, StoreError};
pub use key::{Key, KeyExtractor};
#[doc(inline)]
pub use layer::RateLimitLayer;
pub use lease::Lease;
pub use limit::Limit;
pub use policy::{MAX_LIMITS, Policy};

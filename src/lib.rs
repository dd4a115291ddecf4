//! Distributed rate limiting for axum, tonic and hyper: a Tower layer whose limits hold across
//! every replica of a service, with Redis (or Valkey) as the shared state.
//!
//! ```no_run
//! use std::{net::SocketAddr, time::Duration};
//! use axum::{routing::post, Router};
//! use redlimit::{Limit, Policy, RateLimitLayer, RedisStore};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = RedisStore::connect("redis://127.0.0.1:6379").await?;
//! let policy = Policy::new("auth.create_token")
//!     .limit(Limit::sliding_log(20, Duration::from_secs(60)))
//!     .limit(Limit::sliding_log(5, Duration::from_secs(3)));
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
//! 1. A [`KeyExtractor`] turns the request head into a [`Key`]: [`PeerIp`] (default),
//!    [`Header`] (hashed), [`Route`], [`Global`], a closure, or [`Both`].
//! 2. The [`Store`] checks every [`Limit`] of the [`Policy`] for that key, atomically: in Redis
//!    one `EVALSHA` of one Lua script that reads Redis `TIME` ([`RedisStore`]); in memory the
//!    same algorithms in Rust ([`MemoryStore`]).
//! 3. The [`Decision`] either lets the request through (with `X-RateLimit-*` headers on the
//!    response, and the decision in the request's extensions) or answers `429 Too Many
//!    Requests` with `Retry-After`.
//! 4. If the store fails or takes longer than the deadline (100 ms), the request goes through
//!    unlimited ([`OnStoreError::Open`], the default) or gets `503` ([`OnStoreError::Closed`]).
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
//! | [`sliding_log`](Limit::sliding_log) | exactly `N` in any `P` | one entry per admitted unit | strict, low limits (logins, tokens) |
//! | [`token_bucket`](Limit::token_bucket) | bursts of `N`, refilled at `N/P` | tokens and a time | APIs that allow bursts (Stripe: burst 500, 100/s) |
//! | [`gcra`](Limit::gcra) | bursts of `N`, one unit every `P/N` | one time | smooth per-client rates at the least cost |
//!
//! Token bucket and GCRA space units `ceil(P/N)` µs apart, so they never exceed `N/P`.
//!
//! # Headers
//!
//! Allowed and denied responses carry `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
//! `X-RateLimit-Reset` (Unix seconds) of the most restrictive limit; a 429 adds `Retry-After`
//! (seconds, rounded up, at least 1). The IETF draft's `RateLimit-Policy` / `RateLimit` fields
//! are an option ([`HeaderStyle`]).

mod algorithm;
#[doc(hidden)]
pub mod bench_support;
mod decision;
mod duration;
mod error;
mod key;
mod layer;
mod limit;
mod policy;
mod store;

pub use decision::{Decision, DecisionSource, LimitState};
pub use error::{ConfigError, StoreError};
#[cfg(feature = "jwt")]
pub use key::{jsonwebtoken, Jwt};
pub use key::{
    AuthenticatedSubject, Both, ClientIp, Global, Header, Key, KeyExtractor, OrElse, PeerIp,
    ProxyHeader, Query, Route, Subject, VerifiedSubject,
};
pub use layer::{
    CircuitBreaker, GrpcStatus, HeaderStyle, MissingKey, OnStoreError, RateLimit, RateLimitLayer,
    ResponseBody, ResponseFuture,
};
pub use limit::{Algorithm, Limit};
pub use policy::{Policy, MAX_LIMITS};
pub use store::{
    Clock, ManualClock, MemoryStore, MemoryStoreBuilder, Store, StoreFuture, SystemClock,
    DEFAULT_MAX_KEYS,
};
#[cfg(feature = "redis")]
pub use store::{RedisStore, RedisStoreBuilder};

//! The Tower middleware: [`RateLimitLayer`] → [`RateLimit`] → [`ResponseFuture`], whose
//! responses carry a [`ResponseBody`].
//!
//! For each request (see `decide.rs`): skip it if an allow rule accepts it; pick the first
//! matching route rule (else the layer's own policy); extract the key; ask the circuit breaker;
//! check the policy in the store, bounded by the deadline. Then either call the inner service,
//! with the [`Decision`](crate::Decision) in the request's extensions and `X-RateLimit-*`
//! headers added to its response, or answer at once: 429 with `Retry-After` or a gRPC status,
//! with the decision in the response's extensions for the layers outside; 503 when failing
//! closed. A rejection is a response: the service's error type is the inner service's.
//!
//! ```
//! use std::time::Duration;
//! use axum::{routing::get, Router};
//! use redlimit::store::MemoryStore;
//! use redlimit::{Limit, Policy, RateLimitLayer};
//!
//! let policy = Policy::new("api", [Limit::gcra(10, Duration::from_secs(1))?])?;
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "ok" }))
//!     .layer(RateLimitLayer::new(MemoryStore::new(), policy));
//! # Ok::<(), redlimit::ConfigError>(())
//! ```

mod admin;
mod body;
mod breaker;
mod breakers;
mod config;
mod decide;
mod deny_cache;
#[cfg(feature = "axum")]
mod extract;
#[cfg(feature = "config")]
mod from_file;
mod future;
mod grpc;
mod headers;
mod held_lease;
mod in_flight;
// tower-http's triad names the file after its role: `layer/layer.rs` holds the `Layer`.
#[allow(clippy::module_inception)]
mod layer;
mod local;
mod meters;
mod refund;
mod route_pattern;
mod rule;
mod service;
mod settings;
mod throttle;

pub use body::ResponseBody;
#[cfg(feature = "config")]
pub(crate) use config::Config;
#[cfg(feature = "config")]
pub(crate) use decide::Decider;
pub use future::ResponseFuture;
pub(crate) use headers::render as render_headers;
pub use layer::RateLimitLayer;
#[cfg(feature = "config")]
pub(crate) use route_pattern::RoutePattern;
#[cfg(feature = "config")]
pub(crate) use rule::Rule;
pub use service::RateLimit;
pub use settings::{CircuitBreaker, GrpcStatus, HeaderStyle, MissingKey, OnStoreError, Shadow};

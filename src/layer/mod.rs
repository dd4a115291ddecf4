//! The Tower middleware: [`RateLimitLayer`] → [`RateLimit`] → [`ResponseFuture`].
//!
//! For each request: extract the key, check the policy in the store (bounded by a deadline),
//! then call the inner service with `X-RateLimit-*` headers added to its response, or answer
//! 429 with `Retry-After`. A rejection is a response: the service's error type is the inner
//! service's.
//!
//! ```
//! use std::time::Duration;
//! use axum::{routing::get, Router};
//! use redlimit::{Limit, MemoryStore, Policy, RateLimitLayer};
//!
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "ok" }))
//!     .layer(RateLimitLayer::new(
//!         MemoryStore::new(),
//!         Policy::new("api").limit(Limit::gcra(10, Duration::from_secs(1))),
//!     ));
//! ```

mod body;
mod breaker;
mod config;
mod failure;
mod future;
mod grpc;
mod headers;
#[allow(clippy::module_inception)]
mod layer;
mod rule;
mod service;

pub use body::ResponseBody;
pub use breaker::CircuitBreaker;
pub use failure::{MissingKey, OnStoreError};
pub use future::ResponseFuture;
pub use grpc::GrpcStatus;
pub(crate) use headers::render as render_headers;
pub use headers::HeaderStyle;
pub use layer::RateLimitLayer;
pub use service::RateLimit;

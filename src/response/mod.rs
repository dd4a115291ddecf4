//! How a decision is told to a client, whichever front made it: the rate-limit headers in
//! their [`HeaderStyle`] (`X-RateLimit-*`, the IETF draft's `RateLimit-Policy` and
//! `RateLimit`, `Retry-After`), an RFC 9457 `application/problem+json` body, a gRPC status in
//! the caller's framing (gRPC or gRPC-Web) with its rich error details, and the quota names
//! that the headers, the problem body and the details all give. The Tower layer answers HTTP
//! requests with them ([`layer`](crate::layer) re-exports [`HeaderStyle`]); the rate limit
//! service (`rls`, feature `rls`) renders the same fields into Envoy's
//! `response_headers_to_add`.
//!
//! ```
//! use std::time::Duration;
//! use redlimit::response::HeaderStyle;
//! use redlimit::store::MemoryStore;
//! use redlimit::{Limit, Policy, RateLimitLayer};
//!
//! let policy = Policy::new("api", [Limit::gcra(10, Duration::from_secs(1))?])?;
//! let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
//!     .headers(HeaderStyle::Both)
//!     .build()?;
//! # Ok::<(), redlimit::ConfigError>(())
//! ```

pub(crate) mod grpc;
mod header_number;
mod header_style;
pub(crate) mod headers;
pub(crate) mod problem;
pub(crate) mod quota_names;

pub use header_style::HeaderStyle;

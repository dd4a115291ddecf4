//! When the store fails: what a front decides then ([`OnStoreError`]) and when it stops
//! calling a failing store ([`CircuitBreaker`]). Every front takes these two settings, the
//! Tower layer ([`RateLimitBuilder`](crate::layer::RateLimitBuilder), which re-exports them as
//! `redlimit::layer::{OnStoreError, CircuitBreaker}`) and the rate limit service (`rls`,
//! feature `rls`) alike; the engine under them applies them.
//!
//! ```
//! use std::time::Duration;
//! use redlimit::failure::{CircuitBreaker, OnStoreError};
//! use redlimit::store::MemoryStore;
//! use redlimit::{Limit, Policy, RateLimitLayer};
//!
//! let policy = Policy::new("api", [Limit::gcra(10, Duration::from_secs(1))?])?;
//! let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
//!     .on_store_error(OnStoreError::Local { instances: 4 })
//!     .circuit_breaker(CircuitBreaker::new().cool_down(Duration::from_secs(2)))
//!     .build()?;
//! # Ok::<(), redlimit::ConfigError>(())
//! ```

pub(crate) mod circuit_breaker;
mod on_store_error;

pub use circuit_breaker::CircuitBreaker;
pub use on_store_error::OnStoreError;

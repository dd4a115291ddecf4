//! The client side: wait your turn under a quota shared by a fleet, for outbound calls and
//! jobs. Where [`RateLimitLayer`](crate::RateLimitLayer) refuses a client over the limit, a
//! [`Limiter`] makes the caller wait until its slot: twenty workers that together may call a
//! payment API 100 times a second, a crawler at 2 requests a second per host, replicas sharing
//! an LLM provider's 500 requests and 90 000 tokens a minute.
//!
//! [`Limiter::acquire`] makes one store call that books the earliest slot under every limit of
//! the policy (GCRA and token bucket limits reserve: the reservation moves their state
//! forward, in one Lua script on Redis `TIME`), then sleeps exactly until it: no retries, no
//! storm at a window edge, callers served in the order they reserved, across every process
//! on the same Redis. Dropping the future before its slot gives the units back;
//! [`Permit::settle`] charges or refunds the difference when the real cost is known.
//! Fixed and sliding windows and the sliding log cannot book a future slot: over them the
//! limiter checks, and while denied sleeps the decision's `retry_after` plus a jitter of up
//! to a quarter of it (and 5 ms), then checks again. A concurrency limit has no place in a
//! limiter's policy: a permit holds no lease to release (its lease would lapse only after its
//! timeout).
//!
//! While the store fails (an error, or no answer within
//! [`store_deadline`](LimiterBuilder::store_deadline)), bookings are made in this process's
//! memory at its share of the policy ([`local_share`](LimiterBuilder::local_share), the
//! layer's `local:N`): never unlimited. After a failure the store is left alone for a
//! [`cool_down`](LimiterBuilder::cool_down), then one call tries it: its return is not a
//! stampede. That call first tells the store what memory booked meanwhile that still counts
//! (a reserving policy's units within each limit's period), so the store's idle limits do not
//! hand out a fresh burst on top of it.
//!
//! [`AcquireLayer`] does the same for any Tower client service (a hyper or reqwest client, a
//! tonic `Channel`), keyed per request, delaying instead of refusing; with
//! [`settle_with`](AcquireLayer::settle_with) it settles each permit from the response (the
//! tokens an LLM API reports it used).
//!
//! ```
//! use std::time::Duration;
//! use redlimit::limiter::Limiter;
//! use redlimit::store::MemoryStore; // RedisStore to share the quota between processes
//! use redlimit::{Limit, Policy};
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let minute = Duration::from_secs(60);
//! let llm = Policy::new("llm", [
//!     Limit::gcra(500, minute).unwrap(),          // requests
//!     Limit::token_bucket(90_000, minute).unwrap(), // tokens
//! ]).unwrap();
//! // Limit 0 counts requests (1 per permit), limit 1 the permit's cost: tokens.
//! let limiter = Limiter::builder(MemoryStore::new(), llm).per_request([0]).build();
//! let permit = limiter.acquire("provider", 400).await.unwrap();
//! // ... the call answers that it used 312 tokens ...
//! permit.settle(312).await.unwrap();
//! # });
//! ```

mod builder;
mod error;
mod handle;
mod layer;
mod permit;
mod rejoin;
mod retry;
mod service;
mod shared;

pub use builder::{DEFAULT_COOL_DOWN, DEFAULT_STORE_DEADLINE, LimiterBuilder};
pub use error::AcquireError;
pub use handle::Limiter;
pub use layer::{
    AcquireLayer, Cost, Estimate, Global, OneEach, RealCost, RequestKey, UpstreamHost, per_host,
};
pub use permit::Permit;
pub use service::{Acquire, ResponseFuture};

//! The integration tests: one binary, one folder per topic. Every test that needs Redis starts
//! its own `redis-server` processes on free loopback ports (`support/`); a topic's modules are
//! compiled when the crate features they need are on, so `cargo test --all-features` runs
//! them all.

#[cfg(feature = "redis")]
mod support;

mod e2e;
mod faults;
mod fleet;
#[cfg(feature = "redis")]
mod journeys;
mod layer;
mod limiter;
mod props;
#[cfg(all(feature = "rlqs", feature = "redis"))]
mod rlqs;
#[cfg(feature = "rls")]
mod rls;
mod store;

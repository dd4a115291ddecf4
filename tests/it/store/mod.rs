//! The stores' contract against real servers and in memory: each algorithm, multi-limit and
//! hierarchical policies, overrides, refunds, penalty boxes, in-flight limits, local-first
//! mode, TLS and Valkey.

#[cfg(feature = "redis")]
mod algorithms;
#[cfg(feature = "redis")]
mod calendar;
#[cfg(feature = "redis")]
mod changed_limits;
#[cfg(feature = "redis")]
mod clock_steps;
mod custom_store;
#[cfg(feature = "redis")]
mod debt;
#[cfg(feature = "redis")]
mod every_cost;
#[cfg(feature = "redis")]
mod hierarchical;
#[cfg(feature = "redis")]
mod hostile_cost;
#[cfg(all(feature = "axum", feature = "redis"))]
mod in_flight;
#[cfg(all(feature = "axum", feature = "redis"))]
mod inspect_reset;
#[cfg(feature = "redis")]
mod limit_costs;
#[cfg(all(feature = "axum", feature = "redis"))]
pub(crate) mod local_first;
#[cfg(feature = "redis")]
mod local_first_passthrough;
mod memory_store;
#[cfg(feature = "redis")]
mod multi_limit;
#[cfg(all(feature = "axum", feature = "redis"))]
mod overrides;
#[cfg(feature = "redis")]
mod penalty;
#[cfg(feature = "redis")]
mod redis_store;
#[cfg(feature = "redis")]
mod refunds;
// `tls-ring`: the provider these tests expect the store to install when none is.
#[cfg(all(feature = "redis", feature = "tls-ring"))]
mod tls;
#[cfg(all(feature = "redis", feature = "tls-ring"))]
mod tls_client;
#[cfg(feature = "redis")]
mod valkey;

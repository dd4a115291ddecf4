//! The client side (`redlimit::limiter`): reservations in the stores (Redis held to the
//! memory store's arithmetic), a fleet of workers over independent stores sharing one quota
//! (accuracy, fairness, store calls per permit, burstiness), a cancelled waiter's slot given
//! back, the same 10 ms away, several limits with costs settled afterwards (an LLM quota),
//! the failure modes (Redis gone, and frozen then back), and the Tower layer (its permits settled from the responses on Redis).

#[cfg(feature = "redis")]
mod cancel;
#[cfg(feature = "redis")]
mod differential;
#[cfg(feature = "redis")]
mod failure;
#[cfg(feature = "redis")]
mod fleet;
#[cfg(feature = "redis")]
mod frozen;
mod layer;
#[cfg(feature = "redis")]
mod llm;
#[cfg(feature = "redis")]
mod run;
#[cfg(feature = "redis")]
mod settle_layer;

//! The client side (`redlimit::limiter`): reservations in the stores (Redis held to the
//! memory store's arithmetic), a fleet of workers over independent stores sharing one quota
//! (accuracy, fairness, store calls per permit, burstiness), a cancelled waiter's slot given
//! back, the same 10 ms away, several limits with costs settled afterwards (an LLM quota),
//! the failure modes, and the Tower layer.

#[cfg(feature = "redis")]
mod cancel;
#[cfg(feature = "redis")]
mod differential;
#[cfg(feature = "redis")]
mod failure;
#[cfg(feature = "redis")]
mod fleet;
mod layer;
#[cfg(feature = "redis")]
mod llm;
#[cfg(feature = "redis")]
mod run;

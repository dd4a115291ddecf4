//! The metrics the crate records, through the `metrics` facade (feature `metrics`): their
//! names, in one place, and the rare events recorded where they happen. The per-request
//! decision counters are in `rate_limit/meters.rs`, which keeps their handles.
//!
//! Names follow Prometheus conventions: the `redlimit_` prefix, `_total` for counters, seconds
//! for durations. Labels have bounded values (policy and limit names, fixed words): never a
//! client key. Without a recorder installed every call is a no-op.

/// Decisions, by `policy`, `outcome` (`allowed`, `denied`, `shadow_denied`), `source` (`store`,
/// `deny_cache`, `local`, `fail_open`, `fail_closed`) and `limit` (the denying limit, empty when
/// allowed).
#[cfg(feature = "metrics")]
pub(crate) const DECISIONS: &str = "redlimit_decisions_total";
/// Store calls that waited for an answer, by `store` kind: seconds until it answered or failed
/// (an answer after the deadline included).
#[cfg(feature = "metrics")]
pub(crate) const STORE_DURATION: &str = "redlimit_store_duration_seconds";
/// Decisions the store did not make, by `store` kind and `reason` (`deadline`, `overload`,
/// `timeout`, `connection`, `script`, `reply`, `circuit_open`, `other`).
#[cfg(feature = "metrics")]
pub(crate) const STORE_FAILURES: &str = "redlimit_store_failures_total";
/// Circuit breaker transitions, by `state` entered (`open`, `closed`).
#[cfg(feature = "metrics")]
pub(crate) const BREAKER_TRANSITIONS: &str = "redlimit_breaker_transitions_total";
/// Live state the memory store evicted at its key cap.
#[cfg(feature = "metrics")]
pub(crate) const MEMORY_EVICTIONS: &str = "redlimit_memory_evictions_total";

/// The memory store evicted live state.
pub(crate) fn memory_eviction() {
    #[cfg(feature = "metrics")]
    metrics::counter!(MEMORY_EVICTIONS).increment(1);
}

/// A circuit breaker entered `state`.
pub(crate) fn breaker_transition(state: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(BREAKER_TRANSITIONS, "state" => state).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = state;
}

/// The store did not decide, for `reason`.
pub(crate) fn store_failure(store: &'static str, reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(STORE_FAILURES, "store" => store, "reason" => reason).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (store, reason);
}

/// A key as a short, stable hash (the first 8 hex digits of its SHA-256), for logs: requests
/// of one client can be followed without the logs holding the key itself.
pub(crate) struct KeyHash<'a>(pub(crate) &'a crate::Key);

impl std::fmt::Display for KeyHash<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(self.0.as_str().as_bytes());
        digest[..4].iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

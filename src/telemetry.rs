//! What the crate tells operators: the metrics it records through the `metrics` facade
//! (feature `metrics`), their names in one place and the rare events recorded where they
//! happen, and the decision span. The per-request decision counters are in
//! `layer/meters.rs`, which keeps their handles.
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

use std::time::Duration;

use crate::decision::Decision;
use crate::error::StoreError;
use crate::key::Key;

/// Describes every metric to the recorder (Prometheus shows it as `# HELP`). Called when a
/// layer takes a handle, once per label set: by then the application's recorder is installed.
#[cfg(feature = "metrics")]
pub(crate) fn describe() {
    use metrics::{describe_counter, describe_histogram, Unit};
    describe_counter!(
        DECISIONS,
        Unit::Count,
        "Rate-limit decisions by policy, outcome, source and denying limit"
    );
    describe_histogram!(
        STORE_DURATION,
        Unit::Seconds,
        "Time until a rate-limit store call answered or failed"
    );
    describe_counter!(
        STORE_FAILURES,
        Unit::Count,
        "Decisions the rate-limit store did not make, by reason"
    );
    describe_counter!(
        BREAKER_TRANSITIONS,
        Unit::Count,
        "Circuit breaker transitions, by state entered"
    );
    describe_counter!(
        MEMORY_EVICTIONS,
        Unit::Count,
        "Live state the memory store evicted at its key cap"
    );
}

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
pub(crate) struct KeyHash<'a>(pub(crate) &'a Key);

impl std::fmt::Display for KeyHash<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(self.0.as_str().as_bytes());
        digest[..4].iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// The `reason` label of a store failure.
pub(crate) fn failure_reason(error: &StoreError) -> &'static str {
    match error {
        _ if error.is_timeout() => "timeout",
        StoreError::CircuitOpen => "circuit_open",
        StoreError::Connection(_) => "connection",
        StoreError::Script(_) => "script",
        StoreError::UnexpectedReply(_) => "reply",
        _ => "other",
    }
}

/// The decision's span (debug level): policy, outcome, source, the store's latency and the
/// key only as a short hash (a key may be personal data: an IP, a user id).
pub(crate) fn trace(key: &Key, decision: &Decision, shadowed: bool, latency: Option<Duration>) {
    let outcome = match (decision.is_allowed(), shadowed) {
        (true, _) => "allowed",
        (false, false) => "denied",
        (false, true) => "shadow_denied",
    };
    let span = tracing::debug_span!(
        "redlimit.decision",
        policy = decision.policy(),
        outcome,
        source = ?decision.source(),
        store_latency_us = latency.map(|l| u64::try_from(l.as_micros()).unwrap_or(u64::MAX)),
        key = %KeyHash(key),
    );
    let _entered = span.enter();
    match decision.denied_by().and_then(|i| decision.limits().get(i)) {
        Some(state) => tracing::debug!(denied_by = %state.limit(), "rate limited"),
        None => tracing::debug!("decided"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_hash_is_short_stable_and_hides_the_key() {
        let key = Key::new("ip:203.0.113.7");
        let hash = KeyHash(&key).to_string();
        assert_eq!(hash.len(), 8);
        assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(hash, KeyHash(&Key::new("ip:203.0.113.7")).to_string());
        assert_ne!(hash, KeyHash(&Key::new("ip:203.0.113.8")).to_string());
    }
}

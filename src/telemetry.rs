//! What the crate tells operators (feature `metrics` for the metrics): the metrics it records
//! through the [`metrics`](https://docs.rs/metrics) facade, their names, and the histogram
//! buckets to give a Prometheus exporter; also (inside the crate) the rare events recorded
//! where they happen and the decision span. The per-request decision counters are in
//! `layer/meters.rs`, which keeps their handles.
//!
//! Beside the decisions and the store's latency and failures, the limiter's own health: its
//! circuit breakers ([`BREAKER_STATE`], [`BREAKER_TRANSITIONS`]), a local-first store's
//! isolation and sync age ([`LOCAL_FIRST_ISOLATED`], [`LOCAL_FIRST_SYNC_AGE`]), config reloads
//! ([`CONFIG_RELOADS`]), the deny cache ([`DENY_CACHE_ENTRIES`]) and concurrency leases
//! ([`LEASES_IN_FLIGHT`]). The repository's `docs/grafana/redlimit.json` is a Grafana
//! dashboard of them all.
//!
//! Names follow Prometheus conventions: the `redlimit_` prefix, `_total` for counters, seconds
//! for durations. Labels have bounded values (policy and limit names, fixed words): never a
//! client key. Without a recorder installed every call is a no-op.
//!
//! # Prometheus histograms
//!
//! `metrics-exporter-prometheus` renders a histogram as a *summary* (quantiles computed in
//! each process) unless it is given buckets, and summaries cannot be aggregated across
//! instances: `histogram_quantile` over `sum by (le)` needs `_bucket` series. Give it
//! [`HISTOGRAM_BUCKETS`] before installing it:
//!
//! ```
//! use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
//! let mut builder = PrometheusBuilder::new();
//! for (name, buckets) in redlimit::telemetry::HISTOGRAM_BUCKETS {
//!     builder = builder.set_buckets_for_metric(Matcher::Full(name.to_string()), buckets)?;
//! }
//! // `install_recorder()` in a service (before the first request); here a recorder of our own.
//! let recorder = builder.build_recorder();
//! let handle = recorder.handle();
//! metrics::with_local_recorder(&recorder, || {
//!     metrics::histogram!(redlimit::telemetry::STORE_DURATION, "store" => "redis").record(0.0007);
//! });
//! let text = handle.render();
//! assert!(text.contains(r#"redlimit_store_duration_seconds_bucket{store="redis",le="0.001"} 1"#), "{text}");
//! # Ok::<(), metrics_exporter_prometheus::BuildError>(())
//! ```

/// Decisions, by `policy`, `outcome` (`allowed`, `denied`, `shadow_denied`), `source` (`store`,
/// `deny_cache`, `local`, `fail_open`, `fail_closed`) and `limit` (the denying limit, empty when
/// allowed).
///
/// ```
/// assert_eq!(redlimit::telemetry::DECISIONS, "redlimit_decisions_total");
/// ```
#[cfg(feature = "metrics")]
pub const DECISIONS: &str = "redlimit_decisions_total";
/// Store calls that waited for an answer, by `store` kind: seconds until it answered or failed
/// (an answer after the deadline included).
///
/// ```
/// assert_eq!(redlimit::telemetry::STORE_DURATION, "redlimit_store_duration_seconds");
/// ```
#[cfg(feature = "metrics")]
pub const STORE_DURATION: &str = "redlimit_store_duration_seconds";
/// Decisions the store did not make, by `store` kind and `reason` (`deadline`, `overload`,
/// `timeout`, `connection`, `script`, `reply`, `circuit_open`, `other`).
///
/// ```
/// assert_eq!(redlimit::telemetry::STORE_FAILURES, "redlimit_store_failures_total");
/// ```
#[cfg(feature = "metrics")]
pub const STORE_FAILURES: &str = "redlimit_store_failures_total";
/// Circuit breaker transitions, by `store` kind, failure `domain` (as in [`BREAKER_STATE`]) and
/// `state` entered: `open` when the breaker trips (from closed: a probe that fails and opens it
/// again is not a trip), `closed` when a probe finds the store back.
///
/// ```
/// assert_eq!(redlimit::telemetry::BREAKER_TRANSITIONS, "redlimit_breaker_transitions_total");
/// ```
#[cfg(feature = "metrics")]
pub const BREAKER_TRANSITIONS: &str = "redlimit_breaker_transitions_total";
/// Circuit breaker state, as a Prometheus state set: by `store` kind, failure `domain` and
/// `state` (`closed`, `half_open`: a probe is in flight, `open`: the store is not called), the
/// number of this process's breakers in that state; with one layer, 1 for the current state
/// and 0 for the others.
///
/// `domain` is `0` for a store that fails as a whole (standalone Redis, Sentinel, memory); in
/// a Redis Cluster it is the key's range of 128 hash slots (`d` covers slots `128·d` to
/// `128·d + 127`), so a sick shard shows as the domains of its slots. A domain's series appear
/// at its breaker's first trip: no series means never tripped.
///
/// ```
/// assert_eq!(redlimit::telemetry::BREAKER_STATE, "redlimit_breaker_state");
/// ```
#[cfg(feature = "metrics")]
pub const BREAKER_STATE: &str = "redlimit_breaker_state";
/// Live state the memory store evicted at its key cap.
///
/// ```
/// assert_eq!(redlimit::telemetry::MEMORY_EVICTIONS, "redlimit_memory_evictions_total");
/// ```
#[cfg(feature = "metrics")]
pub const MEMORY_EVICTIONS: &str = "redlimit_memory_evictions_total";
/// Denials held in the deny cache (of every layer in the process; expired ones included until
/// they are replaced or evicted).
///
/// ```
/// assert_eq!(redlimit::telemetry::DENY_CACHE_ENTRIES, "redlimit_deny_cache_entries");
/// ```
#[cfg(feature = "metrics")]
pub const DENY_CACHE_ENTRIES: &str = "redlimit_deny_cache_entries";
/// Concurrency leases held by requests in flight, by `policy`: taken at admission, given back
/// when the response body ends or is dropped.
///
/// ```
/// assert_eq!(redlimit::telemetry::LEASES_IN_FLIGHT, "redlimit_leases_in_flight");
/// ```
#[cfg(feature = "metrics")]
pub const LEASES_IN_FLIGHT: &str = "redlimit_leases_in_flight";
/// Config file reloads, by `result`: `applied` (the file's rules are in force) or `refused`
/// (the previous rules stay), a refusal with its `reason`: `unreadable`, `invalid` (it does
/// not parse or validate) or `no_rules` (it has no rule and does not say
/// `allow_no_rules = true`: an empty or half-written file).
///
/// ```
/// assert_eq!(redlimit::telemetry::CONFIG_RELOADS, "redlimit_config_reloads_total");
/// ```
#[cfg(feature = "metrics")]
pub const CONFIG_RELOADS: &str = "redlimit_config_reloads_total";
/// Whether a local-first store decides alone (1): its syncs with Redis have failed for three
/// intervals, and it enforces this instance's share of each limit; 0 while it syncs.
///
/// ```
/// assert_eq!(redlimit::telemetry::LOCAL_FIRST_ISOLATED, "redlimit_local_first_isolated");
/// ```
#[cfg(feature = "metrics")]
pub const LOCAL_FIRST_ISOLATED: &str = "redlimit_local_first_isolated";
/// Seconds since a local-first store last synced with Redis: since a sync call last
/// succeeded, or a sync round found nothing to send (an idle store owes the fleet nothing).
/// Updated after each round (every interval while it runs).
///
/// ```
/// assert_eq!(
///     redlimit::telemetry::LOCAL_FIRST_SYNC_AGE,
///     "redlimit_local_first_sync_age_seconds"
/// );
/// ```
#[cfg(feature = "metrics")]
pub const LOCAL_FIRST_SYNC_AGE: &str = "redlimit_local_first_sync_age_seconds";
/// Requests that went on, or were answered `500`, without the limiter's verdict enforced, by
/// `policy` and `reason`: `no_key` (no key and no peer address: answered 500 by
/// [`MissingKey::PeerIp`](crate::layer::MissingKey::PeerIp), let through by
/// [`MissingKey::PeerIpOrAllow`](crate::layer::MissingKey::PeerIpOrAllow),
/// [`MissingKey::Allow`](crate::layer::MissingKey::Allow) or shadow mode),
/// `store_unavailable` (the store failed and the failure mode let the request through), or
/// `shadow` (shadow mode let through a request the limit denied). Alert on any increase of
/// `no_key` and `store_unavailable`.
///
/// ```
/// assert_eq!(redlimit::telemetry::REQUESTS_UNDECIDED, "redlimit_requests_undecided_total");
/// ```
#[cfg(feature = "metrics")]
pub const REQUESTS_UNDECIDED: &str = "redlimit_requests_undecided_total";

/// Settlements of a reservation that did not land, by `policy` and `reason` (`timeout`,
/// `connection`, `script`, `reply`, `other`): the layer admitted a request at an estimate
/// ([`RateLimitBuilder::cost`](crate::layer::RateLimitBuilder::cost)) and its response's real
/// cost ([`settle_with`](crate::layer::RateLimitBuilder::settle_with)) could not be refunded
/// or charged, so the estimate stands. Never retried: one that timed out may have landed.
///
/// ```
/// assert_eq!(redlimit::telemetry::SETTLE_FAILURES, "redlimit_settle_failures_total");
/// ```
#[cfg(feature = "metrics")]
pub const SETTLE_FAILURES: &str = "redlimit_settle_failures_total";

/// The buckets of [`STORE_DURATION`], in seconds: from well under a Redis round trip on one
/// host (0.25 ms) to well past the default store deadline (100 ms), where a call that
/// answered late still lands in a bucket of its own.
///
/// ```
/// let buckets = redlimit::telemetry::STORE_DURATION_BUCKETS;
/// assert!(buckets.windows(2).all(|w| w[0] < w[1]));
/// assert!(buckets.contains(&0.1), "the default deadline is a bucket edge");
/// ```
#[cfg(feature = "metrics")]
pub const STORE_DURATION_BUCKETS: &[f64] = &[
    0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

/// Every histogram the crate records, by full name, with its buckets: what a Prometheus
/// exporter needs to render `_bucket` series instead of a summary (see the
/// [module docs](self) for `metrics-exporter-prometheus`).
///
/// ```
/// use redlimit::telemetry::{HISTOGRAM_BUCKETS, STORE_DURATION};
/// assert!(HISTOGRAM_BUCKETS.iter().any(|(name, _)| *name == STORE_DURATION));
/// ```
#[cfg(feature = "metrics")]
pub const HISTOGRAM_BUCKETS: &[(&str, &[f64])] = &[(STORE_DURATION, STORE_DURATION_BUCKETS)];

use std::time::Duration;

use crate::decision::Decision;
use crate::error::StoreError;
use crate::key::Key;

/// Describes every metric to the recorder (Prometheus shows it as `# HELP`). Called when a
/// layer takes a handle, once per label set: by then the application's recorder is installed.
#[cfg(feature = "metrics")]
pub(crate) fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
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
    describe_gauge!(
        BREAKER_STATE,
        Unit::Count,
        "Circuit breakers in each state (closed, half_open, open), by store and failure domain"
    );
    describe_gauge!(
        DENY_CACHE_ENTRIES,
        Unit::Count,
        "Denials held in the rate-limit deny cache"
    );
    describe_gauge!(
        LEASES_IN_FLIGHT,
        Unit::Count,
        "Concurrency leases held by requests in flight, by policy"
    );
    describe_counter!(
        CONFIG_RELOADS,
        Unit::Count,
        "Rate-limit config reloads, by result (applied, refused) and a refusal's reason (unreadable, invalid, no_rules)"
    );
    describe_gauge!(
        LOCAL_FIRST_ISOLATED,
        "Whether the local-first store decides alone, its syncs with Redis failing (1) or not (0)"
    );
    describe_gauge!(
        LOCAL_FIRST_SYNC_AGE,
        Unit::Seconds,
        "Seconds since the local-first store last synced with Redis"
    );
    describe_counter!(
        SETTLE_FAILURES,
        Unit::Count,
        "Settlements of an estimate to a response's real cost that did not land, by reason"
    );
    describe_counter!(
        REQUESTS_UNDECIDED,
        Unit::Count,
        "Requests let through, or answered 500, without the limiter's verdict enforced, by reason"
    );
}

/// The memory store evicted live state.
pub(crate) fn memory_eviction() {
    #[cfg(feature = "metrics")]
    metrics::counter!(MEMORY_EVICTIONS).increment(1);
}

/// A config file put in force. Reloads are rare: the counter is looked up each time, from the
/// recorder installed then.
#[cfg(feature = "config")]
pub(crate) fn config_applied() {
    #[cfg(feature = "metrics")]
    metrics::counter!(CONFIG_RELOADS, "result" => "applied").increment(1);
}

/// A refused config reload, with why: `unreadable`, `invalid` or `no_rules`.
#[cfg(feature = "config")]
pub(crate) fn config_refused(reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(CONFIG_RELOADS, "result" => "refused", "reason" => reason).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = reason;
}

/// A local-first store's health after a sync round: whether it decides alone, and how long
/// ago it last synced. Looked up each round rather than kept: the store, and the task that
/// calls this, may start before the application installs its recorder.
#[cfg(feature = "redis")]
pub(crate) fn local_first_health(isolated: bool, sync_age: Duration) {
    #[cfg(feature = "metrics")]
    {
        metrics::gauge!(LOCAL_FIRST_ISOLATED).set(if isolated { 1.0 } else { 0.0 });
        metrics::gauge!(LOCAL_FIRST_SYNC_AGE).set(sync_age.as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (isolated, sync_age);
}

/// The store did not decide, for `reason`.
pub(crate) fn store_failure(store: &'static str, reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(STORE_FAILURES, "store" => store, "reason" => reason).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (store, reason);
}

/// A settlement under `policy` did not land, for `reason`. Rare (a failing store): the
/// counter is looked up each time.
pub(crate) fn settle_failure(policy: &str, reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(SETTLE_FAILURES, "policy" => policy.to_owned(), "reason" => reason)
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (policy, reason);
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
        StoreError::Overloaded(_) => "overload",
        StoreError::Connection(_) => "connection",
        StoreError::Script(_) => "script",
        StoreError::UnexpectedReply(_) => "reply",
        StoreError::ClockSkew(_) => "clock_skew",
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

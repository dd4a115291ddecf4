//! The RLQS metrics (feature `metrics`), through the `metrics` facade; every label has a few
//! fixed values. Without the feature (or a recorder) these do nothing.

use crate::rls::proto::envoy::r#type::v3::RateLimitStrategy;
#[cfg(feature = "metrics")]
use crate::rls::proto::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};

/// Open RLQS streams (a gauge).
pub const STREAMS: &str = "redlimit_rlqs_streams";
/// Buckets watched on this instance by at least one stream (a gauge).
pub const BUCKETS: &str = "redlimit_rlqs_buckets";
/// Assignments pushed, by `action`: `token_bucket`, `allow_all`, `deny_all`, `abandon`, and
/// `expire` (the TTL 0 a shutdown sends).
pub const ASSIGNMENTS: &str = "redlimit_rlqs_assignments_total";
/// Bucket usage reports received.
pub const REPORTS: &str = "redlimit_rlqs_reports_total";
/// Requests the clients reported, by `outcome` (`allowed`, `denied`).
pub const REQUESTS: &str = "redlimit_rlqs_requests_total";
/// Syncs with the fleet's store that failed (the instance assigned from its last view).
pub const SYNC_ERRORS: &str = "redlimit_rlqs_sync_errors_total";

pub(crate) fn streams(n: usize) {
    #[cfg(feature = "metrics")]
    metrics::gauge!(STREAMS).set(n as f64);
    #[cfg(not(feature = "metrics"))]
    let _ = n;
}

pub(crate) fn buckets(n: usize) {
    #[cfg(feature = "metrics")]
    metrics::gauge!(BUCKETS).set(n as f64);
    #[cfg(not(feature = "metrics"))]
    let _ = n;
}

pub(crate) fn report(allowed: u64, denied: u64) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!(REPORTS).increment(1);
        metrics::counter!(REQUESTS, "outcome" => "allowed").increment(allowed);
        metrics::counter!(REQUESTS, "outcome" => "denied").increment(denied);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (allowed, denied);
}

pub(crate) fn assignment(strategy: &RateLimitStrategy) {
    #[cfg(feature = "metrics")]
    {
        let action = match strategy.strategy {
            Some(Strategy::TokenBucket(_)) => "token_bucket",
            Some(Strategy::BlanketRule(rule)) if rule == BlanketRule::DenyAll as i32 => "deny_all",
            _ => "allow_all",
        };
        metrics::counter!(ASSIGNMENTS, "action" => action).increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = strategy;
}

pub(crate) fn abandon() {
    #[cfg(feature = "metrics")]
    metrics::counter!(ASSIGNMENTS, "action" => "abandon").increment(1);
}

pub(crate) fn expire(n: usize) {
    #[cfg(feature = "metrics")]
    metrics::counter!(ASSIGNMENTS, "action" => "expire").increment(n as u64);
    #[cfg(not(feature = "metrics"))]
    let _ = n;
}

pub(crate) fn sync_error() {
    #[cfg(feature = "metrics")]
    metrics::counter!(SYNC_ERRORS).increment(1);
}

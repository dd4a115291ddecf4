//! The Rate Limit Quota Service's settings (`RLQS_*`): served on the gRPC port always (the Go
//! service has none, so its users see no change), each bucket's quota shared through the
//! main Redis.

use std::time::Duration;

use clap::Args;

use super::parse::go_duration;

/// RLQS: assignments' lifetime, the sync with the fleet, and each stream's bounds.
#[derive(Debug, Clone, Args)]
pub(crate) struct RlqsSettings {
    /// RLQS: `assignment_time_to_live` of every assignment (whole seconds, at least 1 s):
    /// a gateway that hears nothing for this long falls back to its
    /// `expired_assignment_behavior`.
    #[arg(long, env = "RLQS_ASSIGNMENT_TTL", default_value = "15s", value_parser = go_duration)]
    pub(crate) rlqs_assignment_ttl: Duration,
    /// RLQS: how often each server exchanges its demand per bucket with Redis (one call per
    /// bucket per server) and re-decides the shares.
    #[arg(long, env = "RLQS_SYNC_INTERVAL", default_value = "1s", value_parser = go_duration)]
    pub(crate) rlqs_sync_interval: Duration,
    /// RLQS: a bucket a stream reports no usage of for this long is abandoned.
    #[arg(long, env = "RLQS_BUCKET_IDLE_TIMEOUT", default_value = "60s", value_parser = go_duration)]
    pub(crate) rlqs_bucket_idle_timeout: Duration,
    /// RLQS: the most buckets one stream may watch (one more ends it: RESOURCE_EXHAUSTED).
    #[arg(long, env = "RLQS_MAX_BUCKETS_PER_STREAM", default_value_t = 10_000)]
    pub(crate) rlqs_max_buckets_per_stream: usize,
    /// RLQS: the largest BucketId, in bytes of its encoding (a larger one ends the stream:
    /// INVALID_ARGUMENT).
    #[arg(long, env = "RLQS_MAX_BUCKET_ID_BYTES", default_value_t = 4096)]
    pub(crate) rlqs_max_bucket_id_bytes: usize,
}

#[cfg(test)]
mod tests {
    use super::super::Settings;
    use clap::Parser;
    use std::time::Duration;

    #[test]
    fn defaults_and_go_durations() {
        let s = Settings::try_parse_from(["redlimit-server"]).unwrap();
        assert_eq!(s.rlqs.rlqs_assignment_ttl, Duration::from_secs(15));
        assert_eq!(s.rlqs.rlqs_sync_interval, Duration::from_secs(1));
        assert_eq!(s.rlqs.rlqs_bucket_idle_timeout, Duration::from_secs(60));
        assert_eq!(s.rlqs.rlqs_max_buckets_per_stream, 10_000);
        assert_eq!(s.rlqs.rlqs_max_bucket_id_bytes, 4096);
        let s = Settings::try_parse_from([
            "redlimit-server",
            "--rlqs-sync-interval",
            "250ms",
            "--rlqs-assignment-ttl",
            "1m",
        ])
        .unwrap();
        assert_eq!(s.rlqs.rlqs_sync_interval, Duration::from_millis(250));
        assert_eq!(s.rlqs.rlqs_assignment_ttl, Duration::from_secs(60));
        assert!(
            Settings::try_parse_from(["redlimit-server", "--rlqs-sync-interval", "soon"]).is_err()
        );
    }
}

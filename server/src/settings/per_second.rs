//! The per-second Redis (`REDIS_PERSECOND_*`): where envoyproxy/ratelimit keeps the counters of
//! every limit whose unit is `second`, when `REDIS_PERSECOND` is on. The same vocabulary as the
//! main `REDIS_*` variables; the TLS files (`REDIS_TLS_CACERT`, `REDIS_TLS_CLIENT_*`,
//! `REDIS_TLS_SKIP_HOSTNAME_VERIFICATION`) and `CACHE_KEY_PREFIX` are shared, as there. The
//! passwords (`REDIS_PERSECOND_AUTH`, `REDIS_PERSECOND_SENTINEL_AUTH`) are read from the
//! environment only.

use std::time::Duration;

use clap::Args;

use super::parse::{go_bool, go_duration};
use super::{RedisType, SocketType};

/// The second Redis, for the limits in seconds.
#[derive(Debug, Clone, Args)]
pub(crate) struct PerSecondSettings {
    /// Keep the counters of limits whose unit is `second` in a second Redis
    /// (REDIS_PERSECOND_URL), every other limit's in REDIS_URL's.
    #[arg(long, env = "REDIS_PERSECOND", default_value = "false", value_parser = go_bool)]
    pub(crate) redis_persecond: bool,
    /// How to reach the per-second Redis: tcp or unix.
    #[arg(
        long,
        env = "REDIS_PERSECOND_SOCKET_TYPE",
        default_value = "unix",
        value_enum,
        ignore_case = true
    )]
    pub(crate) redis_persecond_socket_type: SocketType,
    /// The per-second Redis deployment: single, sentinel or cluster.
    #[arg(
        long,
        env = "REDIS_PERSECOND_TYPE",
        default_value = "single",
        value_enum,
        ignore_case = true
    )]
    pub(crate) redis_persecond_type: RedisType,
    /// The per-second Redis, as REDIS_URL is written for its REDIS_TYPE.
    #[arg(
        long,
        env = "REDIS_PERSECOND_URL",
        default_value = "/var/run/nutcracker/ratelimitpersecond.sock"
    )]
    pub(crate) redis_persecond_url: String,
    /// Connect to the per-second Redis over TLS (with the REDIS_TLS_* files).
    #[arg(long, env = "REDIS_PERSECOND_TLS", default_value = "false", value_parser = go_bool)]
    pub(crate) redis_persecond_tls: bool,
    /// How long to wait for a connection to the per-second Redis.
    #[arg(long, env = "REDIS_PERSECOND_TIMEOUT", default_value = "10s", value_parser = go_duration)]
    pub(crate) redis_persecond_timeout: Duration,
    /// REDIS_PIPELINE_WINDOW for the per-second Redis.
    #[arg(long, env = "REDIS_PERSECOND_PIPELINE_WINDOW", default_value = "0", value_parser = go_duration)]
    pub(crate) redis_persecond_pipeline_window: Duration,
    /// REDIS_PIPELINE_LIMIT for the per-second Redis.
    #[arg(long, env = "REDIS_PERSECOND_PIPELINE_LIMIT", default_value = "0")]
    pub(crate) redis_persecond_pipeline_limit: usize,
}

#[cfg(test)]
mod tests {
    use super::super::Settings;
    use super::*;
    use clap::Parser;

    #[test]
    fn the_go_services_names_and_defaults() {
        let names = [
            "REDIS_PERSECOND",
            "REDIS_PERSECOND_SOCKET_TYPE",
            "REDIS_PERSECOND_TYPE",
            "REDIS_PERSECOND_URL",
            "REDIS_PERSECOND_TLS",
            "REDIS_PERSECOND_TIMEOUT",
            "REDIS_PERSECOND_PIPELINE_WINDOW",
            "REDIS_PERSECOND_PIPELINE_LIMIT",
        ];
        if let Some(set) = names.iter().find(|v| std::env::var_os(v).is_some()) {
            eprintln!("{set} is set: the defaults cannot be seen");
            return;
        }
        let s = Settings::try_parse_from(["redlimit-server"]).unwrap();
        let p = &s.per_second;
        assert!(!p.redis_persecond, "off unless asked");
        assert_eq!(p.redis_persecond_socket_type, SocketType::Unix);
        assert_eq!(p.redis_persecond_type, RedisType::Single);
        assert_eq!(
            p.redis_persecond_url,
            "/var/run/nutcracker/ratelimitpersecond.sock"
        );
        assert!(!p.redis_persecond_tls);
        assert_eq!(p.redis_persecond_timeout, Duration::from_secs(10));
        assert_eq!(p.redis_persecond_pipeline_window, Duration::ZERO);
        assert_eq!(p.redis_persecond_pipeline_limit, 0);
        let on = Settings::try_parse_from([
            "redlimit-server",
            "--redis-persecond",
            "--redis-persecond-type",
            "CLUSTER",
            "--redis-persecond-timeout",
            "250ms",
            "--redis-persecond-pipeline-window",
            "150us",
            "--redis-persecond-pipeline-limit",
            "8",
        ])
        .unwrap();
        assert!(on.per_second.redis_persecond);
        assert_eq!(on.per_second.redis_persecond_type, RedisType::Cluster);
        assert_eq!(
            on.per_second.redis_persecond_timeout,
            Duration::from_millis(250)
        );
        assert_eq!(
            on.per_second.redis_persecond_pipeline_window,
            Duration::from_micros(150)
        );
        assert_eq!(on.per_second.redis_persecond_pipeline_limit, 8);
    }
}

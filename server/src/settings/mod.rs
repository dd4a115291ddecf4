//! The server's settings: envoyproxy/ratelimit's environment variables (and a flag for each,
//! for trying things by hand), parsed and checked.
//!
//! Values are read as the Go service reads them: booleans as Go's `strconv.ParseBool`
//! (`1 t T TRUE true True`, and the same for false), durations as Go's `time.ParseDuration`
//! (`10s`, `1h30m`, `500ms`), addresses such as `PROMETHEUS_ADDR=:9090`. Secrets
//! (`REDIS_AUTH`, `REDIS_SENTINEL_AUTH`, `REDLIMIT_ADMIN_TOKEN`, `REDLIMIT_SETTLE_KEY`) come from the environment
//! only, never from flags, so they stay out of the process list.

mod grpc;
mod parse;
mod per_second;
mod rlqs;
mod stats;
mod trace;
mod xds;

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use redlimit::rls::{FailureMode, HashTag};

pub(crate) use grpc::{GrpcAddress, GrpcSettings};
pub(crate) use parse::{ExtraTags, go_duration, key_values};
pub(crate) use per_second::PerSecondSettings;
pub(crate) use stats::{StatsSettings, StatsdProtocol};
pub(crate) use trace::{ExporterProtocol, TracingSettings};
pub(crate) use xds::{ConfigType, XdsSettings};

use parse::{go_bool, log_level, ratio};
use xds::config_type;

/// What the server listens on, where it reads its config, and how it reaches Redis.
#[derive(Debug, Parser)]
#[command(
    name = "redlimit-server",
    version,
    about = "An Envoy rate limit service (RLS v3) on redlimit: a drop-in for envoyproxy/ratelimit.",
    long_about = "An Envoy rate limit service (RLS v3) on redlimit: a drop-in for envoyproxy/ratelimit.\n\n\
        Every setting is an environment variable of envoyproxy/ratelimit (or a flag of the same \
        name). Variables of that service that have no meaning here are named in a warning at \
        start. REDIS_AUTH, REDIS_SENTINEL_AUTH, REDLIMIT_ADMIN_TOKEN and REDLIMIT_SETTLE_KEY are \
        read from the environment only."
)]
pub(crate) struct Settings {
    /// Address of the HTTP listener (`/healthcheck`, `/json`).
    #[arg(long, env = "HOST", default_value = "0.0.0.0")]
    pub(crate) host: IpAddr,
    /// Port of the HTTP listener.
    #[arg(long, env = "PORT", default_value_t = 8080)]
    pub(crate) port: u16,
    /// Address of the debug listener (`/rlconfig`).
    #[arg(long, env = "DEBUG_HOST", default_value = "0.0.0.0")]
    pub(crate) debug_host: IpAddr,
    /// Port of the debug listener.
    #[arg(long, env = "DEBUG_PORT", default_value_t = 6070)]
    pub(crate) debug_port: u16,
    /// The gRPC listener: where, and over TLS or not.
    #[command(flatten)]
    pub(crate) grpc: GrpcSettings,

    /// Log level: trace, debug, info, warn (or warning), error, fatal, panic.
    #[arg(long, env = "LOG_LEVEL", default_value = "WARN", value_parser = log_level)]
    pub(crate) log_level: tracing::Level,
    /// Log format: text or json.
    #[arg(
        long,
        env = "LOG_FORMAT",
        default_value = "text",
        value_enum,
        ignore_case = true
    )]
    pub(crate) log_format: LogFormat,

    /// Where the config comes from: FILE (RUNTIME_ROOT's files) or GRPC_XDS_SOTW (an xDS
    /// server, CONFIG_GRPC_XDS_SERVER_URL).
    #[arg(long, env = "CONFIG_TYPE", default_value = "FILE", value_parser = config_type)]
    pub(crate) config_type: ConfigType,
    /// The xDS client (CONFIG_TYPE=GRPC_XDS_SOTW).
    #[command(flatten)]
    pub(crate) xds: XdsSettings,
    /// CONFIG_TYPE=FILE: start even when the first config does not load (then every domain
    /// is unknown until one does). GRPC_XDS_SOTW always starts at once.
    #[arg(long, env = "FORCE_START_WITHOUT_INITIAL_CONFIG", default_value = "false", value_parser = go_bool)]
    pub(crate) force_start_without_initial_config: bool,
    /// The runtime root: the config is read from RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY.
    #[arg(
        long,
        env = "RUNTIME_ROOT",
        default_value = "/srv/runtime_data/current"
    )]
    pub(crate) runtime_root: PathBuf,
    /// See RUNTIME_ROOT.
    #[arg(long, env = "RUNTIME_SUBDIRECTORY", default_value = "")]
    pub(crate) runtime_subdirectory: String,
    /// See RUNTIME_ROOT.
    #[arg(long, env = "RUNTIME_APPDIRECTORY", default_value = "config")]
    pub(crate) runtime_appdirectory: PathBuf,
    /// Skip config files whose names start with a dot.
    #[arg(long, env = "RUNTIME_IGNOREDOTFILES", default_value = "false", value_parser = go_bool)]
    pub(crate) runtime_ignoredotfiles: bool,
    /// Accepted for compatibility: the directory and the root's symlink swap are both watched.
    #[arg(long, env = "RUNTIME_WATCH_ROOT", default_value = "true", value_parser = go_bool)]
    pub(crate) runtime_watch_root: bool,
    /// Let several files declare the same domain (their descriptors merged).
    #[arg(long, env = "MERGE_DOMAIN_CONFIG", default_value = "false", value_parser = go_bool)]
    pub(crate) merge_domain_config: bool,
    /// /healthcheck fails until a config with at least one domain has loaded.
    #[arg(long, env = "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", default_value = "false", value_parser = go_bool)]
    pub(crate) healthy_with_at_least_one_config_loaded: bool,
    /// Health follows Redis for as long as the server runs: /healthcheck fails while a probe
    /// goes unanswered. Without it, Redis counts once, until it first answers, as in the Go
    /// service; an outage later is each domain's failure mode's, not the probes'.
    #[arg(long, env = "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", default_value = "false", value_parser = go_bool)]
    pub(crate) redis_health_check_active_connection: bool,

    /// Where counters live: redis, or memory (this process alone).
    #[arg(
        long,
        env = "BACKEND_TYPE",
        default_value = "redis",
        value_enum,
        ignore_case = true
    )]
    pub(crate) backend_type: Backend,
    /// How to reach Redis: tcp or unix.
    #[arg(
        long,
        env = "REDIS_SOCKET_TYPE",
        default_value = "unix",
        value_enum,
        ignore_case = true
    )]
    pub(crate) redis_socket_type: SocketType,
    /// The Redis deployment: single, sentinel or cluster.
    #[arg(
        long,
        env = "REDIS_TYPE",
        default_value = "single",
        value_enum,
        ignore_case = true
    )]
    pub(crate) redis_type: RedisType,
    /// single: host:port (tcp) or a path (unix), or a redis:// / rediss:// URL; sentinel:
    /// `master,host:port,host:port`; cluster: `host:port,host:port`.
    #[arg(
        long,
        env = "REDIS_URL",
        default_value = "/var/run/nutcracker/ratelimit.sock"
    )]
    pub(crate) redis_url: String,
    /// Connect to Redis over TLS.
    #[arg(long, env = "REDIS_TLS", default_value = "false", value_parser = go_bool)]
    pub(crate) redis_tls: bool,
    /// A PEM file of the certificate authority that signed Redis's certificate.
    #[arg(long, env = "REDIS_TLS_CACERT")]
    pub(crate) redis_tls_cacert: Option<PathBuf>,
    /// A PEM file of this server's client certificate (chain) for Redis (mTLS), with
    /// `REDIS_TLS_CLIENT_KEY`.
    #[arg(long, env = "REDIS_TLS_CLIENT_CERT")]
    pub(crate) redis_tls_client_cert: Option<PathBuf>,
    /// A PEM file of the private key of `REDIS_TLS_CLIENT_CERT`.
    #[arg(long, env = "REDIS_TLS_CLIENT_KEY")]
    pub(crate) redis_tls_client_key: Option<PathBuf>,
    /// Accept Redis's certificate for any name: its chain is still verified (to
    /// `REDIS_TLS_CACERT`, else the public roots), not the name in it. Warned at start.
    #[arg(long, env = "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", default_value = "false", value_parser = go_bool)]
    pub(crate) redis_tls_skip_hostname_verification: bool,
    /// Hold each batch of Redis calls this long for the decisions made meanwhile (0: none), as
    /// the Go service's implicit pipelining: fewer, larger calls, each decision up to this
    /// much later.
    #[arg(long, env = "REDIS_PIPELINE_WINDOW", default_value = "0", value_parser = go_duration)]
    pub(crate) redis_pipeline_window: Duration,
    /// End a REDIS_PIPELINE_WINDOW's hold once this many decisions wait (0: a full batch, 32).
    #[arg(long, env = "REDIS_PIPELINE_LIMIT", default_value = "0")]
    pub(crate) redis_pipeline_limit: usize,
    /// How long to wait for a connection to Redis.
    #[arg(long, env = "REDIS_TIMEOUT", default_value = "10s", value_parser = go_duration)]
    pub(crate) redis_timeout: Duration,
    /// A prefix of every Redis key.
    #[arg(long, env = "CACHE_KEY_PREFIX", default_value = "")]
    pub(crate) cache_key_prefix: String,
    /// The per-second Redis (`REDIS_PERSECOND_*`).
    #[command(flatten)]
    pub(crate) per_second: PerSecondSettings,

    /// 0: no deny cache; otherwise a deny cache of about this many bytes.
    #[arg(long, env = "LOCAL_CACHE_SIZE_IN_BYTES", default_value_t = 0)]
    pub(crate) local_cache_size_in_bytes: u64,
    /// A hit counts as near the limit once this share of the limit is used.
    #[arg(long, env = "NEAR_LIMIT_RATIO", default_value_t = 0.8, value_parser = ratio)]
    pub(crate) near_limit_ratio: f64,
    /// `false` (the default): every hit lands, past the limit too, as the Go service counts
    /// (a charge after a response is never lost); `true`: a request is admitted only if
    /// every counter admits its hits, and a refused one charges nothing.
    #[arg(long, env = "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", default_value = "false", value_parser = go_bool)]
    pub(crate) stop_cache_key_increment_when_overlimit: bool,
    /// Answer OK to every request, still counting and reporting what would be over the limit.
    #[arg(long, env = "SHADOW_MODE", default_value = "false", value_parser = go_bool)]
    pub(crate) shadow_mode: bool,
    /// Every descriptor in quota mode: a request is over only when every descriptor (but the
    /// unlimited ones) is.
    #[arg(long, env = "QUOTA_MODE", default_value = "false", value_parser = go_bool)]
    pub(crate) quota_mode: bool,
    /// Put the request's descriptors and the passed rules' `metadata` in each response's
    /// `dynamic_metadata`.
    #[arg(long, env = "RESPONSE_DYNAMIC_METADATA", default_value = "false", value_parser = go_bool)]
    pub(crate) response_dynamic_metadata: bool,

    /// Add RateLimit-Limit, -Remaining and -Reset headers to responses.
    #[arg(long, env = "LIMIT_RESPONSE_HEADERS_ENABLED", default_value = "false", value_parser = go_bool)]
    pub(crate) limit_response_headers_enabled: bool,
    /// The limit header's name.
    #[arg(long, env = "LIMIT_LIMIT_HEADER", default_value = "RateLimit-Limit")]
    pub(crate) limit_limit_header: String,
    /// The remaining header's name.
    #[arg(
        long,
        env = "LIMIT_REMAINING_HEADER",
        default_value = "RateLimit-Remaining"
    )]
    pub(crate) limit_remaining_header: String,
    /// The reset header's name.
    #[arg(long, env = "LIMIT_RESET_HEADER", default_value = "RateLimit-Reset")]
    pub(crate) limit_reset_header: String,

    /// Statistics: statsd, Prometheus, or none.
    #[command(flatten)]
    pub(crate) stats: StatsSettings,
    /// Tracing: OTLP spans, off unless TRACING_ENABLED.
    #[command(flatten)]
    pub(crate) tracing: TracingSettings,
    /// The Rate Limit Quota Service (RLQS), on the gRPC port.
    #[command(flatten)]
    pub(crate) rlqs: rlqs::RlqsSettings,

    /// redlimit: how long a decision may wait for Redis before the failure mode answers
    /// (Envoy's own timeout is 20 ms by default).
    #[arg(long, env = "REDLIMIT_STORE_DEADLINE", default_value = "15ms", value_parser = go_duration)]
    pub(crate) store_deadline: Duration,
    /// redlimit: what a request gets when Redis fails, misses the deadline or its circuit is
    /// open: `error` (gRPC UNAVAILABLE: Envoy's failure_mode_deny decides), `open` (OK),
    /// `closed` (OVER_LIMIT), `local` or `local:N` (each of N servers decides on its share of
    /// the limit). A domain's `on_store_error` key wins.
    #[arg(long, env = "REDLIMIT_ON_STORE_ERROR", default_value = "error")]
    pub(crate) on_store_error: FailureMode,
    /// redlimit: where counters live in a Redis Cluster, for domains without a `hash_tag` key:
    /// `domain` (one slot per domain, one atomic call per request) or `descriptor` (a slot per
    /// descriptor, the calls made in parallel, a refused request's charges refunded).
    /// Switching moves every counter to new keys.
    #[arg(long, env = "REDLIMIT_HASH_TAG", default_value = "domain")]
    pub(crate) hash_tag: HashTag,
    /// redlimit: local-first mode: each server decides hot descriptors in memory on its share
    /// of the fleet's rate and syncs with Redis every `REDLIMIT_LOCAL_FIRST_SYNC`.
    #[arg(long, env = "REDLIMIT_LOCAL_FIRST", default_value = "false", value_parser = go_bool)]
    pub(crate) local_first: bool,
    /// redlimit: local-first mode's sync interval.
    #[arg(long, env = "REDLIMIT_LOCAL_FIRST_SYNC", default_value = "100ms", value_parser = go_duration)]
    pub(crate) local_first_sync: Duration,
    /// redlimit: after SIGTERM, how long health fails while the listeners still serve, before
    /// they drain (0: drain at once, as envoyproxy/ratelimit does).
    #[arg(long, env = "REDLIMIT_DRAIN_DELAY", default_value = "0s", value_parser = go_duration)]
    pub(crate) drain_delay: Duration,
    /// redlimit: the threads the server runs on: 1 (the default) serves everything on one
    /// thread, fewest syscalls per decision; 0 is one per core, for more decisions per
    /// second than one core can make.
    #[arg(long, env = "REDLIMIT_WORKER_THREADS", default_value_t = 1)]
    pub(crate) worker_threads: usize,
    /// redlimit: the admin API's address (on only with a token: REDLIMIT_ADMIN_TOKEN_FILE, or
    /// REDLIMIT_ADMIN_TOKEN from the environment).
    #[arg(long, env = "REDLIMIT_ADMIN_HOST", default_value = "0.0.0.0")]
    pub(crate) admin_host: IpAddr,
    /// redlimit: the admin API's port.
    #[arg(long, env = "REDLIMIT_ADMIN_PORT", default_value_t = 6071)]
    pub(crate) admin_port: u16,
    /// redlimit: a file holding the admin API's bearer token (a mounted secret); the admin
    /// listener is on when it (or REDLIMIT_ADMIN_TOKEN, environment only) is given.
    #[arg(long, env = "REDLIMIT_ADMIN_TOKEN_FILE")]
    pub(crate) admin_token_file: Option<PathBuf>,
}

/// The log format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per line.
    Json,
}

/// Where counters live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Backend {
    /// Redis (standalone, Sentinel or Cluster): limits shared by every replica.
    Redis,
    /// This process's memory: limits of this replica alone.
    Memory,
}

/// How to reach a single Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SocketType {
    /// `host:port`.
    Tcp,
    /// A Unix socket's path.
    Unix,
}

/// The Redis deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RedisType {
    /// One server.
    Single,
    /// A master found through Sentinels.
    Sentinel,
    /// A Redis Cluster.
    Cluster,
}

/// About what one deny-cache entry takes (a counter's key, its denial, the map's share).
const DENY_CACHE_ENTRY_BYTES: u64 = 300;

impl Settings {
    /// How hits are counted, from `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`: every one landing
    /// (`false`, the Go service's default), or all or none (`true`).
    pub(crate) fn commit(&self) -> redlimit::store::Commit {
        if self.stop_cache_key_increment_when_overlimit {
            redlimit::store::Commit::AllOrNone
        } else {
            redlimit::store::Commit::Always
        }
    }

    /// The deny cache's entries for `LOCAL_CACHE_SIZE_IN_BYTES` (0: off; else at least one).
    pub(crate) fn deny_cache_entries(&self) -> usize {
        match self.local_cache_size_in_bytes {
            0 => 0,
            bytes => usize::try_from(bytes / DENY_CACHE_ENTRY_BYTES)
                .unwrap_or(usize::MAX)
                .max(1),
        }
    }

    /// The directory the config files are read from.
    pub(crate) fn config_dir(&self) -> PathBuf {
        self.runtime_root
            .join(&self.runtime_subdirectory)
            .join(&self.runtime_appdirectory)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_go_services() {
        // clap reads the environment too: a variable set around the test would win.
        let read = [
            "PORT",
            "GRPC_PORT",
            "GRPC_UDS",
            "DEBUG_PORT",
            "RUNTIME_ROOT",
            "RUNTIME_SUBDIRECTORY",
        ];
        let read = read.iter().chain(&[
            "RUNTIME_APPDIRECTORY",
            "REDLIMIT_STORE_DEADLINE",
            "REDLIMIT_ON_STORE_ERROR",
            "REDLIMIT_LOCAL_FIRST",
            "REDLIMIT_LOCAL_FIRST_SYNC",
            "REDLIMIT_HASH_TAG",
            "REDLIMIT_WORKER_THREADS",
            "REDIS_TYPE",
            "STATSD_HOST",
            "STATSD_PORT",
            "STATSD_PROTOCOL",
            "STATS_FLUSH_INTERVAL",
        ]);
        if let Some(set) = read.into_iter().find(|v| std::env::var_os(v).is_some()) {
            eprintln!("{set} is set: the defaults cannot be seen");
            return;
        }
        let s = Settings::try_parse_from(["redlimit-server"]).unwrap();
        assert_eq!((s.port, s.grpc.grpc_port, s.debug_port), (8080, 8081, 6070));
        assert_eq!(
            s.grpc.address(),
            GrpcAddress::Tcp("0.0.0.0:8081".parse().unwrap())
        );
        assert!(!s.grpc.grpc_server_use_tls);
        assert_eq!(
            s.config_dir(),
            PathBuf::from("/srv/runtime_data/current/config")
        );
        assert_eq!(s.store_deadline, Duration::from_millis(15));
        assert_eq!(s.worker_threads, 1, "one thread unless asked");
        assert_eq!(s.on_store_error, FailureMode::Unavailable);
        assert_eq!(s.redis_type, RedisType::Single);
        assert!(!s.local_first, "exact mode unless asked");
        assert_eq!(s.local_first_sync, Duration::from_millis(100));
        assert_eq!(
            s.hash_tag,
            HashTag::Domain,
            "one slot per domain unless asked"
        );
        let stats = &s.stats;
        assert_eq!(
            (stats.statsd_host.as_str(), stats.statsd_port),
            ("localhost", 8125)
        );
        assert_eq!(
            stats.statsd_protocol,
            StatsdProtocol::Tcp,
            "gostats' default"
        );
        assert_eq!(stats.stats_flush_interval, Duration::from_secs(10));
    }

    #[test]
    fn grpc_uds_replaces_host_and_port() {
        let s =
            Settings::try_parse_from(["redlimit-server", "--grpc-uds", "/run/rl.sock"]).unwrap();
        assert_eq!(s.grpc.address(), GrpcAddress::Unix("/run/rl.sock".into()));
    }
}

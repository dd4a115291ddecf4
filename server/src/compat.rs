//! envoyproxy/ratelimit's environment, variable by variable: what each one does here.
//!
//! A platform team swaps the container image and keeps its environment. Every variable the Go
//! service reads is listed in [`GO_VARIABLES`]: those this server honours are read by
//! `settings.rs`; every other one, when it is set, is named in a warning at start, so no
//! setting is silently ignored. The table in `docs/guide/migrating-from-envoy-ratelimit.md` is
//! checked against this list by a test.

mod go_variable;
#[cfg(test)]
mod guide;

use go_variable::var;
use go_variable::{GoVariable, Support};

use Support::{Differs, Honoured, NoEffect, Unsupported};

const ONE_CONNECTION: &str =
    "one multiplexed connection per Redis node, pipelined: there is no pool to size";
const NO_MEMCACHE: &str = "memcached is not supported: use BACKEND_TYPE=redis";

/// Every environment variable envoyproxy/ratelimit reads (its `src/settings/settings.go`, and
/// `STATSD_PROTOCOL`, which its stats library gostats reads), in its order; then the
/// OpenTelemetry SDK's that Envoy Gateway sets (`OTEL_EXPORTER_OTLP_ENDPOINT`).
pub(crate) const GO_VARIABLES: &[GoVariable] = &[
    var("HOST", "0.0.0.0", Honoured),
    var("PORT", "8080", Honoured),
    var("DEBUG_HOST", "0.0.0.0", Honoured),
    var("DEBUG_PORT", "6070", Honoured),
    var(
        "GRPC_UDS",
        "",
        Differs(
            "a path: gRPC is served on that Unix socket instead of GRPC_HOST:GRPC_PORT; a socket file no process listens on (a crash's) is replaced. A client must send a valid `:authority`: Envoy's `envoy_grpc` sends its cluster's name, grpc-go `localhost`, but grpc-core clients (Python's grpcio) the socket's path, which is refused unless they set `grpc.default_authority`",
        ),
    ),
    var("GRPC_HOST", "0.0.0.0", Honoured),
    var("GRPC_PORT", "8081", Honoured),
    var(
        "GRPC_MAX_CONNECTION_AGE",
        "24h",
        NoEffect("connections are not aged out; Envoy balances over its own pool"),
    ),
    var(
        "GRPC_MAX_CONNECTION_AGE_GRACE",
        "1h",
        NoEffect("connections are not aged out"),
    ),
    var("GRPC_SERVER_USE_TLS", "false", Honoured),
    var(
        "GRPC_SERVER_TLS_CERT",
        "",
        Differs(
            "reloaded when it or the key changes, as there; the key need not be in the same directory",
        ),
    ),
    var("GRPC_SERVER_TLS_KEY", "", Honoured),
    var(
        "GRPC_CLIENT_TLS_CACERT",
        "",
        Differs(
            "every client must present a certificate chaining to this file's authorities, and to them alone: the Go service adds the system's roots",
        ),
    ),
    var("GRPC_CLIENT_TLS_SAN", "", Honoured),
    var("LOG_LEVEL", "WARN", Honoured),
    var(
        "LOG_FORMAT",
        "text",
        Differs("text or json; the json lines are tracing's, not logrus's field names"),
    ),
    var(
        "CONFIG_TYPE",
        "FILE",
        Differs(
            "FILE or GRPC_XDS_SOTW; with GRPC_XDS_SOTW the listeners open at once, where the Go service opens none before its first config unless FORCE_START_WITHOUT_INITIAL_CONFIG (a probe is refused while the xDS server is slow); until a config is accepted, calls answer as the Go service's do with no config: UNKNOWN `no rate limit configuration loaded` (/json: 400), health as HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED says",
        ),
    ),
    var(
        "FORCE_START_WITHOUT_INITIAL_CONFIG",
        "false",
        Differs(
            "with CONFIG_TYPE=FILE: unset, a config that does not load at start stops the server (the Go service serves on with no config, answering errors); set, it serves as the Go service does: calls answer UNKNOWN `no rate limit configuration loaded` (/json: 400) until a config loads. No effect with GRPC_XDS_SOTW, which always serves at once",
        ),
    ),
    var("CONFIG_GRPC_XDS_NODE_ID", "default", Honoured),
    var("CONFIG_GRPC_XDS_NODE_METADATA", "", Honoured),
    var(
        "CONFIG_GRPC_XDS_SERVER_URL",
        "localhost:18000",
        Differs("host:port, or dns:///host:port; other gRPC target schemes are refused at start"),
    ),
    var(
        "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
        "3s",
        Differs(
            "the wait (±50%) before connecting again after a connection or a stream could not be opened",
        ),
    ),
    var("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "", Honoured),
    var("CONFIG_GRPC_XDS_SERVER_USE_TLS", "false", Honoured),
    var("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "", Honoured),
    var("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "", Honoured),
    var(
        "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
        "",
        Differs(
            "without it the server's certificate is checked against the webpki roots (Mozilla's), not the system's",
        ),
    ),
    var("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "", Honoured),
    var(
        "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
        "10s",
        Differs(
            "the first wait after a stream ends, as there (jpillora/backoff: this × factor^n within the max, so the defaults wait 10 s every time); n restarts at each accepted response",
        ),
    ),
    var("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "60s", Honoured),
    var("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "0.5", Honoured),
    var("XDS_CLIENT_BACKOFF_JITTER", "true", Honoured),
    var("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "", Honoured),
    var(
        "USE_DOG_STATSD",
        "false",
        Differs(
            "as there (DogStatsD lines over UDP to STATSD_HOST:STATSD_PORT, EXTRA_TAGS as tags); refused beside USE_STATSD=true, but allowed beside USE_PROMETHEUS (the Go service refuses both), and an unset USE_STATSD is false then",
        ),
    ),
    var(
        "USE_DOG_STATSD_MOGRIFIERS",
        "",
        Differs(
            "as there, each mogrifier's `DOG_STATSD_MOGRIFIER_<NAME>_{PATTERN,NAME,TAGS}` read at start (a missing or broken one stops the start, naming it); a mogrifier's tags are sent in the order written (the Go service's in random order)",
        ),
    ),
    var(
        "USE_STATSD",
        "true",
        Differs(
            "true by default, as there, unless USE_PROMETHEUS=true or USE_DOG_STATSD=true (which the Go service refuses beside it); USE_STATSD=true and USE_PROMETHEUS=true: both. The Go service's counters, under its names; redlimit's own metrics are Prometheus's",
        ),
    ),
    var("STATSD_HOST", "localhost", Honoured),
    var("STATSD_PORT", "8125", Honoured),
    var(
        "STATSD_PROTOCOL",
        "tcp",
        Differs("tcp or udp; DogStatsD is sent over UDP whatever it says"),
    ),
    var(
        "EXTRA_TAGS",
        "",
        Differs(
            "in the statsd names, as gostats puts them (`.__key=value`); not Prometheus labels",
        ),
    ),
    var(
        "STATS_FLUSH_INTERVAL",
        "10s",
        Differs("statsd's flush interval; Prometheus is scraped, not flushed"),
    ),
    var("DISABLE_STATS", "false", Honoured),
    var("USE_PROMETHEUS", "false", Honoured),
    var("PROMETHEUS_ADDR", ":9090", Honoured),
    var("PROMETHEUS_PATH", "/metrics", Honoured),
    var(
        "PROMETHEUS_MAPPER_YAML",
        "",
        Differs(
            "applied as the Go service's statsd_exporter (v0.26.1) applies it to the same statsd names (EXTRA_TAGS included), PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS then without effect, as there; a file that cannot be read is logged as an error and the built-in mapping's names are emitted (the Go service emits unmapped names); a file it would not load, a key it does not know (it ignores one), `ttl`, `glob_disable_ordering: true`, a `scale` that can match a counter, merge keys, and response-time summaries with different quantiles or windows stop the start, naming the line (the Go service starts with no mapping); summaries' quantiles are estimated by the exporter's sketch (their `error` and `buf_cap` are not used)",
        ),
    ),
    var(
        "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS",
        "false",
        Honoured,
    ),
    var("RUNTIME_ROOT", "/srv/runtime_data/current", Honoured),
    var("RUNTIME_SUBDIRECTORY", "", Honoured),
    var("RUNTIME_APPDIRECTORY", "config", Honoured),
    var("RUNTIME_IGNOREDOTFILES", "false", Honoured),
    var(
        "RUNTIME_WATCH_ROOT",
        "true",
        Differs(
            "both ways watch the directory and the symlink swap of a Kubernetes ConfigMap: a reload never needs the root swapped",
        ),
    ),
    var(
        "EXPIRATION_JITTER_MAX_SECONDS",
        "300",
        NoEffect("each key lives exactly as long as its state needs; no jitter is added"),
    ),
    var(
        "LOCAL_CACHE_SIZE_IN_BYTES",
        "0",
        Differs(
            "0 turns the deny cache off; any other value turns it on, with room for about that many bytes of entries. It is exact: it answers only what Redis would",
        ),
    ),
    var("NEAR_LIMIT_RATIO", "0.8", Honoured),
    var(
        "CACHE_KEY_PREFIX",
        "",
        Differs("a prefix of every Redis key; the keys themselves differ from the Go service's"),
    ),
    var(
        "BACKEND_TYPE",
        "redis",
        Differs("redis, or memory (this process alone: for tests and trials); memcache is refused"),
    ),
    var(
        "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
        "false",
        Differs(
            "false: every hit lands, past the limit too (debt, capped at twice the limit), in one atomic call per store and hash tag; a descriptor is OVER_LIMIT when its hits did not fit or it was past its limit, as there. true: all or none, exactly: a rejected request charges nothing (the Go service increments the descriptors that went over)",
        ),
    ),
    var("LIMIT_RESPONSE_HEADERS_ENABLED", "false", Honoured),
    var("LIMIT_LIMIT_HEADER", "RateLimit-Limit", Honoured),
    var("LIMIT_REMAINING_HEADER", "RateLimit-Remaining", Honoured),
    var("LIMIT_RESET_HEADER", "RateLimit-Reset", Honoured),
    var("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "false", Honoured),
    var("REDIS_SOCKET_TYPE", "unix", Honoured),
    var("REDIS_TYPE", "SINGLE", Honoured),
    var(
        "REDIS_URL",
        "/var/run/nutcracker/ratelimit.sock",
        Differs("also takes a redis:// or rediss:// URL"),
    ),
    var("REDIS_POOL_SIZE", "10", NoEffect(ONE_CONNECTION)),
    var("REDIS_AUTH", "", Honoured),
    var("REDIS_TLS", "false", Honoured),
    var(
        "REDIS_TLS_CLIENT_CERT",
        "",
        Differs(
            "presented to Redis (mTLS) over TLS, with REDIS_TLS_CLIENT_KEY; one set without the other stops the server at start, where the Go service ignores both",
        ),
    ),
    var("REDIS_TLS_CLIENT_KEY", "", Honoured),
    var("REDIS_TLS_CACERT", "", Honoured),
    var(
        "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
        "false",
        Differs(
            "as there: Redis's certificate chain is verified (to REDIS_TLS_CACERT's authority, else the public roots), not the name in it; warned at start while on",
        ),
    ),
    var(
        "REDIS_PIPELINE_WINDOW",
        "0",
        Differs(
            "as the Go service (radix v3, its releases): each call waits up to the window for those made meanwhile, and they go to Redis together (here: in one script call per 32 decisions): fewer calls, less Redis CPU per decision, each decision up to the window later; 0: none, each batch goes as soon as it can. Kept to within about 50 µs; shorter than REDLIMIT_STORE_DEADLINE (15 ms) or the server stops at start. Not required in Cluster mode, where the Go service refuses to start without it or REDIS_PIPELINE_LIMIT",
        ),
    ),
    var(
        "REDIS_PIPELINE_LIMIT",
        "0",
        Differs(
            "as the Go service (radix v3): a window ends early once this many decisions wait (0: once 32 wait, a full script call, where the Go service has no limit); no effect without REDIS_PIPELINE_WINDOW",
        ),
    ),
    var(
        "REDIS_CLUSTER_PIPELINE_PARALLELISM",
        "1",
        NoEffect(
            "one call per request, on the slot of its keys (REDLIMIT_HASH_TAG=descriptor: one per descriptor's slot, all at once): nothing to run in series",
        ),
    ),
    var(
        "REDIS_PERSECOND",
        "false",
        Differs(
            "as there, limits whose unit is `second` count in REDIS_PERSECOND_URL's Redis, the rest in REDIS_URL's; also those with a `unit_multiplier` or an `algorithm` (the rule is by unit), and a descriptor's own `limit` in seconds. A request over both is one atomic call per store, at once, and one refused by either charges nothing in the other (refunded, visible for about a round trip)",
        ),
    ),
    var("REDIS_PERSECOND_SOCKET_TYPE", "unix", Honoured),
    var("REDIS_PERSECOND_TYPE", "SINGLE", Honoured),
    var(
        "REDIS_PERSECOND_URL",
        "/var/run/nutcracker/ratelimitpersecond.sock",
        Differs("also takes a redis:// or rediss:// URL"),
    ),
    var("REDIS_PERSECOND_POOL_SIZE", "10", NoEffect(ONE_CONNECTION)),
    var("REDIS_PERSECOND_AUTH", "", Honoured),
    var("REDIS_PERSECOND_TLS", "false", Honoured),
    var("REDIS_SENTINEL_AUTH", "", Honoured),
    var("REDIS_PERSECOND_SENTINEL_AUTH", "", Honoured),
    var(
        "REDIS_PERSECOND_PIPELINE_WINDOW",
        "0",
        Differs("as REDIS_PIPELINE_WINDOW, for the per-second Redis"),
    ),
    var(
        "REDIS_PERSECOND_PIPELINE_LIMIT",
        "0",
        Differs("as REDIS_PIPELINE_LIMIT, for the per-second Redis"),
    ),
    var(
        "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM",
        "1",
        NoEffect(
            "one call per request on the slot of its keys, as REDIS_CLUSTER_PIPELINE_PARALLELISM",
        ),
    ),
    var(
        "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",
        "false",
        Differs(
            "false, as there: Redis counts in health until it first answers, and an outage after that leaves /healthcheck at 200 (calls get their domain's failure mode at once); true: health follows a probe every second, failing while one goes unanswered and back at the next answer (the Go service follows its pool: failing when its last connection closes, back when one opens)",
        ),
    ),
    var(
        "REDIS_TIMEOUT",
        "10s",
        Differs(
            "the time to connect; a decision's own deadline is REDLIMIT_STORE_DEADLINE (15ms), under Envoy's 20 ms",
        ),
    ),
    var(
        "REDIS_PERSECOND_TIMEOUT",
        "10s",
        Differs(
            "the time to connect to the per-second Redis; a decision's own deadline is REDLIMIT_STORE_DEADLINE, for both stores",
        ),
    ),
    var(
        "REDIS_POOL_ON_EMPTY_BEHAVIOR",
        "WAIT",
        NoEffect(ONE_CONNECTION),
    ),
    var(
        "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR",
        "WAIT",
        NoEffect(ONE_CONNECTION),
    ),
    var(
        "REDIS_STARTUP_INITIAL_INTERVAL",
        "1s",
        NoEffect("the server starts while Redis is down and connects when it answers"),
    ),
    var(
        "REDIS_STARTUP_MAX_INTERVAL",
        "30s",
        NoEffect("the server starts while Redis is down and connects when it answers"),
    ),
    var(
        "REDIS_STARTUP_MAX_ELAPSED_TIME",
        "0",
        NoEffect("the server starts while Redis is down and connects when it answers"),
    ),
    var("MEMCACHE_HOST_PORT", "", Unsupported(NO_MEMCACHE)),
    var("MEMCACHE_MAX_IDLE_CONNS", "2", Unsupported(NO_MEMCACHE)),
    var("MEMCACHE_SRV", "", Unsupported(NO_MEMCACHE)),
    var("MEMCACHE_SRV_REFRESH", "0", Unsupported(NO_MEMCACHE)),
    var("MEMCACHE_TLS", "false", Unsupported(NO_MEMCACHE)),
    var("MEMCACHE_TLS_CLIENT_CERT", "", Unsupported(NO_MEMCACHE)),
    var("MEMCACHE_TLS_CLIENT_KEY", "", Unsupported(NO_MEMCACHE)),
    var("MEMCACHE_TLS_CACERT", "", Unsupported(NO_MEMCACHE)),
    var(
        "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION",
        "false",
        Unsupported(NO_MEMCACHE),
    ),
    var("SHADOW_MODE", "false", Honoured),
    var("QUOTA_MODE", "false", Honoured),
    var(
        "RESPONSE_DYNAMIC_METADATA",
        "false",
        Differs(
            "as there (domain, descriptors, hitsAddend, the passed rules' merged metadata); a descriptor's own `limit` prints as `requests_per_unit:N unit:NAME` (Go's protobuf text, without its random spacing), and a `detailed_metric` rule keeps its metadata (the Go service drops it)",
        ),
    ),
    var("MERGE_DOMAIN_CONFIG", "false", Honoured),
    var(
        "TRACING_ENABLED",
        "false",
        Differs(
            "OTLP spans, the caller's trace continued (W3C `traceparent`, B3 single and multiple headers), as there; one span per gRPC `ShouldRateLimit` (the server span the Go service's otelgrpc interceptor makes, `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`) with `domain`, `descriptors` (their number) and `outcome` (`OK`, `OVER_LIMIT`, `UNKNOWN` or `ERROR`): not the Go service's child spans (`ShouldRateLimit Execution`, whose `request string` carries every descriptor's value; `Redis Pipeline Execution`), and no span for `/json`. No descriptor key or value and no error message is ever recorded",
        ),
    ),
    var("TRACING_SERVICE_NAME", "RateLimit", Honoured),
    var("TRACING_SERVICE_NAMESPACE", "", Honoured),
    var(
        "TRACING_SERVICE_INSTANCE_ID",
        "",
        Differs(
            "as there (a random UUID when empty); the resource also carries the OpenTelemetry SDK's `telemetry.sdk.*`",
        ),
    ),
    var("TRACING_EXPORTER_PROTOCOL", "http", Honoured),
    var("TRACING_SAMPLING_RATE", "1", Honoured),
    var(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "",
        Differs(
            "as the OpenTelemetry SDK reads it (`/v1/traces` appended over http; `http://localhost:4318`, or `:4317` over grpc, when unset), with `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `_HEADERS`, `_TIMEOUT` and `OTEL_BSP_*`; an `https://` endpoint is refused at start (TLS to the collector is not supported)",
        ),
    ),
];

/// One warning per variable of the Go service that is set in `env` but has no effect here or
/// is not supported: its name and why.
pub(crate) fn warnings(env: impl Fn(&str) -> Option<String>) -> Vec<String> {
    GO_VARIABLES
        .iter()
        .filter(|v| env(v.name).is_some())
        .filter_map(|v| match v.support {
            NoEffect(why) => Some(format!("{} is set but has no effect here: {why}", v.name)),
            Unsupported(why) => Some(format!("{} is set but not supported: {why}", v.name)),
            Honoured | Differs(_) => None,
        })
        .collect()
}

//! `redlimit-server`: an Envoy rate limit service (RLS v3) on redlimit, a drop-in for
//! envoyproxy/ratelimit: the same config files, environment, ports and endpoints, with
//! redlimit's exact, atomic limits behind them.
//!
//! ```text
//! REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:6379 RUNTIME_ROOT=/data RUNTIME_SUBDIRECTORY=ratelimit \
//!   redlimit-server
//! ```
//!
//! - gRPC (`GRPC_PORT`, 8081, or the Unix socket `GRPC_UDS`; TLS and mTLS with
//!   `GRPC_SERVER_USE_TLS`): `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`,
//!   `envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas` (RLQS,
//!   `RLQS_*`: each bucket's quota shared by the fleet through Redis) and
//!   `grpc.health.v1.Health`;
//! - HTTP (`PORT`, 8080): `GET /healthcheck`, `POST /json`;
//! - debug (`DEBUG_PORT`, 6070): `GET /rlconfig`;
//! - admin (`REDLIMIT_ADMIN_PORT`, 6071), only with a token (`REDLIMIT_ADMIN_TOKEN_FILE`, or
//!   `REDLIMIT_ADMIN_TOKEN` from the environment): `redlimit::rls::admin`'s counters,
//!   overrides and shadow mode, behind `Authorization: Bearer TOKEN`;
//! - Prometheus (`USE_PROMETHEUS=true`, `PROMETHEUS_ADDR` :9090, `PROMETHEUS_PATH` /metrics);
//! - tracing (`TRACING_ENABLED=true`): a span per `ShouldRateLimit`, continuing the caller's
//!   trace (W3C or B3), exported over OTLP (`TRACING_EXPORTER_PROTOCOL` http or grpc) to
//!   `OTEL_EXPORTER_OTLP_ENDPOINT`;
//! - statsd (`USE_STATSD`, on by default as in the Go service unless Prometheus is chosen:
//!   `STATSD_HOST` localhost, `STATSD_PORT` 8125, over TCP or `STATSD_PROTOCOL=udp`), or
//!   DogStatsD (`USE_DOG_STATSD=true`, over UDP, with the Go service's mogrifiers).
//!
//! Each listener prints `<name> on ADDR` on stdout once bound (port 0 picks a free one). On
//! SIGTERM (or ctrl-c) health turns unhealthy at once, then every RLQS stream is sent its
//! buckets with TTL 0 and ended, the listeners drain and the process exits (the last
//! statistics and spans sent first).
//!
//! Where each part lives (a module uses only those after it, and `settings`):
//!
//! - `listen/`: the listeners above, and what each serves;
//! - `trace/`: the spans, around the rate limit calls;
//! - `config/`: the config's sources (`files.rs`, `xds/`) and the one place a config is put in
//!   force (`in_force.rs`), which also answers the calls before the first;
//! - `stats/`: the metrics recorder (Prometheus, statsd, DogStatsD) and what records into it;
//! - `health.rs`: Redis, the config and SIGTERM, as health reports them;
//! - `redis/`: the stores; `settings/`: the environment, read with clap; `compat.rs`: every
//!   variable of the Go service's and what it does here.

mod compat;
mod config;
mod health;
mod listen;
mod redis;
mod settings;
mod stats;
mod trace;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use redlimit::rlqs::RlqsService;
use redlimit::rls::LimitHeaders;
use redlimit::rls::RateLimitService;
use redlimit::rls::config::RlsConfig;
use redlimit::store::Store;
use tokio::sync::watch;

use settings::{LogFormat, Settings};

/// The secret that signs and checks the receipts of reservations settled through the service
/// (`redlimit.reserve`, `redlimit.settle`): every replica must share it.
const SETTLE_KEY_VAR: &str = "REDLIMIT_SETTLE_KEY";

/// mimalloc: an RLS decision makes some 80 small allocations (HTTP/2, gRPC, protobuf, the
/// store's script call), each a few times cheaper than glibc's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let settings = match Settings::try_parse() {
        Ok(settings) => settings,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    logging(&settings);
    // The name it was started by, for the log alone: the image has the binary at
    // `/bin/ratelimit` too (the Go image's path, which Envoy Gateway and Istio run), and it
    // behaves the same by either name.
    let started_as = std::env::args_os().next().unwrap_or_default();
    tracing::info!(
        "redlimit-server {} starting (as {})",
        env!("CARGO_PKG_VERSION"),
        started_as.to_string_lossy()
    );
    for warning in compat::warnings(|name| std::env::var(name).ok()) {
        tracing::warn!("{warning}");
        eprintln!("warning: {warning}");
    }
    let runtime = match runtime(settings.worker_threads) {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The runtime every task runs on (`REDLIMIT_WORKER_THREADS`). One thread by default, as
/// Limitador's gRPC: there, the calls a Redis reply answers complete one after the other and
/// their connection writes their answers in one go, and no thread wakes another (the Redis
/// connection's task, the calls and the connections all on it). On tokio's multi-threaded
/// runtime each answer was written on its own (the woken connection runs at once, from the
/// worker's LIFO slot) and a worker woke another about once per decision: 2.6–3.7 syscalls per
/// decision against 1.4–1.9 (the RLS bench, `REDLIMIT_BENCH_SYSCALLS=1`, 16 calls in flight).
/// More threads serve more decisions per second than one core can, at that cost per decision.
fn runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        if threads > 1 {
            builder.worker_threads(threads);
        }
        builder
    };
    builder.enable_all().build()
}

/// The server, from its settings to its exit: the statistics and tracing first, the config,
/// the stores and the service, health, the config's source, then the listeners until SIGTERM.
async fn run(settings: Settings) -> Result<(), String> {
    // Before the first request: the service takes its metric handles from the recorder then.
    let stats::Installed {
        prometheus,
        last_flush,
    } = stats::install(&settings.stats)?;
    let (tracing, call_tracer) = trace::Tracing::start(&settings.tracing)?.unzip();
    let source = config::Source::from_settings(&settings)?;
    // Whether calls wait for a first config: the listeners do not.
    let (config, awaiting_config) = source.initial(settings.force_start_without_initial_config)?;
    let has_domain = config.domains().next().is_some();
    let admin_token = listen::admin::token(&settings, |name| std::env::var(name).ok())?;

    let secrets = redis::Secrets::from_env();
    let (store, redis) = redis::stores(&settings, &secrets)?;
    let per_second = redis::per_second_store(&settings, &secrets)?;
    let rlqs = rlqs(&settings, redis, config.clone())?;
    let service = service(&settings, &store, per_second.as_ref(), config)?;

    let (reporter, grpc_health) = tonic_health::server::health_reporter();
    let health = health::Health::new(
        reporter,
        settings.redis_health_check_active_connection,
        settings.healthy_with_at_least_one_config_loaded,
        has_domain,
    )
    .await;
    let _probe = health.probe(store);
    let _probe_per_second = per_second.map(|store| health.probe_per_second(store));
    let in_force = match awaiting_config {
        true => config::InForce::awaiting_config(service.clone(), health.clone()),
        false => config::InForce::open(service.clone(), health.clone()),
    }
    .with_rlqs(rlqs.clone());
    let _source = source.start(in_force.clone());

    let listeners = listen::Listeners::bind(&settings, admin_token, prometheus).await?;
    let (stop, stopping) = watch::channel(false);
    let signal = {
        let health = health.clone();
        let drain_delay = settings.drain_delay;
        let rlqs = rlqs.clone();
        tokio::spawn(async move {
            shutdown_signal().await;
            // Unhealthy first, so balancers stop sending before the listeners drain.
            health.terminating();
            tracing::warn!("terminating: health fails; the listeners drain in {drain_delay:?}");
            tokio::time::sleep(drain_delay).await;
            // RLQS streams never end by themselves: each is sent TTL 0 (its gateway falls
            // back to its expired-assignment behaviour) and ended, so the listener drains.
            let told = rlqs.shutdown();
            if told > 0 {
                tracing::warn!("terminating: {told} RLQS streams sent TTL 0 and ended");
            }
            let _ = stop.send(true);
        })
    };
    let services = listen::Services {
        in_force,
        service,
        rlqs,
        health,
        grpc_health,
        call_tracer,
    };
    let served = listeners.serve(services, stopping).await;
    signal.abort();
    if let Some(last_flush) = last_flush {
        last_flush.run().await;
    }
    if let Some(tracing) = tracing {
        tracing.shutdown().await;
    }
    served
}

/// The rate limit service on the stores, with the config in force at start and the settings'
/// options.
fn service(
    settings: &Settings,
    store: &Arc<dyn Store>,
    per_second: Option<&Arc<dyn Store>>,
    config: RlsConfig,
) -> Result<RateLimitService, String> {
    let mut service = RateLimitService::builder(Arc::clone(store));
    if let Some(per_second) = per_second {
        service = service.per_second_store(Arc::clone(per_second));
    }
    // The receipts' secret: from the environment only (never a flag), as the other secrets.
    if let Some(secret) = std::env::var_os(SETTLE_KEY_VAR).filter(|s| !s.is_empty()) {
        service = service.settle_key(secret.as_encoded_bytes());
    }
    let service = service
        .config(config)
        .store_deadline(settings.store_deadline)
        .on_store_error(settings.on_store_error)
        .hash_tag(settings.hash_tag)
        .deny_cache(settings.deny_cache_entries())
        .shadow_mode(settings.shadow_mode)
        .quota_mode(settings.quota_mode)
        .commit(settings.commit())
        .response_dynamic_metadata(settings.response_dynamic_metadata)
        .near_limit_ratio(settings.near_limit_ratio);
    let service = if settings.limit_response_headers_enabled {
        let names = LimitHeaders::new(
            &settings.limit_limit_header,
            &settings.limit_remaining_header,
            &settings.limit_reset_header,
        )
        .map_err(|e| format!("LIMIT_*_HEADER: {e}"))?;
        service.limit_headers(names)
    } else {
        service
    };
    Ok(service.build())
}

/// The Rate Limit Quota Service: the config in force at start (replaced with the RLS's), each
/// bucket shared through the main Redis (alone with `BACKEND_TYPE=memory`), `RLQS_*`.
fn rlqs(
    settings: &Settings,
    redis: Option<redlimit::store::RedisStore>,
    config: RlsConfig,
) -> Result<RlqsService, String> {
    let s = &settings.rlqs;
    let mut builder = RlqsService::builder()
        .config(config)
        .assignment_ttl(s.rlqs_assignment_ttl)
        .sync_interval(s.rlqs_sync_interval)
        .bucket_idle_timeout(s.rlqs_bucket_idle_timeout)
        .max_buckets_per_stream(s.rlqs_max_buckets_per_stream)
        .max_bucket_id_bytes(s.rlqs_max_bucket_id_bytes);
    if let Some(redis) = redis {
        builder = builder.redis(redis);
    }
    builder.build().map_err(|e| format!("RLQS_*: {e}"))
}

/// Logs to stderr at `LOG_LEVEL`, in `LOG_FORMAT`; `RUST_LOG` overrides the level.
fn logging(settings: &Settings) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(log_directives(settings.log_level)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match settings.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// `LOG_LEVEL` as the Go service applies it: to the service's own lines. The libraries under
/// it (h2, hyper, tonic, rustls) log at most warnings, as grpc-go's logger stays apart from
/// logrus there: at `debug` h2 alone writes several lines per call (Istio's sample sets
/// `LOG_LEVEL=debug`). `RUST_LOG`, when set, replaces all of this.
fn log_directives(level: tracing::Level) -> String {
    let ours = level.as_str().to_ascii_lowercase();
    let theirs = if level > tracing::Level::WARN {
        "warn"
    } else {
        &ours
    };
    format!("{theirs},redlimit={ours},redlimit_server={ours}")
}

/// Resolves on SIGTERM or ctrl-c.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

#[cfg(test)]
mod tests {
    use tokio::runtime::RuntimeFlavor;

    use super::*;

    #[test]
    fn log_level_applies_to_our_crates_and_libraries_stay_at_warnings() {
        assert_eq!(
            log_directives(tracing::Level::DEBUG),
            "warn,redlimit=debug,redlimit_server=debug"
        );
        assert_eq!(
            log_directives(tracing::Level::ERROR),
            "error,redlimit=error,redlimit_server=error"
        );
        assert_eq!(
            log_directives(tracing::Level::WARN),
            "warn,redlimit=warn,redlimit_server=warn"
        );
    }

    #[test]
    fn one_worker_thread_is_a_single_threaded_runtime() {
        let flavor = |threads| {
            runtime(threads)
                .expect("a runtime")
                .handle()
                .runtime_flavor()
        };
        assert_eq!(flavor(1), RuntimeFlavor::CurrentThread);
        assert_eq!(flavor(0), RuntimeFlavor::MultiThread, "one per core");
        let two = runtime(2).expect("a runtime");
        assert_eq!(two.handle().runtime_flavor(), RuntimeFlavor::MultiThread);
        assert_eq!(two.metrics().num_workers(), 2);
    }
}

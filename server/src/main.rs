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
//!   `GRPC_SERVER_USE_TLS`): `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` and
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
//! SIGTERM (or ctrl-c) health turns unhealthy at once, then the listeners drain and the
//! process exits (the last statistics and spans sent first).

mod admin;
mod compat;
mod debug;
mod gate;
mod grpc;
mod health;
mod http;
mod json;
mod listen;
mod mapper;
mod metered;
mod metrics;
mod millis;
mod process;
mod redis;
mod reload;
mod rls_first;
mod settings;
mod statsd;
mod tls;
mod trace;
mod xds;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use redlimit::rls::LimitHeaders;
use redlimit::rls::RateLimitService;
use redlimit::rls::config::RlsConfig;
use tokio::sync::watch;

use listen::bind;

/// The secret that signs and checks the receipts of reservations settled through the service
/// (`redlimit.reserve`, `redlimit.settle`): every replica must share it.
const SETTLE_KEY_VAR: &str = "REDLIMIT_SETTLE_KEY";
use settings::{ConfigType, LogFormat, Settings};

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

async fn run(settings: Settings) -> Result<(), String> {
    let dir = reload::ConfigDir {
        root: settings.runtime_root.clone(),
        dir: settings.config_dir(),
        ignore_dotfiles: settings.runtime_ignoredotfiles,
        merge_domains: settings.merge_domain_config,
    };
    // Before the first request: the service takes its metric handles from the recorder then.
    let metrics::Installed {
        prometheus,
        last_flush,
    } = metrics::install(&settings.stats)?;
    let (tracing, call_tracer) = trace::Tracing::start(&settings.tracing)?.unzip();
    let xds = match settings.config_type {
        ConfigType::GrpcXdsSotw => Some(xds::prepare(&settings.xds, settings.merge_domain_config)?),
        ConfigType::File => None,
    };
    let seen = dir.fingerprint();
    // Whether calls wait for a first config: the listeners do not.
    let (config, awaiting_config) = match &xds {
        // None until the xDS server sends one.
        Some(_) => (RlsConfig::default(), true),
        None => {
            let first = dir.load();
            reload::record(&dir.dir, &first);
            match first {
                Ok(config) => (config, false),
                Err(e) if settings.force_start_without_initial_config => {
                    tracing::warn!(
                        "starting without a config ({e}): calls are answered UNKNOWN until one loads"
                    );
                    (RlsConfig::default(), true)
                }
                Err(e) => return Err(format!("the config did not load: {e}")),
            }
        }
    };
    let has_domain = config.domains().next().is_some();
    let admin_token = admin::token(&settings, |name| std::env::var(name).ok())?;

    let secrets = redis::Secrets::from_env();
    let store = redis::store(&settings, &secrets)?;
    let per_second = redis::per_second_store(&settings, &secrets)?;
    let mut service = RateLimitService::builder(Arc::clone(&store));
    if let Some(per_second) = &per_second {
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
    }
    .build();

    let (reporter, health_service) = tonic_health::server::health_reporter();
    let health = health::Health::new(
        reporter,
        settings.redis_health_check_active_connection,
        settings.healthy_with_at_least_one_config_loaded,
        has_domain,
    )
    .await;
    let _probe = health.probe(store);
    let _probe_per_second = per_second.map(|store| health.probe_per_second(store));
    let gated = match awaiting_config {
        true => gate::Gated::awaiting_config(service.clone()),
        false => gate::Gated::open(service.clone()),
    };
    let _watch = match xds {
        Some(xds) => xds.start(xds::Target {
            gated: gated.clone(),
            health: health.clone(),
        }),
        None => reload::watch(dir, seen, gated.clone(), health.clone()),
    };

    // Every listener bound before any serves: a port in use stops the start, not half of it.
    let grpc_tls = tls::from_settings(&settings.grpc)?;
    let _cert_watch = grpc_tls.as_ref().map(|t| Arc::clone(&t.cert).watch());
    let grpc = grpc::bind(&settings.grpc.address()).await?;
    let http = bind("http", SocketAddr::new(settings.host, settings.port)).await?;
    let debug = bind(
        "debug",
        SocketAddr::new(settings.debug_host, settings.debug_port),
    )
    .await?;
    let admin_listener = match &admin_token {
        Some(_) => Some(
            bind(
                "admin",
                SocketAddr::new(settings.admin_host, settings.admin_port),
            )
            .await?,
        ),
        None => None,
    };
    let metrics_listener = match &prometheus {
        Some(_) => Some(bind("metrics", settings.stats.prometheus_addr).await?),
        None => None,
    };

    let (stop, stopping) = watch::channel(false);
    let signal = {
        let health = health.clone();
        let drain_delay = settings.drain_delay;
        tokio::spawn(async move {
            shutdown_signal().await;
            // Unhealthy first, so balancers stop sending before the listeners drain.
            health.terminating();
            tracing::warn!("terminating: health fails; the listeners drain in {drain_delay:?}");
            tokio::time::sleep(drain_delay).await;
            let _ = stop.send(true);
        })
    };
    let stopped = |mut stopping: watch::Receiver<bool>| async move {
        let _ = stopping.wait_for(|stop| *stop).await;
    };

    let rls = metered::Metered::new(trace::Traced::new(gated.clone(), call_tracer).into_server());
    let grpc_router = tonic::transport::Server::builder()
        .layer(rls_first::RlsFirst::new(rls.clone()))
        .add_service(metered::Metered::new(health_service))
        .add_service(rls);
    let grpc_server = grpc::serve(
        grpc_router,
        grpc,
        grpc_tls.map(|t| t.acceptor),
        stopped(stopping.clone()),
    );
    let http_server = axum::serve(http, http::router(health.clone(), gated))
        .with_graceful_shutdown(stopped(stopping.clone()));
    let debug_server = axum::serve(debug, debug::router(service.clone()))
        .with_graceful_shutdown(stopped(stopping.clone()));
    let metrics_server = async {
        match (metrics_listener, prometheus) {
            (Some(listener), Some(handle)) => axum::serve(
                listener,
                metrics::router(handle, &settings.stats.prometheus_path),
            )
            .with_graceful_shutdown(stopped(stopping.clone()))
            .await
            .map_err(|e| e.to_string()),
            _ => Ok(()),
        }
    };
    let admin_server = async {
        match (admin_listener, admin_token) {
            (Some(listener), Some(token)) => {
                let router = redlimit::rls::admin::router(service.clone(), token);
                axum::serve(listener, router)
                    .with_graceful_shutdown(stopped(stopping.clone()))
                    .await
                    .map_err(|e| e.to_string())
            }
            _ => Ok(()),
        }
    };
    let (grpc, http, debug, metrics, admin) = tokio::join!(
        grpc_server,
        async { http_server.await.map_err(|e| e.to_string()) },
        async { debug_server.await.map_err(|e| e.to_string()) },
        metrics_server,
        admin_server,
    );
    signal.abort();
    if let Some(last_flush) = last_flush {
        last_flush.run().await;
    }
    if let Some(tracing) = tracing {
        tracing.shutdown().await;
    }
    grpc.map_err(|e| format!("gRPC listener: {e}"))?;
    http.map_err(|e| format!("HTTP listener: {e}"))?;
    debug.map_err(|e| format!("debug listener: {e}"))?;
    metrics.map_err(|e| format!("metrics listener: {e}"))?;
    admin.map_err(|e| format!("admin listener: {e}"))?;
    Ok(())
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

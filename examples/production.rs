//! A service set up as in production: the rules from a config file (reloaded when it changes
//! and on SIGHUP), Redis from the environment (the memory store without it, so this runs
//! anywhere), Prometheus metrics with histogram buckets, the admin API behind a token from the
//! environment or a file, logs through `tracing`, and a graceful shutdown of every listener on
//! ctrl-c or SIGTERM.
//!
//! ```text
//! REDLIMIT_ADMIN_TOKEN=s3cret cargo run --example production --features admin,config
//! ```
//!
//! | variable | default |
//! |---|---|
//! | `REDLIMIT_CONFIG` | `examples/redlimit.toml` |
//! | `REDLIMIT_REDIS` or `REDLIMIT_REDIS_FILE` (the URL, with its password: a secret) | the memory store |
//! | `REDLIMIT_ADMIN_TOKEN` or `REDLIMIT_ADMIN_TOKEN_FILE` | no admin listener |
//! | `REDLIMIT_BIND`, `REDLIMIT_METRICS_BIND`, `REDLIMIT_ADMIN_BIND` | `127.0.0.1:` 3000, 9090, 9091 |
//! | `RUST_LOG` | `info` |
//!
//! It prints `metrics on ADDR`, `admin on ADDR`, then `listening on ADDR` once it serves.

use std::net::SocketAddr;

use axum::Router;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use redlimit::RateLimitLayer;
use redlimit::admin::{self, AdminToken};
use redlimit::config::{ConfigFile, Reloader};
use redlimit::store::{MemoryStore, RedisStore};
use tokio::net::TcpListener;
use tokio::sync::watch;

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    // Logs on stderr; stdout carries only the listeners' addresses.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();

    // The recorder first, with buckets: a layer takes its metric handles at its first request.
    let mut prometheus = PrometheusBuilder::new();
    for (name, buckets) in redlimit::telemetry::HISTOGRAM_BUCKETS {
        prometheus = prometheus.set_buckets_for_metric(Matcher::Full(name.to_string()), buckets)?;
    }
    let metrics = prometheus.install_recorder()?;

    let config = env("REDLIMIT_CONFIG").unwrap_or_else(|| "examples/redlimit.toml".into());
    let rules = ConfigFile::load(&config)?.rules();
    let builder = match secret("REDLIMIT_REDIS")? {
        Some(url) => RateLimitLayer::builder_per_route(RedisStore::connect(&url).await?),
        None => RateLimitLayer::builder_per_route(MemoryStore::new()),
    };
    let layer = builder.rules(rules).build()?;
    // Reloads through the handle of the layer built last: every clone of it follows.
    let reloader = Reloader::new(layer.handle());
    let _watcher = reloader.watch(&config)?;
    #[cfg(unix)]
    let _hangup = reloader.reload_on_hangup(&config)?;

    let (stop, stopped) = watch::channel(());
    let mut servers = tokio::task::JoinSet::new();

    let upkeep = metrics.clone();
    let metrics_app = Router::new().route(
        "/metrics",
        get(move || async move {
            upkeep.run_upkeep();
            metrics.render()
        }),
    );
    let listener = bind("metrics", "REDLIMIT_METRICS_BIND", "127.0.0.1:9090").await?;
    servers.spawn(serve(listener, metrics_app, stopped.clone()));

    let token = match (
        env("REDLIMIT_ADMIN_TOKEN_FILE"),
        env("REDLIMIT_ADMIN_TOKEN"),
    ) {
        (Some(path), _) => Some(AdminToken::from_file(path)?),
        (None, Some(token)) => Some(AdminToken::new(token)?),
        (None, None) => None,
    };
    if let Some(token) = token {
        let admin = admin::router(layer.handle(), token);
        let listener = bind("admin", "REDLIMIT_ADMIN_BIND", "127.0.0.1:9091").await?;
        servers.spawn(serve(listener, admin, stopped.clone()));
    }

    // Every path answers `ok`, limited by the file's rules.
    let app = Router::new().fallback(|| async { "ok\n" }).layer(layer);
    let listener = bind("listening", "REDLIMIT_BIND", "127.0.0.1:3000").await?;
    servers.spawn(serve(listener, app, stopped));

    shutdown_signal().await;
    tracing::info!("shutting down: draining every listener");
    let _ = stop.send(());
    while let Some(served) = servers.join_next().await {
        served??;
    }
    Ok(())
}

/// Serves `app` (with the peer address the layer keys on) until `stop` changes or drops.
async fn serve(
    listener: TcpListener,
    app: Router,
    mut stop: watch::Receiver<()>,
) -> std::io::Result<()> {
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = stop.changed().await;
        })
        .await
}

/// Binds the address in `var` (or `default`) and prints `WHAT on ADDR`.
async fn bind(what: &str, var: &str, default: &str) -> Result<TcpListener, Error> {
    let listener = TcpListener::bind(env(var).as_deref().unwrap_or(default)).await?;
    println!("{what} on {}", listener.local_addr()?);
    Ok(listener)
}

/// A set, non-empty environment variable.
fn env(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

/// A secret from `VAR`, or from the file named by `VAR_FILE` (a mounted secret, its line break
/// dropped); never from the command line, which every user of the machine can read.
fn secret(var: &str) -> Result<Option<String>, Error> {
    if let Some(path) = env(&format!("{var}_FILE")) {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{var}_FILE: cannot read {path}: {}", e.kind()))?;
        return Ok(Some(text.trim_end_matches(['\r', '\n']).to_owned()));
    }
    Ok(env(var))
}

/// Resolves on ctrl-c or SIGTERM (what Kubernetes and Docker send to stop a container).
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let terminate = async {
            match signal(SignalKind::terminate()) {
                Ok(mut terminate) => terminate.recv().await,
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

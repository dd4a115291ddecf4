//! The listeners, as envoyproxy/ratelimit opens them:
//!
//! - gRPC (`grpc.rs`: TCP or `GRPC_UDS`; TLS and mTLS in `tls/`), rate limit calls sent to the
//!   service past tonic's router (`rls_fast_path.rs`), each call counted and timed by method
//!   (`stats::grpc_methods`), and the health service;
//! - HTTP (`http.rs`): `/healthcheck`, and `/json` in proto3 JSON (`json.rs`);
//! - debug (`debug.rs`): `/rlconfig`;
//! - admin (`admin.rs`), only with a token: the library's RLS admin API;
//! - Prometheus (`prometheus.rs`), with `USE_PROMETHEUS`.
//!
//! Each TCP listener binds as Go's do (`bind.rs`: a wildcard address takes IPv6 and IPv4 at
//! once) and prints `<name> on ADDR` once bound. Every listener is bound before any serves: a
//! port in use stops the start, not half of it.

pub(crate) mod admin;
mod bind;
mod debug;
mod grpc;
mod http;
mod json;
mod prometheus;
mod rls_fast_path;
mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;
use redlimit::admin::AdminToken;
use redlimit::rlqs::RlqsService;
use redlimit::rls::RateLimitService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tonic_health::pb::health_server::{Health as GrpcHealth, HealthServer};

use crate::config::InForce;
use crate::health::Health;
use crate::settings::Settings;
use crate::stats::grpc_methods::Metered;
use crate::trace::{CallTracer, Traced};
use bind::bind;

/// Every listener, bound, not yet serving.
pub(crate) struct Listeners {
    grpc: grpc::GrpcListener,
    grpc_tls: Option<TlsAcceptor>,
    http: TcpListener,
    debug: TcpListener,
    admin: Option<(TcpListener, AdminToken)>,
    metrics: Option<(TcpListener, PrometheusHandle, String)>,
}

/// What the listeners serve.
pub(crate) struct Services<H> {
    /// The rate limit calls (gRPC, `/json`).
    pub(crate) in_force: InForce,
    /// The config for `/rlconfig`, and the admin API's service.
    pub(crate) service: RateLimitService,
    /// The Rate Limit Quota Service, on the gRPC listener.
    pub(crate) rlqs: RlqsService,
    pub(crate) health: Health,
    /// The gRPC health service, which `health` reports to.
    pub(crate) grpc_health: HealthServer<H>,
    pub(crate) call_tracer: Option<CallTracer>,
}

impl Listeners {
    /// Binds every listener the settings ask for: the admin one with a token, the metrics one
    /// with Prometheus. The gRPC certificate is watched from here on.
    pub(crate) async fn bind(
        settings: &Settings,
        admin_token: Option<AdminToken>,
        prometheus: Option<PrometheusHandle>,
    ) -> Result<Self, String> {
        let grpc_tls = tls::from_settings(&settings.grpc)?;
        let _cert_watch = grpc_tls.as_ref().map(|t| Arc::clone(&t.cert).watch());
        let grpc = grpc::bind(&settings.grpc.address()).await?;
        let http = bind("http", SocketAddr::new(settings.host, settings.port)).await?;
        let debug = bind(
            "debug",
            SocketAddr::new(settings.debug_host, settings.debug_port),
        )
        .await?;
        let admin = match admin_token {
            Some(token) => {
                let addr = SocketAddr::new(settings.admin_host, settings.admin_port);
                Some((bind("admin", addr).await?, token))
            }
            None => None,
        };
        let metrics = match prometheus {
            Some(handle) => {
                let listener = bind("metrics", settings.stats.prometheus_addr).await?;
                Some((listener, handle, settings.stats.prometheus_path.clone()))
            }
            None => None,
        };
        Ok(Listeners {
            grpc,
            grpc_tls: grpc_tls.map(|t| t.acceptor),
            http,
            debug,
            admin,
            metrics,
        })
    }

    /// Serves `services` on every listener until `stopping` turns true, then drains them; the
    /// first listener's error, in the order bound.
    pub(crate) async fn serve<H>(
        self,
        services: Services<H>,
        stopping: watch::Receiver<bool>,
    ) -> Result<(), String>
    where
        H: GrpcHealth,
    {
        let Services {
            in_force,
            service,
            rlqs,
            health,
            grpc_health,
            call_tracer,
        } = services;
        let stopped = |mut stopping: watch::Receiver<bool>| async move {
            let _ = stopping.wait_for(|stop| *stop).await;
        };

        let rls = Metered::new(Traced::new(in_force.clone(), call_tracer).into_server());
        let grpc_router = tonic::transport::Server::builder()
            .layer(rls_fast_path::RlsFirst::new(rls.clone()))
            .add_service(Metered::new(grpc_health))
            .add_service(rlqs.into_server())
            .add_service(rls);
        let grpc_server = grpc::serve(
            grpc_router,
            self.grpc,
            self.grpc_tls,
            stopped(stopping.clone()),
        );
        let http_server = axum::serve(self.http, http::router(health, in_force))
            .with_graceful_shutdown(stopped(stopping.clone()));
        let debug_server = axum::serve(self.debug, debug::router(service.clone()))
            .with_graceful_shutdown(stopped(stopping.clone()));
        let metrics_server = async {
            match self.metrics {
                Some((listener, handle, path)) => {
                    axum::serve(listener, prometheus::router(handle, &path))
                        .with_graceful_shutdown(stopped(stopping.clone()))
                        .await
                        .map_err(|e| e.to_string())
                }
                None => Ok(()),
            }
        };
        let admin_server = async {
            match self.admin {
                Some((listener, token)) => {
                    let router = redlimit::rls::admin::router(service.clone(), token);
                    axum::serve(listener, router)
                        .with_graceful_shutdown(stopped(stopping.clone()))
                        .await
                        .map_err(|e| e.to_string())
                }
                None => Ok(()),
            }
        };
        let (grpc, http, debug, metrics, admin) = tokio::join!(
            grpc_server,
            async { http_server.await.map_err(|e| e.to_string()) },
            async { debug_server.await.map_err(|e| e.to_string()) },
            metrics_server,
            admin_server,
        );
        grpc.map_err(|e| format!("gRPC listener: {e}"))?;
        http.map_err(|e| format!("HTTP listener: {e}"))?;
        debug.map_err(|e| format!("debug listener: {e}"))?;
        metrics.map_err(|e| format!("metrics listener: {e}"))?;
        admin.map_err(|e| format!("admin listener: {e}"))?;
        Ok(())
    }
}

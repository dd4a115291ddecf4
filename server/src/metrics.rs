//! `USE_PROMETHEUS`: every metric (envoyproxy/ratelimit's names, recorded by the service, and
//! redlimit's own) kept by a Prometheus recorder and served at `PROMETHEUS_ADDR` +
//! `PROMETHEUS_PATH`.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Installs the Prometheus recorder as the process's, with redlimit's histogram buckets.
/// Before the first request: metric handles are taken from the recorder in place at first use.
pub(crate) fn install() -> Result<PrometheusHandle, String> {
    let mut builder = PrometheusBuilder::new();
    for (name, buckets) in redlimit::telemetry::HISTOGRAM_BUCKETS {
        builder = builder
            .set_buckets_for_metric(Matcher::Full((*name).to_owned()), buckets)
            .map_err(|e| format!("USE_PROMETHEUS: bad buckets for {name}: {e}"))?;
    }
    builder
        .install_recorder()
        .map_err(|e| format!("USE_PROMETHEUS: cannot install the Prometheus recorder: {e}"))
}

/// `GET path` in Prometheus's text format; the recorder's upkeep runs beside it.
pub(crate) fn router(handle: PrometheusHandle, path: &str) -> Router {
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(5));
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    Router::new().route(
        path,
        get(move || async move {
            (
                [("content-type", "text/plain; version=0.0.4")],
                handle.render(),
            )
        }),
    )
}

//! `--metrics-bind`: the library's metrics (recorded through the `metrics` facade) kept by a
//! Prometheus recorder and served as text at `GET /metrics`.

use std::time::Duration;

use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Store latency buckets, in seconds: from well under a Redis round trip to the default deadline.
const LATENCY_BUCKETS: &[f64] = &[
    0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
];

/// Installs the Prometheus recorder as the process's recorder. Call it before the first request:
/// the layer takes its metric handles from the recorder installed at its first use.
pub(crate) fn install() -> Result<PrometheusHandle, String> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("redlimit_store_duration_seconds".into()),
            LATENCY_BUCKETS,
        )
        .and_then(PrometheusBuilder::install_recorder)
        .map_err(|e| format!("--metrics-bind: cannot install the Prometheus recorder: {e}"))
}

/// `GET /metrics`, in Prometheus's text format; the recorder's upkeep runs beside it.
pub(crate) fn router(handle: PrometheusHandle) -> Router {
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(5));
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    Router::new().route(
        "/metrics",
        get(move || async move {
            (
                [("content-type", "text/plain; version=0.0.4")],
                handle.render(),
            )
        }),
    )
}

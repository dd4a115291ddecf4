//! `--metrics-bind`: the library's metrics (recorded through the `metrics` facade) kept by a
//! Prometheus recorder and served as text at `GET /metrics`.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Installs the Prometheus recorder as the process's recorder, with the library's histogram
/// buckets (`redlimit::telemetry::HISTOGRAM_BUCKETS`: `_bucket` series, not summaries). Call
/// it before the first request: the layer takes its metric handles from the recorder installed
/// at its first use.
pub(crate) fn install() -> Result<PrometheusHandle, String> {
    let mut builder = PrometheusBuilder::new();
    for (name, buckets) in redlimit::telemetry::HISTOGRAM_BUCKETS {
        builder = builder
            .set_buckets_for_metric(Matcher::Full((*name).to_owned()), buckets)
            .map_err(|e| format!("--metrics-bind: bad buckets for {name}: {e}"))?;
    }
    builder
        .install_recorder()
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

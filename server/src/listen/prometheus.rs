//! The Prometheus listener (`USE_PROMETHEUS=true`, `PROMETHEUS_ADDR` :9090): `GET PROMETHEUS_PATH`
//! (/metrics), the recorder's series (see `stats`) and the `process_*` ones.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;

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
            let mut text = handle.render();
            text.push_str(&crate::stats::process::render());
            ([("content-type", "text/plain; version=0.0.4")], text)
        }),
    )
}

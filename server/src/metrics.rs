//! The process's metrics recorder: Prometheus (`USE_PROMETHEUS`: every metric, envoyproxy/
//! ratelimit's names recorded by the service and redlimit's own, served at `PROMETHEUS_ADDR` +
//! `PROMETHEUS_PATH`), statsd (`USE_STATSD`: the Go service's counters under its statsd names)
//! or DogStatsD (`USE_DOG_STATSD`: the same as DogStatsD lines), Prometheus and one of those,
//! or none (`DISABLE_STATS`).

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};
use metrics_util::layers::FanoutBuilder;

use crate::millis::ResponseTimes;
use crate::settings::StatsSettings;
use crate::statsd::{Dog, LastFlush, StatsdRecorder};

/// The recorders installed: Prometheus's handle, statsd's last flush.
#[derive(Debug, Default)]
pub(crate) struct Installed {
    pub(crate) prometheus: Option<PrometheusHandle>,
    pub(crate) last_flush: Option<LastFlush>,
}

/// Installs the recorders the settings ask for as the process's. Before the first request:
/// metric handles are taken from the recorder in place at first use.
pub(crate) fn install(stats: &StatsSettings) -> Result<Installed, String> {
    let millis = stats.prometheus_response_time_as_milliseconds;
    let prometheus = stats.prometheus().then(|| prometheus(millis)).transpose()?;
    let dog = match stats.dog_statsd()? {
        true => Some(Dog::from_env(&stats.use_dog_statsd_mogrifiers.0, |name| {
            std::env::var(name).ok()
        })?),
        false => None,
    };
    let lines = (stats.statsd() || dog.is_some()).then(|| StatsdRecorder::start(stats, dog));
    let (statsd, last_flush) = match lines {
        Some((recorder, last)) => (Some(recorder), Some(last)),
        None => (None, None),
    };
    let installed = Installed {
        prometheus: prometheus.as_ref().map(PrometheusRecorder::handle),
        last_flush,
    };
    let prometheus = prometheus.map(|recorder| ResponseTimes::new(recorder, millis));
    let cannot = |e: &dyn std::fmt::Display| format!("cannot install the metrics recorder: {e}");
    match (prometheus, statsd) {
        (None, None) => {}
        (Some(prometheus), None) => {
            metrics::set_global_recorder(prometheus).map_err(|e| cannot(&e))?;
        }
        (None, Some(statsd)) => metrics::set_global_recorder(statsd).map_err(|e| cannot(&e))?,
        (Some(prometheus), Some(statsd)) => {
            let both = FanoutBuilder::default()
                .add_recorder(prometheus)
                .add_recorder(statsd)
                .build();
            metrics::set_global_recorder(both).map_err(|e| cannot(&e))?;
        }
    }
    Ok(installed)
}

/// The Prometheus recorder, with redlimit's histogram buckets (the response time's in
/// milliseconds when `millis`).
fn prometheus(millis: bool) -> Result<PrometheusRecorder, String> {
    let mut builder = PrometheusBuilder::new();
    let response_time = crate::millis::buckets(millis);
    let server = [(crate::metered::RESPONSE_TIME, response_time.as_slice())];
    for (name, buckets) in redlimit::telemetry::HISTOGRAM_BUCKETS.iter().chain(&server) {
        builder = builder
            .set_buckets_for_metric(Matcher::Full((*name).to_owned()), buckets)
            .map_err(|e| format!("USE_PROMETHEUS: bad buckets for {name}: {e}"))?;
    }
    Ok(builder.build_recorder())
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

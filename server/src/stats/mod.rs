//! The statistics, under envoyproxy/ratelimit's names: the process's metrics recorder (here),
//! each gRPC call counted and timed by method (`grpc_methods.rs`), Prometheus's response time
//! in milliseconds when asked (`response_time_ms.rs`), the statsd_exporter mapping file
//! (`mapper/`), the statsd and DogStatsD lines (`statsd/`) and the `process_*` series
//! (`process.rs`). Prometheus's are served by `listen/prometheus.rs`.
//!
//! The recorder: Prometheus (`USE_PROMETHEUS`: every metric, envoyproxy/ratelimit's names
//! recorded by the service and redlimit's own, served at `PROMETHEUS_ADDR` +
//! `PROMETHEUS_PATH`), statsd (`USE_STATSD`: the Go service's counters under its statsd names)
//! or DogStatsD (`USE_DOG_STATSD`: the same as DogStatsD lines), Prometheus and one of those,
//! or none (`DISABLE_STATS`). With `PROMETHEUS_MAPPER_YAML`, Prometheus has the Go service's
//! statistics under the names that statsd_exporter mapping file gives them (see `mapper`).
//! The process series (`process`) are read at each scrape.

pub(crate) mod grpc_methods;
mod mapper;
pub(crate) mod process;
mod response_time_ms;
mod statsd;

use std::num::NonZeroU32;
use std::sync::Arc;

use metrics::{Key, Label, Recorder};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};
use metrics_util::layers::FanoutBuilder;

use crate::settings::{ExtraTags, StatsSettings};
use grpc_methods::{METHODS, RESPONSE_TIME};
use mapper::{Mapped, Mapper, MetricType, Observer, Outcome};
use response_time_ms::ResponseTimes;
use statsd::{Dog, LastFlush, StatsdRecorder, names};

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
    let mapper = match (stats.mapper_yaml(), stats.prometheus()) {
        (Some(path), true) => Mapper::load(path, &tag_fields(&stats.extra_tags))?.map(Arc::new),
        _ => None,
    };
    if mapper.is_some() && millis {
        tracing::warn!(
            "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS has no effect with \
             PROMETHEUS_MAPPER_YAML (as in the Go service): the file's mapping applies"
        );
    }
    let prometheus = match stats.prometheus() {
        true => Some(prometheus(millis, mapper.as_deref(), &stats.extra_tags)?),
        false => None,
    };
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
    let prometheus = prometheus.map(|recorder| -> Box<dyn Recorder + Send + Sync> {
        match mapper {
            Some(mapper) => Box::new(Mapped::new(recorder, mapper, stats.extra_tags.clone())),
            None => Box::new(ResponseTimes::new(recorder, millis)),
        }
    });
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
/// milliseconds when `millis`), or with a mapping file, its response time as the file says.
fn prometheus(
    millis: bool,
    mapper: Option<&Mapper>,
    tags: &ExtraTags,
) -> Result<PrometheusRecorder, String> {
    let mut builder = PrometheusBuilder::new();
    let response_time = response_time_ms::buckets(millis);
    let server = [(RESPONSE_TIME, response_time.as_slice())];
    let server = if mapper.is_some() {
        &[][..]
    } else {
        &server[..]
    };
    for (name, buckets) in redlimit::telemetry::HISTOGRAM_BUCKETS.iter().chain(server) {
        builder = builder
            .set_buckets_for_metric(Matcher::Full((*name).to_owned()), buckets)
            .map_err(|e| format!("USE_PROMETHEUS: bad buckets for {name}: {e}"))?;
    }
    if let Some(mapper) = mapper {
        builder = mapped_timers(builder, mapper, tags)?;
    }
    Ok(builder.build_recorder())
}

/// The response time's metrics as the mapping names them: a histogram's buckets, or the
/// summary's quantiles and window (the exporter has one summary configuration for all: the
/// file's summaries that apply must agree).
fn mapped_timers(
    mut builder: PrometheusBuilder,
    mapper: &Mapper,
    tags: &ExtraTags,
) -> Result<PrometheusBuilder, String> {
    let mut summary: Option<Observer> = None;
    for method in METHODS {
        let key = Key::from_parts(RESPONSE_TIME, vec![Label::new("grpc_method", method)]);
        let Some(statsd) = names::go_name(&key, tags) else {
            continue;
        };
        let Outcome::Metric(metric) = mapper.map(&statsd, MetricType::Observer) else {
            continue;
        };
        match &metric.observer {
            Observer::Histogram(buckets) => {
                builder = builder
                    .set_buckets_for_metric(Matcher::Full(metric.name.clone()), buckets)
                    .map_err(|e| format!("PROMETHEUS_MAPPER_YAML: {statsd}'s buckets: {e}"))?;
            }
            Observer::Summary {
                quantiles,
                max_age,
                age_buckets,
            } => {
                if summary.as_ref().is_some_and(|s| *s != metric.observer) {
                    return Err(format!(
                        "PROMETHEUS_MAPPER_YAML: {statsd} is a summary with other quantiles or \
                         window than another response time's: not supported (one summary \
                         configuration for all)"
                    ));
                }
                summary = Some(metric.observer.clone());
                let parts = NonZeroU32::new(*age_buckets).unwrap_or(NonZeroU32::MIN);
                builder = builder
                    .set_quantiles(quantiles)
                    .and_then(|b| b.set_bucket_duration(*max_age / parts.get()))
                    .map_err(|e| format!("PROMETHEUS_MAPPER_YAML: {statsd}'s summary: {e}"))?
                    .set_bucket_count(parts);
            }
        }
    }
    Ok(builder)
}

/// `EXTRA_TAGS` as the fields gostats appends to every statsd name (`.__key=value`).
fn tag_fields(tags: &ExtraTags) -> Vec<String> {
    let mut suffix = String::new();
    for (key, value) in &tags.0 {
        suffix.push_str(&format!(".__{key}={value}"));
    }
    suffix.split('.').skip(1).map(str::to_owned).collect()
}

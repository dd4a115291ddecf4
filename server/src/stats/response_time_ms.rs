//! `PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS=true`: the Go service's legacy Prometheus
//! response time, `ratelimit_service_response_time_seconds` observed in milliseconds (its
//! built-in mapping without the `scale: 0.001`), for dashboards written before it was fixed.
//!
//! Only the Prometheus recorder sees the scaled values: statsd's timer is in milliseconds
//! either way. The histogram's buckets are scaled alike (`0.5`, `1` ... `15`, `20` ...
//! `10000`), where the Go service keeps the buckets made for seconds (`0.005` to `10`), so a
//! call of more than 10 ms falls past its last; `_sum` and `_count` read as theirs.

use std::sync::Arc;

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

use crate::stats::grpc_methods::{RESPONSE_TIME, RESPONSE_TIME_BUCKETS};

/// A recorder whose [`RESPONSE_TIME`] histogram observes milliseconds when `millis` is set,
/// and which is `inner` otherwise.
///
/// ```ignore
/// let recorder = ResponseTimes::new(PrometheusBuilder::new().build_recorder(), true);
/// metrics::set_global_recorder(recorder)?;
/// ```
#[derive(Debug)]
pub(crate) struct ResponseTimes<R> {
    inner: R,
    millis: bool,
}

impl<R> ResponseTimes<R> {
    pub(crate) fn new(inner: R, millis: bool) -> Self {
        ResponseTimes { inner, millis }
    }
}

/// The response time's buckets in the unit its values are observed in.
pub(crate) fn buckets(millis: bool) -> Vec<f64> {
    let scale = if millis { 1000.0 } else { 1.0 };
    RESPONSE_TIME_BUCKETS.iter().map(|b| b * scale).collect()
}

/// Records each value a thousand times larger: seconds in, milliseconds out.
struct Millis(Histogram);

impl HistogramFn for Millis {
    fn record(&self, value: f64) {
        self.0.record(value * 1000.0);
    }
}

impl<R: Recorder> Recorder for ResponseTimes<R> {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_counter(key, unit, description);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_gauge(key, unit, description);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_histogram(key, unit, description);
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        self.inner.register_counter(key, metadata)
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        self.inner.register_gauge(key, metadata)
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        let histogram = self.inner.register_histogram(key, metadata);
        if self.millis && key.name() == RESPONSE_TIME {
            Histogram::from_arc(Arc::new(Millis(histogram)))
        } else {
            histogram
        }
    }
}

#[cfg(test)]
mod tests {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

    use super::*;

    /// A recorder as `stats::install` makes it, its rendering after 3 ms and 30 ms of
    /// response time and one other histogram's 0.5.
    fn render(millis: bool) -> String {
        let prometheus = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(RESPONSE_TIME.to_owned()), &buckets(millis))
            .expect("buckets")
            .build_recorder();
        let handle = prometheus.handle();
        let recorder = ResponseTimes::new(prometheus, millis);
        metrics::with_local_recorder(&recorder, || {
            let time = metrics::histogram!(RESPONSE_TIME, "grpc_method" => "ShouldRateLimit");
            time.record(0.003);
            time.record(0.030);
            metrics::histogram!("other_seconds").record(0.5);
        });
        handle.render()
    }

    #[test]
    fn the_response_time_is_in_milliseconds_only_when_asked() {
        let seconds = render(false);
        assert!(
            seconds.contains(
                "ratelimit_service_response_time_seconds_sum{grpc_method=\"ShouldRateLimit\"} 0.033"
            ),
            "{seconds}"
        );
        assert!(
            seconds.contains(
                "ratelimit_service_response_time_seconds_bucket{grpc_method=\"ShouldRateLimit\",le=\"0.005\"} 1"
            ),
            "{seconds}"
        );
        let millis = render(true);
        assert!(
            millis.contains(
                "ratelimit_service_response_time_seconds_sum{grpc_method=\"ShouldRateLimit\"} 33"
            ),
            "{millis}"
        );
        assert!(
            millis.contains(
                "ratelimit_service_response_time_seconds_bucket{grpc_method=\"ShouldRateLimit\",le=\"5\"} 1"
            ),
            "{millis}"
        );
        assert!(
            millis.contains(
                "ratelimit_service_response_time_seconds_bucket{grpc_method=\"ShouldRateLimit\",le=\"50\"} 2"
            ),
            "{millis}"
        );
        // Every other metric as it was.
        for rendered in [&seconds, &millis] {
            assert!(rendered.contains("other_seconds_sum 0.5"), "{rendered}");
        }
    }
}

//! The Go service's per-method gRPC statistics (its `ServerReporter` interceptor): each call
//! counted and timed by method (`ShouldRateLimit`, and the health service's `Check`), as
//! Prometheus `ratelimit_service_total_requests{grpc_method}` and
//! `ratelimit_service_response_time_seconds{grpc_method}` (its default mapping's names), and
//! as statsd `ratelimit_server.METHOD.total_requests` and `ratelimit_server.METHOD.response_time`
//! (a timer, in milliseconds).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use metrics::{Counter, Histogram};
use tonic::body::Body;
use tonic::server::NamedService;
use tower_service::Service;

/// Calls, by `grpc_method`.
pub(crate) const TOTAL_REQUESTS: &str = "ratelimit_service_total_requests";
/// Seconds from a call's request to its response, by `grpc_method`.
pub(crate) const RESPONSE_TIME: &str = "ratelimit_service_response_time_seconds";
/// The methods counted and timed (`grpc_method`).
pub(crate) const METHODS: [&str; 2] = ["ShouldRateLimit", "Check"];
/// The response time's buckets: Prometheus's defaults (the Go service's statsd exporter's),
/// below them the milliseconds a decision takes, and 15 and 20 ms: the store deadline's
/// default and Envoy's timeout, so the calls Envoy gave up on can be counted.
pub(crate) const RESPONSE_TIME_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0,
];

/// A gRPC service whose unary calls are counted and timed.
#[derive(Debug, Clone)]
pub(crate) struct Metered<S> {
    inner: S,
    meters: Arc<Meters>,
}

impl<S> Metered<S> {
    pub(crate) fn new(inner: S) -> Self {
        Metered {
            inner,
            meters: Arc::default(),
        }
    }
}

/// The metric handles of the methods [`method`] names, each taken from the recorder at its
/// first call (so a method never called has no series, as in the Go service): later calls
/// count and time themselves without building a key or looking one up.
#[derive(Debug, Default)]
struct Meters {
    should_rate_limit: OnceLock<MethodMeters>,
    check: OnceLock<MethodMeters>,
}

/// One method's call counter and response-time histogram.
#[derive(Debug, Clone)]
struct MethodMeters {
    calls: Counter,
    time: Histogram,
}

impl MethodMeters {
    fn new(method: &'static str) -> Self {
        MethodMeters {
            calls: metrics::counter!(TOTAL_REQUESTS, "grpc_method" => method),
            time: metrics::histogram!(RESPONSE_TIME, "grpc_method" => method),
        }
    }
}

impl<S: NamedService> NamedService for Metered<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for Metered<S>
where
    S: Service<http::Request<Body>>,
    S::Future: Unpin,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Timed<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let meters = match method(request.uri().path()) {
            Some(Method::ShouldRateLimit) => Some(
                self.meters
                    .should_rate_limit
                    .get_or_init(|| MethodMeters::new("ShouldRateLimit")),
            ),
            Some(Method::Check) => {
                Some(self.meters.check.get_or_init(|| MethodMeters::new("Check")))
            }
            None => None,
        };
        let start = Instant::now();
        if let Some(meters) = meters {
            meters.calls.increment(1);
        }
        Timed {
            call: self.inner.call(request),
            start,
            time: meters.map(|m| m.time.clone()),
        }
    }
}

/// A call's future (tonic's services box theirs: `Unpin`), its response time recorded when it
/// completes.
#[derive(Debug)]
pub(crate) struct Timed<F> {
    call: F,
    start: Instant,
    time: Option<Histogram>,
}

impl<F: Future + Unpin> Future for Timed<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let response = std::task::ready!(Pin::new(&mut self.call).poll(cx));
        if let Some(time) = self.time.take() {
            time.record(self.start.elapsed().as_secs_f64());
        }
        Poll::Ready(response)
    }
}

/// A unary method the Go service's interceptor counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    ShouldRateLimit,
    Check,
}

/// The unary methods the Go service's interceptor sees (the health service's streaming
/// `Watch` is not one).
fn method(path: &str) -> Option<Method> {
    if path.ends_with("/ShouldRateLimit") {
        Some(Method::ShouldRateLimit)
    } else if path.ends_with("/Check") {
        Some(Method::Check)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unary_methods_are_named_by_their_last_segment() {
        let rls = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
        assert_eq!(method(rls), Some(Method::ShouldRateLimit));
        assert_eq!(method("/grpc.health.v1.Health/Check"), Some(Method::Check));
        assert_eq!(method("/grpc.health.v1.Health/Watch"), None);
        assert_eq!(method("/nope"), None);
    }
}

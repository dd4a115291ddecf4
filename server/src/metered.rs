//! The Go service's per-method gRPC statistics (its `ServerReporter` interceptor): each call
//! counted and timed by method (`ShouldRateLimit`, and the health service's `Check`), as
//! Prometheus `ratelimit_service_total_requests{grpc_method}` and
//! `ratelimit_service_response_time_seconds{grpc_method}` (its default mapping's names), and
//! as statsd `ratelimit_server.METHOD.total_requests` and `ratelimit_server.METHOD.response_time`
//! (a timer, in milliseconds).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use tonic::body::Body;
use tonic::server::NamedService;
use tower_service::Service;

/// Calls, by `grpc_method`.
pub(crate) const TOTAL_REQUESTS: &str = "ratelimit_service_total_requests";
/// Seconds from a call's request to its response, by `grpc_method`.
pub(crate) const RESPONSE_TIME: &str = "ratelimit_service_response_time_seconds";
/// The response time's buckets: Prometheus's defaults (the Go service's statsd exporter's),
/// and below them the milliseconds a decision takes.
pub(crate) const RESPONSE_TIME_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A gRPC service whose unary calls are counted and timed.
#[derive(Debug, Clone)]
pub(crate) struct Metered<S> {
    inner: S,
}

impl<S> Metered<S> {
    pub(crate) fn new(inner: S) -> Self {
        Metered { inner }
    }
}

impl<S: NamedService> NamedService for Metered<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for Metered<S>
where
    S: Service<http::Request<Body>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let method = method(request.uri().path());
        let start = Instant::now();
        if let Some(method) = method {
            metrics::counter!(TOTAL_REQUESTS, "grpc_method" => method).increment(1);
        }
        let call = self.inner.call(request);
        Box::pin(async move {
            let response = call.await;
            if let Some(method) = method {
                metrics::histogram!(RESPONSE_TIME, "grpc_method" => method)
                    .record(start.elapsed().as_secs_f64());
            }
            response
        })
    }
}

/// The unary methods the Go service's interceptor sees (the health service's streaming
/// `Watch` is not one).
fn method(path: &str) -> Option<&'static str> {
    match path.rsplit('/').next() {
        Some("ShouldRateLimit") => Some("ShouldRateLimit"),
        Some("Check") => Some("Check"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unary_methods_are_named_by_their_last_segment() {
        let rls = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
        assert_eq!(method(rls), Some("ShouldRateLimit"));
        assert_eq!(method("/grpc.health.v1.Health/Check"), Some("Check"));
        assert_eq!(method("/grpc.health.v1.Health/Watch"), None);
        assert_eq!(method("/nope"), None);
    }
}

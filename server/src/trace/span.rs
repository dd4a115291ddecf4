//! A span per `ShouldRateLimit`: the gRPC server span the Go service's `otelgrpc` interceptor
//! makes (named after the method, kind server, `rpc.*` attributes), continuing the caller's
//! trace, with the request's domain, its number of descriptors and the outcome. Never a
//! descriptor's key or value, nor an error's message (a store's error can name a key).
//!
//! With tracing off the service is called as before: no span, no header read.

use http::HeaderMap;
use opentelemetry::KeyValue;
use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _};
use opentelemetry_sdk::trace::{SdkTracer, Span};
use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService as Rls, RateLimitServiceServer,
};
use redlimit::rls::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response};

use super::propagation;
use crate::config::InForce;

/// The span's name: the gRPC method's full name, as `otelgrpc` names its server spans.
pub(crate) const SPAN_NAME: &str = "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
/// The request's domain (the Go service's attribute name).
pub(crate) const DOMAIN: &str = "domain";
/// How many descriptors the request carries.
pub(crate) const DESCRIPTORS: &str = "descriptors";
/// `OK`, `OVER_LIMIT` or `UNKNOWN` (the response's overall code), or `ERROR` (a gRPC error).
pub(crate) const OUTCOME: &str = "outcome";

/// Starts the calls' spans.
#[derive(Debug, Clone)]
pub(crate) struct CallTracer {
    tracer: SdkTracer,
}

impl CallTracer {
    pub(crate) fn new(tracer: SdkTracer) -> Self {
        CallTracer { tracer }
    }

    /// A call's span, in the trace its headers carry (sampled as the provider's sampler says).
    pub(crate) fn start(&self, headers: &HeaderMap, request: &RateLimitRequest) -> CallSpan {
        let parent = propagation::parent(headers);
        let descriptors = i64::try_from(request.descriptors.len()).unwrap_or(i64::MAX);
        let span = self
            .tracer
            .span_builder(SPAN_NAME)
            .with_kind(SpanKind::Server)
            .with_attributes([
                KeyValue::new("rpc.system", "grpc"),
                KeyValue::new("rpc.service", "envoy.service.ratelimit.v3.RateLimitService"),
                KeyValue::new("rpc.method", "ShouldRateLimit"),
                KeyValue::new(DOMAIN, request.domain.clone()),
                KeyValue::new(DESCRIPTORS, descriptors),
            ])
            .start_with_context(&self.tracer, &parent);
        CallSpan(span)
    }
}

/// A call's span, ended with its outcome (or, dropped, when the caller gave up).
#[derive(Debug)]
pub(crate) struct CallSpan(Span);

impl CallSpan {
    /// Records the outcome and ends the span.
    pub(crate) fn finish(mut self, result: &Result<RateLimitResponse, tonic::Status>) {
        let span = &mut self.0;
        if !span.is_recording() {
            return;
        }
        match result {
            Ok(response) => {
                let code = Code::try_from(response.overall_code).unwrap_or(Code::Unknown);
                span.set_attributes([
                    KeyValue::new(OUTCOME, code.as_str_name()),
                    KeyValue::new("rpc.grpc.status_code", 0_i64),
                ]);
            }
            Err(status) => {
                span.set_attributes([
                    KeyValue::new(OUTCOME, "ERROR"),
                    KeyValue::new("rpc.grpc.status_code", status.code() as i64),
                ]);
                span.set_status(Status::error(format!("{:?}", status.code())));
            }
        }
        span.end();
    }
}

/// The rate limit service with the config in force, each call in a span when tracing is on.
#[derive(Clone)]
pub(crate) struct Traced {
    service: InForce,
    tracer: Option<CallTracer>,
}

impl Traced {
    pub(crate) fn new(service: InForce, tracer: Option<CallTracer>) -> Self {
        Traced { service, tracer }
    }

    /// The tonic service to mount.
    pub(crate) fn into_server(self) -> RateLimitServiceServer<Traced> {
        RateLimitServiceServer::new(self)
    }
}

#[tonic::async_trait]
impl Rls for Traced {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, tonic::Status> {
        match &self.tracer {
            None => self
                .service
                .should_rate_limit(request.into_inner())
                .await
                .map(Response::new),
            // Boxed: the span's state is no part of the call's future when tracing is off.
            Some(tracer) => Box::pin(traced(&self.service, tracer, request)).await,
        }
    }
}

/// A call in its span.
async fn traced(
    service: &InForce,
    tracer: &CallTracer,
    request: Request<RateLimitRequest>,
) -> Result<Response<RateLimitResponse>, tonic::Status> {
    let span = tracer.start(request.metadata().as_ref(), request.get_ref());
    let result = service.should_rate_limit(request.into_inner()).await;
    span.finish(&result);
    result.map(Response::new)
}

//! The rate limit service's gRPC server: what tonic's generated `RateLimitServiceServer` does
//! for `ShouldRateLimit` (tonic's `Grpc::unary` with the prost codec, no compression, tonic's
//! default message sizes; any other method `UNIMPLEMENTED`), with one box a call fewer.
//!
//! Why: the generated server boxes the call's future, then its `UnaryService` boxes the
//! handler's, then `#[async_trait]` boxes it once more, each box a state moved (`memcpy`) and
//! an allocation; the handler's future is boxed here once, and `Traced` is called without its
//! trait (some 1 500 of the ~76 000 instructions a decision takes, callgrind,
//! `benches/rls/instructions.py`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_service_server::SERVICE_NAME;
use redlimit::rls::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::body::Body;
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;
use tower_service::Service;

use crate::trace::Traced;

/// The one method's path.
const SHOULD_RATE_LIMIT: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// A call's future: boxed once.
type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

/// `envoy.service.ratelimit.v3.RateLimitService` over [`Traced`].
#[derive(Clone)]
pub(crate) struct RlsServer {
    service: Arc<Traced>,
}

impl RlsServer {
    pub(crate) fn new(service: Traced) -> Self {
        RlsServer {
            service: Arc::new(service),
        }
    }
}

impl NamedService for RlsServer {
    const NAME: &'static str = SERVICE_NAME;
}

impl Service<http::Request<Body>> for RlsServer {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<http::Response<Body>, Infallible>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        if request.uri().path() != SHOULD_RATE_LIMIT {
            return Box::pin(std::future::ready(Ok(unimplemented())));
        }
        let method = ShouldRateLimit(Arc::clone(&self.service));
        Box::pin(async move {
            let mut grpc = Grpc::new(ProstCodec::<RateLimitResponse, RateLimitRequest>::default());
            Ok(grpc.unary(method, request).await)
        })
    }
}

/// The generated server's answer to a method it has not.
fn unimplemented() -> http::Response<Body> {
    let mut response = http::Response::new(Body::default());
    let headers = response.headers_mut();
    headers.insert(
        Status::GRPC_STATUS,
        (tonic::Code::Unimplemented as i32).into(),
    );
    headers.insert(
        http::header::CONTENT_TYPE,
        tonic::metadata::GRPC_CONTENT_TYPE,
    );
    response
}

/// `ShouldRateLimit`, as `Grpc::unary` calls it.
struct ShouldRateLimit(Arc<Traced>);

impl UnaryService<RateLimitRequest> for ShouldRateLimit {
    type Response = RateLimitResponse;
    /// The handler's own future, boxed (its type has no name), in no other.
    type Future = BoxFuture<Response<RateLimitResponse>, Status>;

    fn call(&mut self, request: Request<RateLimitRequest>) -> Self::Future {
        Box::pin(Arc::clone(&self.0).call(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_is_the_generated_servers() {
        assert_eq!(
            SHOULD_RATE_LIMIT,
            format!("/{SERVICE_NAME}/ShouldRateLimit")
        );
    }
}

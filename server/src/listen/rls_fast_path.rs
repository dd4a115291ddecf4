//! The gRPC listener's way to the rate limit service: a call to
//! `envoy.service.ratelimit.v3.RateLimitService` goes straight to it; every other call (the
//! health service, an unknown one) to tonic's routes as before.
//!
//! Why: tonic routes through an axum router, whose match on `/{SERVICE}/{*rest}` decodes and
//! stores the path's tail and the matched path in the request's extensions, and whose future
//! wraps the service's in three more. Some 4 000 of the ~89 000 instructions a decision took
//! (callgrind, `benches/rls/instructions.py`), for a match the generated server makes again
//! on the method's name. The prefix matched here is the one axum's route matches, so every
//! request reaches the service it reached before.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::server::NamedService;
use tower_layer::Layer;
use tower_service::Service;

/// Puts `service` (of gRPC name `S::NAME`) before the routes it wraps.
///
/// ```ignore
/// let router = tonic::transport::Server::builder()
///     .layer(RlsFirst::new(metered_rls.clone()))
///     .add_service(metered_rls)
///     .add_service(health);
/// ```
#[derive(Debug, Clone)]
pub(crate) struct RlsFirst<S> {
    service: S,
}

impl<S> RlsFirst<S> {
    pub(crate) fn new(service: S) -> Self {
        RlsFirst { service }
    }
}

impl<S: Clone, R> Layer<R> for RlsFirst<S> {
    type Service = First<S, R>;

    fn layer(&self, routes: R) -> First<S, R> {
        First {
            service: self.service.clone(),
            routes,
        }
    }
}

/// The service first, else the routes.
#[derive(Debug, Clone)]
pub(crate) struct First<S, R> {
    service: S,
    routes: R,
}

/// Whether `path` is a call to the service named `name` (`/NAME/...`, as tonic's route).
fn is_call_to(path: &str, name: &str) -> bool {
    path.strip_prefix('/')
        .and_then(|rest| rest.strip_prefix(name))
        .is_some_and(|rest| rest.starts_with('/'))
}

impl<S, R, B> Service<http::Request<Body>> for First<S, R>
where
    S: Service<http::Request<Body>, Response = http::Response<B>> + NamedService,
    S::Future: Unpin,
    R: Service<http::Request<Body>, Response = http::Response<B>, Error = S::Error>,
    R::Future: Send + 'static,
{
    type Response = http::Response<B>;
    type Error = S::Error;
    type Future = Either<S::Future, RoutesFuture<B, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        // Both always ready (tonic's generated servers and routes are): one asked after the
        // other, as a call may go to either.
        std::task::ready!(self.service.poll_ready(cx))?;
        self.routes.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        if is_call_to(request.uri().path(), S::NAME) {
            Either::First(self.service.call(request))
        } else {
            Either::Routes(Box::pin(self.routes.call(request)))
        }
    }
}

/// The routes' future, boxed: the health service's calls and unknown ones, a few a second.
pub(crate) type RoutesFuture<B, E> =
    Pin<Box<dyn Future<Output = Result<http::Response<B>, E>> + Send>>;

/// A call's future: the service's or the routes'.
#[derive(Debug)]
pub(crate) enum Either<F, G> {
    First(F),
    Routes(G),
}

impl<F, G> Future for Either<F, G>
where
    F: Future + Unpin,
    G: Future<Output = F::Output> + Unpin,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        match self.get_mut() {
            Either::First(future) => Pin::new(future).poll(cx),
            Either::Routes(future) => Pin::new(future).poll(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::grpc_methods::Metered;
    use redlimit::rls::RateLimitService;
    use redlimit::store::MemoryStore;
    use tonic::service::Routes;

    /// The `grpc-status` a call's response headers carry (a trailers-only answer: tonic's
    /// "unimplemented" for a service or method it has not, or the error of an empty body).
    async fn status_of<S>(service: &mut S, path: &str) -> Option<String>
    where
        S: Service<http::Request<Body>, Response = http::Response<Body>>,
        S::Error: std::fmt::Debug,
    {
        let request = http::Request::builder()
            .method("POST")
            .uri(path)
            .header("content-type", "application/grpc")
            .body(Body::empty())
            .expect("a request");
        std::future::poll_fn(|cx| service.poll_ready(cx))
            .await
            .expect("ready");
        let response = service.call(request).await.expect("an answer");
        response
            .headers()
            .get("grpc-status")
            .map(|v| v.to_str().unwrap_or_default().to_owned())
    }

    #[tokio::test]
    async fn rate_limit_calls_reach_the_service_and_the_rest_the_routes() {
        let rls = Metered::new(
            RateLimitService::builder(MemoryStore::new())
                .build()
                .into_server(),
        );
        let (_reporter, health) = tonic_health::server::health_reporter();
        let mut first = RlsFirst::new(rls).layer(Routes::new(health));
        let unimplemented = Some("12".to_owned());
        // Not the routes' fallback: the service's answer to an empty body.
        let rls = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
        assert_ne!(status_of(&mut first, rls).await, unimplemented);
        // The health service, through the routes.
        let health = "/grpc.health.v1.Health/Check";
        assert_ne!(status_of(&mut first, health).await, unimplemented);
        assert_eq!(
            status_of(&mut first, "/nope.Service/Method").await,
            unimplemented
        );

        // With routes that know nothing, only the service answers.
        let rls_only = Metered::new(
            RateLimitService::builder(MemoryStore::new())
                .build()
                .into_server(),
        );
        let mut first = RlsFirst::new(rls_only).layer(Routes::default());
        assert_ne!(status_of(&mut first, rls).await, unimplemented);
        assert_eq!(status_of(&mut first, health).await, unimplemented);
    }

    #[test]
    fn calls_are_matched_by_the_service_name_as_a_whole_path_segment() {
        let name = "envoy.service.ratelimit.v3.RateLimitService";
        let call = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
        assert!(is_call_to(call, name));
        assert!(is_call_to(
            "/envoy.service.ratelimit.v3.RateLimitService/Other",
            name
        ));
        assert!(!is_call_to("/grpc.health.v1.Health/Check", name));
        assert!(!is_call_to(
            "/envoy.service.ratelimit.v3.RateLimitServiceX/Should",
            name
        ));
        assert!(!is_call_to(
            "envoy.service.ratelimit.v3.RateLimitService/Should",
            name
        ));
        assert!(!is_call_to(
            "/envoy.service.ratelimit.v3.RateLimitService",
            name
        ));
    }
}

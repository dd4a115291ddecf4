//! The service: checks each request before calling the inner service.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::body::ResponseBody;
use super::config::{Config, Start};
use super::future::ResponseFuture;
use super::layer::RateLimitLayer;

/// A service that rate-limits requests to `S`. Made by [`RateLimitLayer`].
///
/// ```
/// use std::time::Duration;
/// use redlimit::{Limit, MemoryStore, Policy, RateLimit, RateLimitLayer};
///
/// let layer = RateLimitLayer::new(MemoryStore::new(), Policy::new("p").limit(Limit::gcra(5, Duration::from_secs(1))));
/// let svc = RateLimit::new(tower::service_fn(|_: http::Request<String>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
/// }), &layer);
/// ```
#[derive(Clone)]
pub struct RateLimit<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> RateLimit<S> {
    /// Wraps `inner` with `layer`'s configuration (the same as `layer.layer(inner)`).
    pub fn new(inner: S, layer: &RateLimitLayer) -> Self {
        tower_layer::Layer::layer(layer, inner)
    }

    pub(crate) fn from_config(inner: S, config: Arc<Config>) -> Self {
        RateLimit { inner, config }
    }

    /// The same as [`RateLimitLayer`] itself: `RateLimit::layer(store, policy)` reads better
    /// in some builders.
    pub fn layer(store: impl crate::Store, policy: crate::Policy) -> RateLimitLayer {
        RateLimitLayer::new(store, policy)
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for RateLimit<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .field("routes", &self.config.routes.len())
            .finish_non_exhaustive()
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The ready service goes into the future; a fresh clone stays for the next call.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let (parts, body) = request.into_parts();
        let start = self.config.start(&parts);
        let request = Request::from_parts(parts, body);
        match start {
            Start::Check(check, pending) => {
                ResponseFuture::check(Arc::clone(&self.config), check, pending, request, inner)
            }
            Start::Decided(verdict) => ResponseFuture::decided(verdict, inner, request),
            Start::Unlimited => ResponseFuture::unlimited(inner, request),
        }
    }
}

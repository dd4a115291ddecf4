//! The service: checks each request before calling the inner service.

use std::sync::Arc;
use std::task::{Context, Poll};

use arc_swap::ArcSwap;
use http::{Request, Response};
use tower_layer::Layer;
use tower_service::Service;

use super::body::ResponseBody;
use super::decide::{Decider, Start};
use super::future::ResponseFuture;
use super::rate_limit_layer::RateLimitLayer;

/// A service that rate-limits requests to `S`. Made by [`RateLimitLayer`]; every service made
/// from one layer (and every clone of one) shares its limits.
///
/// Denied requests are answered by the service itself (429, a gRPC status, or 503 when failing
/// closed): its error type is `S`'s.
///
/// ```
/// use std::convert::Infallible;
/// use std::time::Duration;
/// use redlimit::store::MemoryStore;
/// use redlimit::{Limit, Policy};
/// use redlimit::layer::RateLimit;
///
/// let policy = Policy::new("p", [Limit::gcra(5, Duration::from_secs(1))?])?;
/// let layer = RateLimit::layer(MemoryStore::new(), policy);
/// let svc = RateLimit::new(tower::service_fn(|_: http::Request<String>| async {
///     Ok::<_, Infallible>(http::Response::new(String::new()))
/// }), &layer);
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct RateLimit<S> {
    inner: S,
    /// The layer's decider, read once per request: a reload swaps it for every service.
    decider: Arc<ArcSwap<Decider>>,
}

impl<S> RateLimit<S> {
    /// Wraps `inner` with `layer`'s configuration (the same as `layer.layer(inner)`).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// use redlimit::layer::RateLimit;
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy);
    /// let svc = RateLimit::new(tower::service_fn(|_: http::Request<String>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }), &layer);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn new(inner: S, layer: &RateLimitLayer) -> Self {
        tower_layer::Layer::layer(layer, inner)
    }

    pub(crate) fn from_cell(inner: S, decider: Arc<ArcSwap<Decider>>) -> Self {
        RateLimit { inner, decider }
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

// In an impl of its own, for one `S`, so that `RateLimit::layer(..)` needs no type annotation.
impl RateLimit<()> {
    /// The same as [`RateLimitLayer::new`]: `RateLimit::layer(store, policy)` reads like
    /// tower-http's middleware.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy};
    /// use redlimit::layer::RateLimit;
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let svc = tower::ServiceBuilder::new()
    ///     .layer(RateLimit::layer(MemoryStore::new(), policy))
    ///     .service(tower::service_fn(|_: http::Request<String>| async {
    ///         Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    ///     }));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn layer(store: impl crate::store::Store, policy: crate::Policy) -> RateLimitLayer {
        RateLimitLayer::new(store, policy)
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for RateLimit<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let decider = self.decider.load();
        let config = &decider.config;
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .field("policy", &config.default.as_ref().map(|rule| &rule.policy))
            .field("routes", &config.routes.len())
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
        let (parts, body) = request.into_parts();
        let decider = self.decider.load();
        let start = decider.start(&parts);
        let request = Request::from_parts(parts, body);
        match start {
            // Decided now (an in-memory store, a cached denial, no limit): the ready service
            // is called now, with no clone of it (for axum's `Route`, an allocation).
            Start::Decided(verdict) => ResponseFuture::decided(verdict, &mut self.inner, request),
            Start::Unlimited => ResponseFuture::unlimited(&mut self.inner, request),
            // The store answers later: the ready service goes into the future, and a fresh
            // clone stays for the next call.
            waiting => {
                let clone = self.inner.clone();
                let inner = std::mem::replace(&mut self.inner, clone);
                ResponseFuture::start(&decider, waiting, request, inner)
            }
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::from_cell(inner, self.decider_cell())
    }
}

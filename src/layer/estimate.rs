//! [`EstimateFromBodyLayer`]: a request's estimated cost from its body (an LLM call's
//! `max_tokens` in its JSON), read before the rate limit decides, the body handed on intact.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body::Body;
use http_body_util::combinators::Collect;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::ResponseBody;

/// A request's estimated cost, read from its body by [`EstimateFromBody`] and left in the
/// request's extensions for the rate limit's [`cost`](super::RateLimitBuilder::cost).
///
/// ```
/// use redlimit::layer::Estimate;
/// let mut request = http::Request::new(());
/// request.extensions_mut().insert(Estimate(512));
/// let (parts, _) = request.into_parts();
/// assert_eq!(Estimate::of(&parts), Some(512));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate(pub u64);

impl Estimate {
    /// The estimate in `request`'s extensions, if [`EstimateFromBody`] left one.
    ///
    /// ```
    /// use redlimit::layer::Estimate;
    /// let (parts, _) = http::Request::new(()).into_parts();
    /// assert_eq!(Estimate::of(&parts).unwrap_or(1), 1);
    /// ```
    pub fn of(request: &Parts) -> Option<u64> {
        request.extensions.get::<Estimate>().map(|e| e.0)
    }
}

/// Reads each request's body into memory (up to a size), lets a closure estimate the
/// request's cost from it, leaves the estimate in the request's extensions ([`Estimate`])
/// and hands the request on with the same bytes (as a [`Full`] body). Put it outside the
/// [`RateLimitLayer`](super::RateLimitLayer), whose [`cost`](super::RateLimitBuilder::cost)
/// reads the estimate: the limit then decides on what the body asks for.
///
/// A body longer than the size is answered `413 Payload Too Large` (from its
/// `Content-Length` at once, else when reading passes the size); a body that fails to
/// arrive, `400 Bad Request`. The inner service is not called.
///
/// ```
/// use std::time::Duration;
/// use axum::{routing::post, Router};
/// use redlimit::key::Header;
/// use redlimit::layer::{Estimate, EstimateFromBodyLayer};
/// use redlimit::store::MemoryStore;
/// use redlimit::{Limit, Policy, RateLimitLayer};
///
/// let tokens = Policy::new("tokens", [Limit::gcra(10_000, Duration::from_secs(60))?])?;
/// let limit = RateLimitLayer::builder(MemoryStore::new(), tokens)
///     .key(Header::new("x-api-key")?)
///     .cost(|request: &http::request::Parts| Estimate::of(request).unwrap_or(1_000))
///     .build()?;
/// let estimate = EstimateFromBodyLayer::new(64 * 1024, |_: &http::request::Parts, body: &[u8]| {
///     let json: serde_json::Value = serde_json::from_slice(body).ok()?;
///     json["max_tokens"].as_u64()
/// });
/// let app: Router = Router::new()
///     .route("/v1/chat/completions", post(|body: String| async move { body }))
///     .layer(limit)
///     .layer(estimate); // outermost: runs first
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
pub struct EstimateFromBodyLayer<F> {
    max_bytes: usize,
    estimate: Arc<F>,
}

impl<F> EstimateFromBodyLayer<F>
where
    F: Fn(&Parts, &[u8]) -> Option<u64> + Send + Sync + 'static,
{
    /// Reads bodies of up to `max_bytes`, estimating with `estimate` (`None`: no estimate,
    /// the rate limit's `cost` decides alone).
    ///
    /// ```
    /// use redlimit::layer::EstimateFromBodyLayer;
    /// let layer = EstimateFromBodyLayer::new(1024, |_: &http::request::Parts, body: &[u8]| {
    ///     Some(body.len() as u64)
    /// });
    /// ```
    pub fn new(max_bytes: usize, estimate: F) -> Self {
        EstimateFromBodyLayer {
            max_bytes,
            estimate: Arc::new(estimate),
        }
    }
}

impl<F> Clone for EstimateFromBodyLayer<F> {
    fn clone(&self) -> Self {
        EstimateFromBodyLayer {
            max_bytes: self.max_bytes,
            estimate: Arc::clone(&self.estimate),
        }
    }
}

impl<F> fmt::Debug for EstimateFromBodyLayer<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EstimateFromBodyLayer")
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl<S, F> Layer<S> for EstimateFromBodyLayer<F> {
    type Service = EstimateFromBody<S, F>;

    fn layer(&self, inner: S) -> Self::Service {
        EstimateFromBody {
            inner,
            max_bytes: self.max_bytes,
            estimate: Arc::clone(&self.estimate),
        }
    }
}

/// The service of [`EstimateFromBodyLayer`]: reads the body, estimates, calls `S` with the
/// same bytes.
///
/// ```
/// use redlimit::layer::{EstimateFromBody, EstimateFromBodyLayer};
/// let layer = EstimateFromBodyLayer::new(1024, |_: &http::request::Parts, body: &[u8]| Some(body.len() as u64));
/// let svc = tower_layer::Layer::layer(&layer, tower::service_fn(|_: http::Request<http_body_util::Full<bytes::Bytes>>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
/// }));
/// assert!(format!("{svc:?}").contains("EstimateFromBody"));
/// ```
pub struct EstimateFromBody<S, F> {
    inner: S,
    max_bytes: usize,
    estimate: Arc<F>,
}

impl<S, F> EstimateFromBody<S, F> {
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

impl<S: Clone, F> Clone for EstimateFromBody<S, F> {
    fn clone(&self) -> Self {
        EstimateFromBody {
            inner: self.inner.clone(),
            max_bytes: self.max_bytes,
            estimate: Arc::clone(&self.estimate),
        }
    }
}

impl<S: fmt::Debug, F> fmt::Debug for EstimateFromBody<S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EstimateFromBody")
            .field("inner", &self.inner)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl<S, F, ReqBody, ResBody> Service<Request<ReqBody>> for EstimateFromBody<S, F>
where
    S: Service<Request<Full<Bytes>>, Response = Response<ResBody>> + Clone,
    F: Fn(&Parts, &[u8]) -> Option<u64> + Send + Sync + 'static,
    ReqBody: Body,
    ReqBody::Error: Into<crate::BoxError>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = EstimateFuture<S, F, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (parts, body) = request.into_parts();
        let declared = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|len| len > self.max_bytes as u64) {
            return EstimateFuture::answer(StatusCode::PAYLOAD_TOO_LARGE);
        }
        // The ready service goes into the future; a clone stays for the next call.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        EstimateFuture {
            state: State::Read {
                collect: Limited::new(body, self.max_bytes).collect(),
                parts: Some(parts),
                inner: Some(inner),
                estimate: Arc::clone(&self.estimate),
            },
        }
    }
}

pin_project! {
    /// The future of [`EstimateFromBody`]: the body read, then the inner service's response.
    pub struct EstimateFuture<S, F, ReqBody>
    where
        S: Service<Request<Full<Bytes>>>,
        ReqBody: Body,
        ReqBody::Error: Into<crate::BoxError>,
    {
        #[pin]
        state: State<S, F, ReqBody>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, F, ReqBody>
    where
        S: Service<Request<Full<Bytes>>>,
        ReqBody: Body,
        ReqBody::Error: Into<crate::BoxError>,
    {
        Read {
            #[pin]
            collect: Collect<Limited<ReqBody>>,
            parts: Option<Parts>,
            inner: Option<S>,
            estimate: Arc<F>,
        },
        Call {
            #[pin]
            future: S::Future,
        },
        Answer {
            status: StatusCode,
        },
    }
}

impl<S, F, ReqBody> EstimateFuture<S, F, ReqBody>
where
    S: Service<Request<Full<Bytes>>>,
    ReqBody: Body,
    ReqBody::Error: Into<crate::BoxError>,
{
    fn answer(status: StatusCode) -> Self {
        EstimateFuture {
            state: State::Answer { status },
        }
    }
}

impl<S, F, ReqBody, ResBody> Future for EstimateFuture<S, F, ReqBody>
where
    S: Service<Request<Full<Bytes>>, Response = Response<ResBody>>,
    F: Fn(&Parts, &[u8]) -> Option<u64>,
    ReqBody: Body,
    ReqBody::Error: Into<crate::BoxError>,
{
    type Output = Result<Response<ResponseBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Read {
                    collect,
                    parts,
                    inner,
                    estimate,
                } => {
                    let read = ready!(collect.poll(cx));
                    let (Some(mut parts), Some(mut inner)) = (parts.take(), inner.take()) else {
                        panic!("EstimateFuture polled after completion");
                    };
                    let body = match read {
                        Ok(collected) => collected.to_bytes(),
                        Err(error) if error.is::<LengthLimitError>() => {
                            state.set(State::Answer {
                                status: StatusCode::PAYLOAD_TOO_LARGE,
                            });
                            continue;
                        }
                        Err(_) => {
                            state.set(State::Answer {
                                status: StatusCode::BAD_REQUEST,
                            });
                            continue;
                        }
                    };
                    if let Some(cost) = estimate(&parts, &body) {
                        parts.extensions.insert(Estimate(cost));
                    }
                    let future = inner.call(Request::from_parts(parts, Full::new(body)));
                    state.set(State::Call { future });
                }
                StateProj::Call { future } => {
                    let response = ready!(future.poll(cx))?;
                    return Poll::Ready(Ok(
                        response.map(|body| ResponseBody::inner(body, None, None))
                    ));
                }
                StateProj::Answer { status } => {
                    let text = match *status {
                        StatusCode::PAYLOAD_TOO_LARGE => "request body too large",
                        _ => "request body could not be read",
                    };
                    let mut response =
                        Response::new(ResponseBody::full(Bytes::from_static(text.as_bytes())));
                    *response.status_mut() = *status;
                    response.headers_mut().insert(
                        http::header::CONTENT_TYPE,
                        http::HeaderValue::from_static("text/plain; charset=utf-8"),
                    );
                    return Poll::Ready(Ok(response));
                }
            }
        }
    }
}

impl<S, F, ReqBody> fmt::Debug for EstimateFuture<S, F, ReqBody>
where
    S: Service<Request<Full<Bytes>>>,
    ReqBody: Body,
    ReqBody::Error: Into<crate::BoxError>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EstimateFuture").finish_non_exhaustive()
    }
}

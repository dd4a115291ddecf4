//! The response future: wait for the store (up to the deadline), then call the inner service
//! or answer at once.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower_service::Service;

use super::body::ResponseBody;
use super::config::{Config, Pending, Verdict};
use super::headers::RateHeaders;
use crate::error::StoreError;
use crate::store::StoreFuture;

pin_project! {
    /// The future of [`RateLimit`](crate::RateLimit).
    pub struct ResponseFuture<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        state: State<S, ReqBody>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        Check {
            config: Arc<Config>,
            check: StoreFuture,
            pending: Pending,
            // Armed only if the store does not answer on the first poll, so an in-memory
            // store never touches the timer.
            deadline: Option<Pin<Box<Sleep>>>,
            request: Option<Request<ReqBody>>,
            inner: Option<S>,
        },
        Call {
            #[pin]
            future: S::Future,
            headers: RateHeaders,
        },
        Respond {
            response: Option<Response<Bytes>>,
        },
    }
}

impl<S, ReqBody> ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    pub(crate) fn check(
        config: Arc<Config>,
        check: StoreFuture,
        pending: Pending,
        request: Request<ReqBody>,
        inner: S,
    ) -> Self {
        ResponseFuture {
            state: State::Check {
                config,
                check,
                pending,
                deadline: None,
                request: Some(request),
                inner: Some(inner),
            },
        }
    }

    pub(crate) fn decided(verdict: Verdict, mut inner: S, mut request: Request<ReqBody>) -> Self {
        let state = match verdict {
            Verdict::Proceed(decision, headers) => {
                request.extensions_mut().insert(decision);
                State::Call {
                    future: inner.call(request),
                    headers,
                }
            }
            Verdict::Respond(response) => State::Respond {
                response: Some(response),
            },
        };
        ResponseFuture { state }
    }

    pub(crate) fn unlimited(mut inner: S, request: Request<ReqBody>) -> Self {
        ResponseFuture {
            state: State::Call {
                future: inner.call(request),
                headers: RateHeaders::default(),
            },
        }
    }
}

impl<S, ReqBody, ResBody> Future for ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Output = Result<Response<ResponseBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Check {
                    config,
                    check,
                    pending,
                    deadline,
                    request,
                    inner,
                } => {
                    let outcome = match check.as_mut().poll(cx) {
                        Poll::Ready(outcome) => outcome,
                        Poll::Pending => {
                            let limit = config.deadline;
                            let sleep =
                                deadline.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
                            ready!(sleep.as_mut().poll(cx));
                            Err(StoreError::Timeout(limit))
                        }
                    };
                    let (Some(request), Some(inner)) = (request.take(), inner.take()) else {
                        panic!("ResponseFuture polled after completion");
                    };
                    let verdict = config.verdict(outcome, pending);
                    state.set(ResponseFuture::decided(verdict, inner, request).state);
                }
                StateProj::Call { future, headers } => {
                    let mut response = ready!(future.poll(cx))?;
                    headers.write_missing(response.headers_mut());
                    return Poll::Ready(Ok(response.map(ResponseBody::inner)));
                }
                StateProj::Respond { response } => {
                    let response = response
                        .take()
                        .expect("ResponseFuture polled after completion");
                    return Poll::Ready(Ok(response.map(ResponseBody::full)));
                }
            }
        }
    }
}

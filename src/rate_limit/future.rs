//! The response future: wait for the store (up to the deadline), then call the inner service
//! or answer at once.

use std::fmt;
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
use super::decide::{Decider, Pending, Verdict};
use super::headers::RateHeaders;
use crate::error::StoreError;
use crate::store::CheckFuture;

pin_project! {
    /// The future of [`RateLimit`](crate::RateLimit): the store's answer (bounded by the
    /// deadline), then the inner service's response or the layer's own.
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
            decider: Arc<Decider>,
            check: CheckFuture,
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
        decider: Arc<Decider>,
        check: CheckFuture,
        pending: Pending,
        request: Request<ReqBody>,
        inner: S,
    ) -> Self {
        ResponseFuture {
            state: State::Check {
                decider,
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
                    decider,
                    check,
                    pending,
                    deadline,
                    request,
                    inner,
                } => {
                    let outcome = match Pin::new(&mut *check).poll(cx) {
                        Poll::Ready(outcome) => outcome,
                        Poll::Pending => {
                            let limit = decider.config.deadline;
                            let sleep =
                                deadline.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
                            ready!(sleep.as_mut().poll(cx));
                            Err(StoreError::Timeout(limit))
                        }
                    };
                    let (Some(request), Some(inner)) = (request.take(), inner.take()) else {
                        panic!("ResponseFuture polled after completion");
                    };
                    let verdict = decider.verdict(outcome, pending);
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

impl<S, ReqBody> fmt::Debug for ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Check { .. } => "waiting for the store",
            State::Call { .. } => "calling the inner service",
            State::Respond { .. } => "answering",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}

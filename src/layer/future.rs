//! The response future: wait for the store (up to the deadline), then call the inner service
//! or answer at once.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;
use tokio::sync::{AcquireError, OwnedSemaphorePermit};
use tower_service::Service;

use super::body::ResponseBody;
use super::decide::{Decider, Pending, Queued, Start, Verdict};
use super::reconcile::After;
use crate::engine::{Deadline, HeldLease};
use crate::error::StoreError;
use crate::response::headers::RateHeaders;
use crate::store::{Check, CheckFuture};

pin_project! {
    /// The future of [`RateLimit`](crate::layer::RateLimit): the store's answer (bounded by the
    /// deadline), then the inner service's response or the layer's own.
    pub struct ResponseFuture<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        state: State<S, ReqBody>,
    }
}

/// The wait for a turn at a deny-cache gate.
type Turn = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send>>;

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
            deadline: Option<Deadline>,
            request: Option<Request<ReqBody>>,
            inner: Option<S>,
        },
        Wait {
            decider: Arc<Decider>,
            turn: Turn,
            // Bounds the wait: past the store deadline, the request asks the store itself.
            // Armed on the first poll that has to wait (inside the runtime, as for `Check`).
            deadline: Option<Deadline>,
            queued: Option<Queued>,
            request: Option<Request<ReqBody>>,
            inner: Option<S>,
        },
        Call {
            #[pin]
            future: S::Future,
            headers: RateHeaders,
            after: Option<Box<After>>,
            // Dropped with the future if the response never comes (the client went away, the
            // handler panicked); else handed to the response body.
            lease: Option<Box<HeldLease>>,
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
    /// The future of a request that starts as `start` says.
    pub(crate) fn start(
        decider: &Arc<Decider>,
        start: Start,
        request: Request<ReqBody>,
        mut inner: S,
    ) -> Self {
        let state = match start {
            Start::Check(check, pending) => State::Check {
                decider: Arc::clone(decider),
                check,
                pending,
                deadline: None,
                request: Some(request),
                inner: Some(inner),
            },
            Start::Wait(gate, queued) => State::Wait {
                decider: Arc::clone(decider),
                turn: Box::pin(gate.acquire_owned()),
                deadline: None,
                queued: Some(queued),
                request: Some(request),
                inner: Some(inner),
            },
            Start::Decided(verdict) => {
                return ResponseFuture::decided(verdict, &mut inner, request);
            }
            Start::Unlimited => return ResponseFuture::unlimited(&mut inner, request),
        };
        ResponseFuture { state }
    }

    /// The future of a request decided now: `inner` (ready) is called at once, if at all.
    // Inlined, so that the verdict and the request are not copied again into its arguments.
    #[inline]
    pub(crate) fn decided(verdict: Verdict, inner: &mut S, mut request: Request<ReqBody>) -> Self {
        let state = match verdict {
            Verdict::Proceed(decision, headers, after, lease) => {
                request.extensions_mut().insert(decision);
                State::Call {
                    future: inner.call(request),
                    headers,
                    after,
                    lease,
                }
            }
            Verdict::Respond(response) => State::Respond {
                response: Some(response),
            },
        };
        ResponseFuture { state }
    }

    /// The future of a request that is not limited: `inner` (ready) is called at once.
    pub(crate) fn unlimited(inner: &mut S, request: Request<ReqBody>) -> Self {
        ResponseFuture {
            state: State::Call {
                future: inner.call(request),
                headers: RateHeaders::default(),
                after: None,
                lease: None,
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
                    let Some(headers) = request.as_ref().map(Request::headers) else {
                        panic!("ResponseFuture polled after completion");
                    };
                    let verdict = match Pin::new(&mut *check).poll(cx) {
                        Poll::Ready(outcome) => decider.verdict(outcome, pending, headers),
                        Poll::Pending => {
                            let limit = decider.deadline;
                            let deadline = deadline.get_or_insert_with(|| {
                                Deadline::at(tokio::time::Instant::now() + limit)
                            });
                            ready!(Pin::new(deadline).poll(cx));
                            let placeholder = Check::ready(Err(StoreError::Timeout(limit)));
                            let check = std::mem::replace(check, placeholder.into_future());
                            decider.missed_deadline(check, pending, headers)
                        }
                    };
                    let (Some(request), Some(mut inner)) = (request.take(), inner.take()) else {
                        panic!("ResponseFuture polled after completion");
                    };
                    state.set(ResponseFuture::decided(verdict, &mut inner, request).state);
                }
                StateProj::Wait {
                    decider,
                    turn,
                    deadline,
                    queued,
                    request,
                    inner,
                } => {
                    let turn = match turn.as_mut().poll(cx) {
                        Poll::Ready(turn) => turn.ok(),
                        Poll::Pending => {
                            let limit = decider.deadline;
                            let deadline = deadline.get_or_insert_with(|| {
                                Deadline::at(tokio::time::Instant::now() + limit)
                            });
                            ready!(Pin::new(deadline).poll(cx));
                            None
                        }
                    };
                    let (Some(queued), Some(request), Some(inner)) =
                        (queued.take(), request.take(), inner.take())
                    else {
                        panic!("ResponseFuture polled after completion");
                    };
                    let start = decider.resume(queued, turn, request.headers());
                    let decider = Arc::clone(decider);
                    state.set(ResponseFuture::start(&decider, start, request, inner).state);
                }
                StateProj::Call {
                    future,
                    headers,
                    after,
                    lease,
                } => {
                    let mut response = ready!(future.poll(cx))?;
                    headers.write_missing(response.headers_mut());
                    let (head, body) = response.into_parts();
                    let settle = after.take().and_then(|after| after.response(&head));
                    let body = ResponseBody::inner(body, lease.take(), settle);
                    return Poll::Ready(Ok(Response::from_parts(head, body)));
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
            State::Wait { .. } => "waiting for another request's answer from the store",
            State::Call { .. } => "calling the inner service",
            State::Respond { .. } => "answering",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}

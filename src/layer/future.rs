//! The response future: wait for the store (up to the deadline), then call the inner service
//! or answer at once.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::header::HeaderMap;
use http::{Request, Response};
use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower_service::Service;

use super::body::ResponseBody;
use super::config::{add_missing, Config, Verdict};
use crate::decision::Decision;
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
            // Armed only if the store does not answer on the first poll, so an in-memory
            // store never touches the timer.
            deadline: Option<Pin<Box<Sleep>>>,
            request: Option<Request<ReqBody>>,
            inner: Option<S>,
        },
        Call {
            #[pin]
            future: S::Future,
            headers: HeaderMap,
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
        request: Request<ReqBody>,
        inner: S,
    ) -> Self {
        ResponseFuture {
            state: State::Check {
                config,
                check,
                deadline: None,
                request: Some(request),
                inner: Some(inner),
            },
        }
    }

    pub(crate) fn pass(
        mut inner: S,
        mut request: Request<ReqBody>,
        decision: Option<Decision>,
    ) -> Self {
        if let Some(decision) = decision {
            request.extensions_mut().insert(decision);
        }
        ResponseFuture {
            state: State::Call {
                future: inner.call(request),
                headers: HeaderMap::new(),
            },
        }
    }

    pub(crate) fn respond(response: Response<Bytes>) -> Self {
        ResponseFuture {
            state: State::Respond {
                response: Some(response),
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
                    let (Some(mut request), Some(mut inner)) = (request.take(), inner.take())
                    else {
                        panic!("ResponseFuture polled after completion");
                    };
                    match config.verdict(outcome) {
                        Verdict::Proceed(decision, headers) => {
                            request.extensions_mut().insert(decision);
                            let future = inner.call(request);
                            state.set(State::Call { future, headers });
                        }
                        Verdict::Respond(response) => {
                            state.set(State::Respond { response: None });
                            return Poll::Ready(Ok(response.map(ResponseBody::full)));
                        }
                    }
                }
                StateProj::Call { future, headers } => {
                    let mut response = ready!(future.poll(cx))?;
                    add_missing(response.headers_mut(), std::mem::take(headers));
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

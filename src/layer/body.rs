//! The response body: the inner service's, or the layer's own short text. The inner
//! service's holds what waits for its end: the request's concurrency lease, and the settle
//! of its estimate to the cost the body reports.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::reconcile::BodySettle;
use crate::engine::HeldLease;

pin_project! {
    /// The body of a response through [`RateLimit`](crate::layer::RateLimit): the inner service's
    /// body, or the short text of an answer the layer wrote itself (a rejection).
    ///
    /// The default is an empty body, for layers outside that need to make one.
    ///
    /// ```
    /// use http_body::Body;
    /// use redlimit::layer::ResponseBody;
    ///
    /// let body = ResponseBody::<String>::default();
    /// assert!(body.is_end_stream());
    /// assert_eq!(body.size_hint().exact(), Some(0));
    /// ```
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
        // The request's concurrency lease: released when the body ends or is dropped.
        lease: Option<Box<HeldLease>>,
        // The settle of the request's estimate, reading the body: settled when it ends;
        // dropped before (or on an error), the estimate stands.
        settle: Option<Box<BodySettle>>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner {
            #[pin]
            body: B,
        },
        Full {
            data: Option<Bytes>,
        },
    }
}

impl<B> ResponseBody<B> {
    /// Wraps the inner service's body, holding the request's concurrency lease and the
    /// settle of its estimate, if any.
    pub(crate) fn inner(
        body: B,
        lease: Option<Box<HeldLease>>,
        settle: Option<Box<BodySettle>>,
    ) -> Self {
        ResponseBody {
            kind: Kind::Inner { body },
            lease,
            settle,
        }
    }

    /// A complete body of `data`.
    pub(crate) fn full(data: Bytes) -> Self {
        ResponseBody {
            kind: Kind::Full {
                data: (!data.is_empty()).then_some(data),
            },
            lease: None,
            settle: None,
        }
    }
}

impl<B> Default for ResponseBody<B> {
    fn default() -> Self {
        ResponseBody::full(Bytes::new())
    }
}

impl<B: fmt::Debug> fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Inner { body } => f.debug_tuple("ResponseBody").field(body).finish(),
            Kind::Full { data } => f
                .debug_tuple("ResponseBody")
                .field(data.as_ref().unwrap_or(&Bytes::new()))
                .finish(),
        }
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        match this.kind.project() {
            // Nothing waits for the end of this body: its frames pass as they are.
            KindProj::Inner { body } if this.lease.is_none() && this.settle.is_none() => {
                body.poll_frame(cx)
            }
            KindProj::Inner { mut body } => {
                let frame = ready!(body.as_mut().poll_frame(cx));
                let ended = match &frame {
                    None => true,
                    Some(Ok(frame)) => {
                        if let Some(settle) = this.settle.as_mut() {
                            if let Some(data) = frame.data_ref() {
                                settle.usage().data(data);
                            } else if let Some(trailers) = frame.trailers_ref() {
                                settle.usage().trailers(trailers);
                            }
                        }
                        // A server stops polling once the body says it has ended.
                        body.is_end_stream()
                    }
                    Some(Err(_)) => {
                        // Cut short: the usage is not known, the estimate stands.
                        this.settle.take();
                        false
                    }
                };
                if ended {
                    // The request is no longer in flight; its cost is known.
                    this.lease.take();
                    if let Some(settle) = this.settle.take() {
                        settle.ended();
                    }
                }
                Poll::Ready(frame)
            }
            KindProj::Full { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Full { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Full { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_body_yields_its_bytes_once() {
        let mut body = ResponseBody::<String>::full(Bytes::from_static(b"no"));
        assert_eq!(body.size_hint().exact(), Some(2));
        assert!(!body.is_end_stream());
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let frame = Pin::new(&mut body).poll_frame(&mut cx);
        let Poll::Ready(Some(Ok(frame))) = frame else {
            panic!("a data frame");
        };
        assert_eq!(frame.into_data().unwrap(), "no");
        assert!(body.is_end_stream());
        assert!(matches!(
            Pin::new(&mut body).poll_frame(&mut cx),
            Poll::Ready(None)
        ));
        assert_eq!(
            format!("{:?}", ResponseBody::<String>::default()),
            "ResponseBody(b\"\")"
        );
    }
}

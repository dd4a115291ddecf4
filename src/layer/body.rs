//! The response body: the inner service's, or the layer's own short text.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// The body of a response through [`RateLimit`](crate::RateLimit): the inner service's
    /// body, or the short text of a rejection the layer wrote itself.
    ///
    /// ```
    /// use http_body::Body;
    /// let body = redlimit::ResponseBody::<String>::full("Too Many Requests");
    /// assert_eq!(body.size_hint().exact(), Some(17));
    /// ```
    #[project = BodyProj]
    #[allow(missing_docs)] // pin-project-lite accepts no attributes on fields
    pub enum ResponseBody<B> {
        /// The inner service's body.
        Inner {
            #[pin]
            body: B,
        },
        /// A body written by the layer.
        Full {
            data: Option<Bytes>,
        },
    }
}

impl<B> ResponseBody<B> {
    /// Wraps the inner service's body.
    pub fn inner(body: B) -> Self {
        ResponseBody::Inner { body }
    }

    /// A complete body of `data`.
    pub fn full(data: impl Into<Bytes>) -> Self {
        let data: Bytes = data.into();
        ResponseBody::Full {
            data: (!data.is_empty()).then_some(data),
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
        match self.project() {
            BodyProj::Inner { body } => body.poll_frame(cx),
            BodyProj::Full { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Inner { body } => body.is_end_stream(),
            ResponseBody::Full { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Inner { body } => body.size_hint(),
            ResponseBody::Full { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}

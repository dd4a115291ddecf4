//! Where a response says what its request really cost: its head
//! ([`RateLimitBuilder::settle_with`](super::RateLimitBuilder::settle_with)), or its body,
//! read as it streams by a [`BodyUsage`]
//! ([`RateLimitBuilder::settle_with_body`](super::RateLimitBuilder::settle_with_body)).

use std::sync::Arc;

use bytes::Bytes;
use http::HeaderMap;
use http::response::Parts;

/// Reads a request's real cost from its response's body as it streams through the layer: it
/// sees every data frame and the trailers, and says the cost once the body has ended. Made
/// per response by the closure given to
/// [`settle_with_body`](super::RateLimitBuilder::settle_with_body).
///
/// The layer settles the request's estimate to [`cost`](Self::cost) when the body ends. A
/// body dropped before its end (the client went away) or failing keeps the estimate, and so
/// does `None`.
///
/// [`SseUsage`](super::SseUsage) reads a server-sent event stream; a usage counter of your
/// own is a few lines:
///
/// ```
/// use bytes::Bytes;
/// use redlimit::layer::BodyUsage;
///
/// /// One unit per kilobyte sent.
/// #[derive(Default)]
/// struct Kilobytes(u64);
///
/// impl BodyUsage for Kilobytes {
///     fn data(&mut self, data: &Bytes) {
///         self.0 += data.len() as u64;
///     }
///     fn cost(&mut self) -> Option<u64> {
///         Some(self.0.div_ceil(1024))
///     }
/// }
///
/// let mut usage = Kilobytes::default();
/// usage.data(&Bytes::from(vec![0; 3000]));
/// assert_eq!(usage.cost(), Some(3));
/// ```
pub trait BodyUsage: Send + 'static {
    /// Sees one data frame of the body, in order.
    fn data(&mut self, data: &Bytes);

    /// Sees the body's trailers, if it has them (gRPC's, a usage trailer). The default
    /// ignores them.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http::HeaderMap;
    /// use redlimit::layer::BodyUsage;
    ///
    /// /// The cost an `x-usage` trailer reports.
    /// #[derive(Default)]
    /// struct Trailer(Option<u64>);
    ///
    /// impl BodyUsage for Trailer {
    ///     fn data(&mut self, _: &Bytes) {}
    ///     fn trailers(&mut self, trailers: &HeaderMap) {
    ///         self.0 = trailers.get("x-usage").and_then(|v| v.to_str().ok()?.parse().ok());
    ///     }
    ///     fn cost(&mut self) -> Option<u64> {
    ///         self.0
    ///     }
    /// }
    ///
    /// let mut usage = Trailer::default();
    /// let mut trailers = HeaderMap::new();
    /// trailers.insert("x-usage", "42".parse().unwrap());
    /// usage.trailers(&trailers);
    /// assert_eq!(usage.cost(), Some(42));
    /// ```
    fn trailers(&mut self, trailers: &HeaderMap) {
        let _ = trailers;
    }

    /// The request's real cost, asked once, when the body has ended; `None` keeps the
    /// estimate.
    fn cost(&mut self) -> Option<u64>;
}

/// What a response says of its request's real cost.
pub(crate) enum RealCost {
    /// Nothing: the estimate stands.
    Estimate,
    /// This, known from the head.
    Known(u64),
    /// What its body will say, read by this as it streams.
    Body(Box<dyn BodyUsage>),
}

/// How a layer reads a response's real cost from its head.
pub(crate) type ReadFn = dyn Fn(&Parts) -> RealCost + Send + Sync;

/// `then` tried after `first` said nothing: the readers of a layer, in the order they were set.
pub(crate) fn chain(first: Option<Arc<ReadFn>>, then: Arc<ReadFn>) -> Arc<ReadFn> {
    match first {
        None => then,
        Some(first) => Arc::new(move |parts: &Parts| match first(parts) {
            RealCost::Estimate => then(parts),
            read => read,
        }),
    }
}

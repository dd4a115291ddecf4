//! What a [`Store`](super::Store) answers: a decision now, or one to wait for.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::decision::Decision;
use crate::error::StoreError;

type BoxFuture = Pin<Box<dyn Future<Output = Result<Decision, StoreError>> + Send + 'static>>;

/// The answer of [`Store::check`](super::Store::check): ready at once (a store in memory),
/// or a future (a store across the network). `.await` it either way.
///
/// The layer takes a ready answer without allocating or arming a timer; a pending one is
/// bounded by the layer's deadline; one that misses it is never replayed, and is left to finish
/// in the background (for up to a second) so the layer's circuit breaker can tell a slow store
/// from a gone one.
///
/// ```
/// use redlimit::store::Check;
/// use redlimit::StoreError;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let later = Check::pending(async { Err(StoreError::CircuitOpen) });
/// assert!(later.await.unwrap_err().is_circuit_open());
/// # });
/// ```
#[must_use = "a check does nothing unless awaited or matched"]
pub enum Check {
    /// The decision (or the failure), known now.
    Ready(Result<Decision, StoreError>),
    /// The decision, once the store answers.
    Pending(Pin<Box<dyn Future<Output = Result<Decision, StoreError>> + Send + 'static>>),
}

impl Check {
    /// A check whose answer is known now.
    ///
    /// ```
    /// use redlimit::{store::Check, StoreError};
    /// let check = Check::ready(Err(StoreError::CircuitOpen));
    /// assert!(matches!(check, Check::Ready(Err(_))));
    /// ```
    pub fn ready(outcome: Result<Decision, StoreError>) -> Self {
        Check::Ready(outcome)
    }

    /// A check answered by `future`.
    ///
    /// ```
    /// use redlimit::{store::Check, StoreError};
    /// let check = Check::pending(async { Err(StoreError::CircuitOpen) });
    /// assert!(matches!(check, Check::Pending(_)));
    /// ```
    pub fn pending(
        future: impl Future<Output = Result<Decision, StoreError>> + Send + 'static,
    ) -> Self {
        Check::Pending(Box::pin(future))
    }
}

impl fmt::Debug for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Ready(outcome) => f.debug_tuple("Ready").field(outcome).finish(),
            Check::Pending(_) => f.write_str("Pending(..)"),
        }
    }
}

impl IntoFuture for Check {
    type Output = Result<Decision, StoreError>;
    type IntoFuture = CheckFuture;

    fn into_future(self) -> CheckFuture {
        CheckFuture(match self {
            Check::Ready(outcome) => Inner::Ready(Some(outcome)),
            Check::Pending(future) => Inner::Pending(future),
        })
    }
}

/// The future of an awaited [`Check`].
///
/// ```
/// use std::future::IntoFuture;
/// use redlimit::{store::{Check, CheckFuture}, StoreError};
/// let future: CheckFuture = Check::ready(Err(StoreError::CircuitOpen)).into_future();
/// ```
pub struct CheckFuture(Inner);

enum Inner {
    Ready(Option<Result<Decision, StoreError>>),
    Pending(BoxFuture),
}

impl fmt::Debug for CheckFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckFuture").finish_non_exhaustive()
    }
}

impl Future for CheckFuture {
    type Output = Result<Decision, StoreError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.0 {
            Inner::Ready(outcome) => Poll::Ready(outcome.take().unwrap_or(Err(
                StoreError::UnexpectedReply("check polled after it completed".to_owned()),
            ))),
            Inner::Pending(future) => future.as_mut().poll(cx),
        }
    }
}

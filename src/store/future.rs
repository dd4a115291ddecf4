//! The future of a store operation other than a check.

use std::future::Future;
use std::pin::Pin;

use crate::error::StoreError;

/// The future of a store operation other than a check: a release, a probe, and the optional
/// powers' operations ([`Admin`](super::Admin), [`Overrides`](super::Overrides),
/// [`Refunds`](super::Refunds)).
///
/// ```
/// use redlimit::store::StoreFuture;
/// let done: StoreFuture<()> = Box::pin(async { Ok(()) });
/// ```
pub type StoreFuture<T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'static>>;

/// The answer of an operation the store does not offer.
pub(crate) fn unsupported<T: Send + 'static>(operation: &'static str) -> StoreFuture<T> {
    Box::pin(std::future::ready(Err(StoreError::Unsupported(operation))))
}

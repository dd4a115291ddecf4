//! A store call that runs apart from its caller, so that a caller that gives up (its future
//! dropped while the call is in flight) cannot leave a booking behind unrefunded.

use std::future::Future;

use crate::error::StoreError;

/// Runs `call` on a task of its own and waits for its answer; if the caller is dropped
/// first, the answer goes to `orphan` instead (to be given back). Without a Tokio runtime,
/// runs it in place.
pub(super) async fn detached<T: Send + 'static>(
    call: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    orphan: impl FnOnce(Result<T, StoreError>) + Send + 'static,
) -> Result<T, StoreError> {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return call.await;
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    runtime.spawn(async move {
        if let Err(answer) = tx.send(call.await) {
            orphan(answer);
        }
    });
    rx.await.unwrap_or_else(|_| {
        Err(StoreError::UnexpectedReply(
            "the store call was lost (runtime shut down)".into(),
        ))
    })
}

//! Waiting for several futures at once, in the task that awaits them (no spawned task: they
//! borrow the request's plan and engine, and end with it).

use std::future::Future;

/// Every future's output, in order, once all are done; they make progress together
/// (`futures_util`'s `join_all`). A single future is awaited as it is (the common request: no
/// allocation).
pub(super) async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    if futures.len() <= 1 {
        let mut outputs = Vec::with_capacity(futures.len());
        for future in futures {
            outputs.push(future.await);
        }
        return outputs;
    }
    futures_util::future::join_all(futures).await
}

#[cfg(test)]
mod tests {
    use super::join_all;

    #[tokio::test]
    async fn futures_progress_together_and_keep_their_order() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        // The first waits for the second: awaited one after the other, this would hang.
        let first = async move { rx.await.unwrap_or(0) + 1 };
        let second = async move {
            let _ = tx.send(41);
            0
        };
        let futures: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = u32>>>> =
            vec![Box::pin(first), Box::pin(second)];
        assert_eq!(join_all(futures).await, [42, 0]);
        assert!(
            join_all(Vec::<std::future::Ready<u8>>::new())
                .await
                .is_empty()
        );
    }
}

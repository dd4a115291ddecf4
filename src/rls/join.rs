//! Waiting for several futures at once, in the task that awaits them (no spawned task: they
//! borrow the request's plan and engine, and end with it).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// Every future's output, in order, once all are done; they make progress together. A single
/// future is awaited as it is (the common request: no allocation).
pub(super) async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    if futures.len() <= 1 {
        let mut outputs = Vec::with_capacity(futures.len());
        for future in futures {
            outputs.push(future.await);
        }
        return outputs;
    }
    let mut pending: Vec<Option<Pin<Box<F>>>> =
        futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut outputs: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (future, output) in pending.iter_mut().zip(outputs.iter_mut()) {
            let Some(running) = future else { continue };
            match running.as_mut().poll(cx) {
                Poll::Ready(value) => {
                    *output = Some(value);
                    *future = None;
                }
                Poll::Pending => done = false,
            }
        }
        if done { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
    outputs.into_iter().flatten().collect()
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

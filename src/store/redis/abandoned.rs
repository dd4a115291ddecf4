//! A check of a policy with a concurrency limit, abandoned while its call was in flight (the
//! client went away while the layer waited for Redis): the script may still run and take a
//! lease that no response will ever hold. The rest of the call then runs on a task of its own
//! and gives such a lease back at once, instead of leaving the slot taken until the lease
//! timeout.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::builder::Deployment;
use super::script::release_command;
use crate::decision::Decision;
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;

type Call = Pin<Box<dyn Future<Output = Result<Decision, StoreError>> + Send + 'static>>;

/// The check's call, followed to its end even if dropped once started.
pub(super) struct Leased {
    call: Option<Call>,
    /// Polled at least once: the call may have gone out.
    started: bool,
    release: Option<(Arc<Deployment>, Policy, Key)>,
}

impl Leased {
    pub(super) fn new(call: Call, inner: Arc<Deployment>, policy: Policy, key: Key) -> Self {
        Leased {
            call: Some(call),
            started: false,
            release: Some((inner, policy, key)),
        }
    }
}

impl Future for Leased {
    type Output = Result<Decision, StoreError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.started = true;
        let Some(call) = self.call.as_mut() else {
            return Poll::Ready(Err(StoreError::UnexpectedReply(
                "check polled after it completed".to_owned(),
            )));
        };
        let outcome = std::task::ready!(call.as_mut().poll(cx));
        self.call = None;
        Poll::Ready(outcome)
    }
}

impl Drop for Leased {
    fn drop(&mut self) {
        let (Some(call), true, Some((inner, policy, key))) =
            (self.call.take(), self.started, self.release.take())
        else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // no runtime: a lease taken lapses after its timeout
        };
        runtime.spawn(async move {
            if let Ok(decision) = call.await
                && let Some(lease) = decision.lease()
            {
                let command = release_command(&inner.prefix, &policy, &key, lease);
                let released: Result<i64, _> = inner.backend.run(&command).await;
                if let Err(error) = released {
                    tracing::debug!(%error, "releasing an abandoned check's lease failed");
                }
            }
        });
    }
}

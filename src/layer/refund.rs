//! Refunds after the response
//! ([`RateLimitBuilder::refund_if`](super::RateLimitBuilder::refund_if)): a request the store
//! admitted carries what it consumed to its response; if the user's condition holds for the
//! response's head, the units go back to the store, off the response path (spawned, fire and forget: a refund that fails or is slow never touches the response).

use std::sync::Arc;
use std::time::Duration;

use http::response::Parts;

use crate::decision::Decision;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::{Refund, Store};

/// The condition under which a response gives its request's units back.
pub(crate) type RefundFn = dyn Fn(&Parts) -> bool + Send + Sync;

/// A request's units, to give back if its response meets the condition.
pub(crate) struct PendingRefund {
    store: Arc<dyn Store>,
    policy: Policy,
    key: Key,
    refund: Refund,
    when: Arc<RefundFn>,
    /// How long the spawned refund may take before it is given up.
    patience: Duration,
}

impl PendingRefund {
    /// The pending refund of a request of `cost` that `decision` admitted, if the layer
    /// refunds at all and there is something to give back.
    pub(crate) fn of(
        when: Option<&Arc<RefundFn>>,
        store: &Arc<dyn Store>,
        policy: &Policy,
        key: &Key,
        decision: &Decision,
        cost: u64,
        patience: Duration,
    ) -> Option<PendingRefund> {
        let when = when?;
        Some(PendingRefund {
            refund: Refund::of(decision, cost)?,
            store: Arc::clone(store),
            policy: policy.clone(),
            key: key.clone(),
            when: Arc::clone(when),
            patience,
        })
    }

    /// Looks at the response's head and, if the condition holds, sends the refund off:
    /// whether it did.
    pub(crate) fn settle(self, head: &Parts) -> bool {
        let refunded = (self.when)(head);
        if refunded {
            self.send();
        }
        refunded
    }

    fn send(self) {
        let PendingRefund {
            store,
            policy,
            key,
            refund,
            patience,
            ..
        } = self;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::debug!(policy = policy.name(), "no Tokio runtime: refund not sent");
            return;
        };
        // The builder refuses `refund_if` over a store without refunds: none is made here.
        let Some(refunds) = store.refunds() else {
            return;
        };
        let given = refunds.refund(&policy, &key, refund);
        runtime.spawn(async move {
            // Never retried: a refund that timed out may have been applied.
            match tokio::time::timeout(patience, given).await {
                Ok(Ok(given)) => tracing::debug!(policy = policy.name(), given, "refund"),
                Err(_) => tracing::debug!(policy = policy.name(), "refund timed out"),
                Ok(Err(error)) => tracing::debug!(
                    policy = policy.name(),
                    error = %crate::error::Chain(&error),
                    "refund failed"
                ),
            }
        });
    }
}

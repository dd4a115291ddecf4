//! Estimate, then reconcile ([`RateLimitBuilder::settle_with`](super::RateLimitBuilder::settle_with)):
//! a request admitted at its estimated cost carries the admission to its response; the real
//! cost read from the response's head, or from its body when the body ends, settles it in one
//! store call (a refund of the difference or a charge of the excess,
//! [`Settlement`](crate::store::Settlement), as the client side's permits settle), off the
//! response path. A body dropped before its end keeps the estimate: no call.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use http::response::Parts;

use super::refund::PendingRefund;
use super::usage::{ReadFn, RealCost};
use crate::decision::{Decision, DecisionSource};
use crate::engine::{DenyCache, Throttle};
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::{MemoryStore, Refund, Settlement, Store};

/// What an admitted request does once its response comes: give its units back if the
/// response asks for it ([`refund_if`](super::RateLimitBuilder::refund_if)), settle its
/// estimate to the real cost. Boxed in the verdict: only layers that do either pay for it.
pub(crate) struct After {
    pub(crate) refund: Option<PendingRefund>,
    pub(crate) settle: Option<PendingSettle>,
}

impl After {
    /// The response's head came: sends the refund if it asks for one, else settles the
    /// estimate if the head says the real cost; the settle waiting for the body, if its
    /// cost is in the body.
    pub(crate) fn response(self, head: &Parts) -> Option<Box<BodySettle>> {
        let After { refund, settle } = self;
        if refund.is_some_and(|refund| refund.settle(head)) {
            return None;
        }
        settle?.read(head).map(Box::new)
    }
}

/// Where the admission was made, so where it is settled.
enum Place {
    /// The layer's store; what it charges beyond the estimate is mirrored into the local
    /// fallback too (the rule's mirror policy), which so knows this instance's real spending
    /// if the store fails next.
    Store(Arc<dyn Store>, Option<(MemoryStore, Policy)>),
    /// The local fallback (the store had failed): settled in memory, at this instance's share.
    Local(MemoryStore),
}

/// An admission at an estimate, waiting for the response to say the real cost.
pub(crate) struct PendingSettle {
    place: Place,
    policy: Policy,
    key: Key,
    estimate: u64,
    /// The admission's identity for a refund (the store's time and token of the decision);
    /// `None` for the local fallback's, which give nothing back (the estimate stands).
    refund: Option<(u64, u64)>,
    read: Arc<ReadFn>,
    /// How long the store may take to settle before it is given up.
    patience: Duration,
    /// Rate-limits the warnings of failed settlements.
    throttle: Arc<Throttle>,
    /// The layer's deny cache and the request's rule in it: a refund that landed lifts the
    /// key's cached denial here (other replicas' stay until their retry time: conservative).
    denials: Option<(Arc<DenyCache>, usize)>,
}

/// What the layer knows of an admission it may have to settle.
pub(crate) struct Admission<'a> {
    pub(crate) rule: usize,
    pub(crate) decision: &'a Decision,
    pub(crate) policy: &'a Policy,
    pub(crate) key: &'a Key,
    pub(crate) estimate: u64,
}

impl PendingSettle {
    /// The settle of `admission` made in `store` (or, for the local fallback's decisions,
    /// in `local` under its share of the policy), if it admitted anything to settle:
    /// a denial (let through in shadow mode) consumed nothing, failing open counted nothing.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn of(
        admission: Admission<'_>,
        denials: &Arc<DenyCache>,
        store: &Arc<dyn Store>,
        local: Option<(&MemoryStore, &Policy)>,
        mirror: Option<(&MemoryStore, &Policy)>,
        read: &Arc<ReadFn>,
        patience: Duration,
        throttle: &Arc<Throttle>,
    ) -> Option<PendingSettle> {
        let Admission {
            rule,
            decision,
            policy,
            key,
            estimate,
        } = admission;
        if !decision.is_allowed() {
            return None;
        }
        let (place, policy, refund, denials) = match decision.source() {
            DecisionSource::Store | DecisionSource::LocalFirst => {
                let mirror = mirror.map(|(store, policy)| (store.clone(), policy.clone()));
                let refund = Refund::of(decision, estimate).map(|r| (r.at_us(), r.token()));
                let denials = Some((Arc::clone(denials), rule));
                (
                    Place::Store(Arc::clone(store), mirror),
                    policy,
                    refund,
                    denials,
                )
            }
            DecisionSource::Local => {
                let (store, scaled) = local?;
                (Place::Local(store.clone()), scaled, None, None)
            }
            _ => return None,
        };
        Some(PendingSettle {
            place,
            policy: policy.clone(),
            key: key.clone(),
            estimate,
            refund,
            read: Arc::clone(read),
            patience,
            throttle: Arc::clone(throttle),
            denials,
        })
    }

    /// What the response's head says: the real cost now, a body to read, or nothing.
    pub(crate) fn read(self, head: &Parts) -> Option<BodySettle> {
        match (self.read)(head) {
            RealCost::Estimate => None,
            RealCost::Known(cost) => {
                self.settle(cost);
                None
            }
            RealCost::Body(usage) => Some(BodySettle {
                pending: self,
                usage: Mutex::new(usage),
            }),
        }
    }

    /// Settles the admission to `real`: at once in memory, else on a task of its own (a
    /// store in memory answers on the first poll; one across the network on a spawned task,
    /// bounded by the patience).
    pub(crate) fn settle(self, real: u64) {
        let PendingSettle {
            place,
            policy,
            key,
            estimate,
            refund,
            patience,
            throttle,
            denials,
            ..
        } = self;
        let refund = |cost| refund.map(|(at_us, token)| Refund::new(cost, at_us, token));
        let Some(settlement) = Settlement::of(estimate, real, refund) else {
            return;
        };
        let (store, mirror) = match place {
            Place::Local(local) => return settlement.apply_now(&local, &policy, &key),
            Place::Store(store, mirror) => (store, mirror),
        };
        if let (Settlement::Charge(extra), Some((local, mirrored))) = (&settlement, &mirror) {
            local.mirror_now(mirrored, &key, *extra);
        }
        let name = policy.name_arc();
        // Only a refund can lift a denial; the key is needed for it after the call.
        let lift = match (&settlement, denials) {
            (Settlement::Refund(_), Some((cache, rule))) => Some((cache, rule, key.clone())),
            _ => None,
        };
        let landed = move || {
            if let Some((cache, rule, key)) = lift {
                cache.remove(rule, &key);
            }
        };
        let mut call = Box::pin(settlement.apply(store, policy, key));
        let first = call.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        match first {
            Poll::Ready(Ok(())) => landed(),
            Poll::Ready(Err(error)) => failed(&name, &throttle, &error),
            Poll::Pending => match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(async move {
                        match tokio::time::timeout(patience, call).await {
                            Ok(Ok(())) => landed(),
                            Ok(Err(error)) => failed(&name, &throttle, &error),
                            Err(_) => failed(&name, &throttle, &StoreError::Timeout(patience)),
                        }
                    });
                }
                Err(_) => failed(
                    &name,
                    &throttle,
                    &StoreError::Unsupported("a Tokio runtime"),
                ),
            },
        }
    }
}

/// A settle waiting for the body's end, reading it as it streams.
pub(crate) struct BodySettle {
    pending: PendingSettle,
    /// In a mutex only so that the body stays `Sync` (as hyper and axum want it) with a
    /// reader that is `Send` alone: reached by `&mut`, it is never locked.
    usage: Mutex<Box<dyn super::BodyUsage>>,
}

impl BodySettle {
    /// The reader of the body.
    pub(crate) fn usage(&mut self) -> &mut dyn super::BodyUsage {
        let usage = self.usage.get_mut();
        // A reader that panicked leaves the body readable: its cost is then not trusted.
        &mut **usage.unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The body ended: settle to what it said (the estimate stands if it said nothing).
    pub(crate) fn ended(mut self) {
        if let Some(cost) = self.usage().cost() {
            self.pending.settle(cost);
        }
    }
}

/// Counts and logs a settlement that did not land: the estimate stands. Warned at most once a
/// second (a dead store must not flood the logs), else at `debug`.
#[cold]
fn failed(policy: &str, throttle: &Throttle, error: &StoreError) {
    crate::telemetry::settle_failure(policy, crate::telemetry::failure_reason(error));
    let error = crate::error::Chain(error);
    if throttle.should_warn() {
        tracing::warn!(policy, %error, "settling a request's cost failed; its estimate stands");
    } else {
        tracing::debug!(policy, %error, "settling a request's cost failed; its estimate stands");
    }
}

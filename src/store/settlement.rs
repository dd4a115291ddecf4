//! Settling an admission: units admitted by a check at an estimate, corrected to the real
//! cost once it is known, in one store call: a refund of the difference, or a charge of the
//! excess ([`Store::charge`]). The client side's [`Permit::settle`](crate::limiter::Permit::settle)
//! and the layer's reconcile ([`RateLimitBuilder::settle_with`](crate::layer::RateLimitBuilder::settle_with))
//! both settle through it.

use std::sync::Arc;

use super::{MemoryStore, Refund, Store};
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;

/// The one store call that corrects an admission to its real cost.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Settlement {
    /// Give back what was admitted beyond the real cost.
    Refund(Refund),
    /// Charge what the real cost exceeds the admission by.
    Charge(u64),
}

impl Settlement {
    /// The settlement of `booked` units admitted by a check, which really cost `real`:
    /// `refund` makes the refund of part of the admission (`None` when it cannot be refunded:
    /// the admission was not the store's). `None`: nothing to do (the estimate was right, or
    /// the difference cannot be given back; a refund is never more than was booked).
    pub(crate) fn of(
        booked: u64,
        real: u64,
        refund: impl FnOnce(u64) -> Option<Refund>,
    ) -> Option<Settlement> {
        match real.cmp(&booked) {
            std::cmp::Ordering::Less => refund(booked - real).map(Settlement::Refund),
            std::cmp::Ordering::Equal => None,
            std::cmp::Ordering::Greater => Some(Settlement::Charge(real - booked)),
        }
    }

    /// Applies it to `key` under `policy` in `store`, in one call (two over a store of your
    /// own without charges: the charge fails as unsupported, then a check takes what the
    /// limits have room for). A store without refunds gives nothing back. Never retried: a
    /// call that failed or timed out may have been applied.
    pub(crate) async fn apply(
        self,
        store: Arc<dyn Store>,
        policy: Policy,
        key: Key,
    ) -> Result<(), StoreError> {
        match self {
            Settlement::Refund(refund) => match store.refunds() {
                Some(refunds) => refunds.refund(&policy, &key, refund).await.map(drop),
                None => Ok(()),
            },
            Settlement::Charge(extra) => match store.charge(&policy, &key, extra).await {
                Ok(_) => Ok(()),
                Err(err) if err.is_unsupported() => {
                    store.check(&policy, &key, extra).await.map(drop)
                }
                Err(err) => Err(err),
            },
        }
    }

    /// Applies it in memory, at once: the local fallback's decisions settle here.
    pub(crate) fn apply_now(self, store: &MemoryStore, policy: &Policy, key: &Key) {
        match self {
            Settlement::Refund(refund) => drop(store.refund_now(policy, key, refund)),
            Settlement::Charge(extra) => drop(store.charge_now(policy, key, extra)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Limit;

    #[test]
    fn the_difference_is_refunded_or_charged_and_nothing_when_equal() {
        let refund = |c| Some(Refund::new(c, 1, 2));
        assert_eq!(Settlement::of(500, 500, refund), None);
        assert_eq!(
            Settlement::of(500, 120, refund),
            Some(Settlement::Refund(Refund::new(380, 1, 2)))
        );
        assert_eq!(
            Settlement::of(500, 900, refund),
            Some(Settlement::Charge(400))
        );
        // An admission that cannot be refunded keeps its estimate.
        assert_eq!(Settlement::of(500, 0, |_| None), None);
    }

    #[tokio::test]
    async fn a_charge_lands_past_the_limit_and_a_refund_gives_back() {
        let store = MemoryStore::new();
        let policy =
            Policy::new("t", [Limit::gcra(1_000, Duration::from_secs(60)).unwrap()]).unwrap();
        let key = Key::new("k");
        let admitted = store.check_now(&policy, &key, 500);
        let settle = Settlement::of(500, 100, |c| Refund::of(&admitted, c)).unwrap();
        let shared: Arc<dyn Store> = Arc::new(store.clone());
        settle
            .apply(Arc::clone(&shared), policy.clone(), key.clone())
            .await
            .unwrap();
        assert_eq!(
            store.inspect_now(&policy, &key).limits()[0].remaining(),
            900
        );
        let admitted = store.check_now(&policy, &key, 500);
        let settle = Settlement::of(500, 1_400, |c| Refund::of(&admitted, c)).unwrap();
        settle
            .apply(shared, policy.clone(), key.clone())
            .await
            .unwrap();
        assert!(!store.check_now(&policy, &key, 1).is_allowed(), "500 owed");
    }
}

//! The right to make one call: what [`Limiter::acquire`](super::Limiter::acquire) gives once
//! the slot has come, and how its cost is settled when it turns out different.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::AcquireError;
use super::shared::{Booking, Place, Shared};
use crate::key::Key;
use crate::store::{Refund, Settlement};

/// The units of one call, booked under every limit of the limiter's policy; its slot has
/// come. Dropping it keeps the units spent (the call was made); [`settle`](Self::settle)
/// corrects them to what the call really cost.
///
/// ```
/// use std::time::Duration;
/// use redlimit::limiter::Limiter;
/// use redlimit::store::MemoryStore;
/// use redlimit::{Limit, Policy};
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let minute = Duration::from_secs(60);
/// let policy = Policy::new("llm", [Limit::gcra(500, minute).unwrap(), Limit::gcra(90_000, minute).unwrap()]).unwrap();
/// // Limit 0 counts requests (1 per permit), limit 1 the permit's cost: tokens.
/// let limiter = Limiter::builder(MemoryStore::new(), policy).per_request([0]).build();
/// // Reserve an estimate of the tokens, settle with the count the response reports.
/// let permit = limiter.acquire("openai", 4_000).await.unwrap();
/// assert_eq!(permit.cost(), 4_000);
/// permit.settle(1_234).await.unwrap();
/// # });
/// ```
#[derive(Debug)]
pub struct Permit {
    shared: Arc<Shared>,
    key: Key,
    booking: Booking,
    /// Dropped now, before its slot: the units go back.
    pending: bool,
}

impl Permit {
    pub(super) fn new(shared: Arc<Shared>, key: Key, booking: Booking) -> Self {
        Permit {
            shared,
            key,
            booking,
            pending: false,
        }
    }

    /// Marks the permit as waiting for its slot: dropped meanwhile, it gives its units back.
    pub(super) fn set_pending(&mut self, pending: bool) {
        self.pending = pending;
    }

    /// The units booked.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(9, Duration::from_secs(1)).unwrap()]).unwrap());
    /// assert_eq!(limiter.acquire("k", 3).await.unwrap().cost(), 3);
    /// # });
    /// ```
    pub fn cost(&self) -> u64 {
        self.booking.cost()
    }

    /// Whether the units were booked in this process's memory, at its share, because the
    /// store failed (or was left alone after failing), rather than in the store.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(9, Duration::from_secs(1)).unwrap()]).unwrap());
    /// assert!(!limiter.acquire("k", 1).await.unwrap().is_local());
    /// # });
    /// ```
    pub fn is_local(&self) -> bool {
        self.booking.place() == Some(Place::Local)
    }

    /// How long this permit waited for its slot, from the store's answer.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(9, Duration::from_secs(1)).unwrap()]).unwrap());
    /// assert_eq!(limiter.acquire("k", 1).await.unwrap().waited(), Duration::ZERO);
    /// # });
    /// ```
    pub fn waited(&self) -> Duration {
        self.booking.wait()
    }

    /// The slot booked, on the store's clock (the memory's, for a local booking); `None` for
    /// a policy that checks rather than reserves.
    ///
    /// ```
    /// # use std::time::{Duration, SystemTime};
    /// # use redlimit::{limiter::Limiter, store::MemoryStore, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(9, Duration::from_secs(1)).unwrap()]).unwrap());
    /// let permit = limiter.acquire("k", 1).await.unwrap();
    /// assert!(permit.slot().unwrap() <= SystemTime::now());
    /// # });
    /// ```
    pub fn slot(&self) -> Option<std::time::SystemTime> {
        match &self.booking {
            Booking::Reserved(_, _, r) => Some(r.slot()),
            _ => None,
        }
    }

    /// Corrects the units to `real_cost`, what the call turned out to cost: the difference is
    /// given back (a refund) or charged (later callers wait for it), in one store call. A
    /// charge is never refused (the call was made): it lands past the limits too, as a debt
    /// that later permits wait for, up to twice a limit's count
    /// ([`Store::charge`](crate::store::Store::charge) says how each algorithm owes it;
    /// policies that reserve charge their reservations' state, and keep a longer backlog of
    /// reservations as it is). A refund never gives back more than was booked.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::limiter::Limiter;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let policy = Policy::new("tokens", [Limit::gcra(1_000, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let limiter = Limiter::new(MemoryStore::new(), policy);
    /// let permit = limiter.acquire("llm", 600).await.unwrap();
    /// permit.settle(900).await.unwrap(); // 300 more charged
    /// assert!(limiter.try_acquire("llm", 101).await.is_err());
    /// assert!(limiter.try_acquire("llm", 100).await.is_ok());
    /// # });
    /// ```
    pub async fn settle(mut self, real_cost: u64) -> Result<(), AcquireError> {
        let booking = std::mem::replace(&mut self.booking, Booking::Nothing);
        let booked = booking.cost();
        let shared = Arc::clone(&self.shared);
        let key = &self.key;
        if let Booking::Checked(place, _, at) = booking {
            // Admitted by a check: the layer's reconcile settles the same way.
            let refund = |cost| at.map(|(at_us, token)| Refund::new(cost, at_us, token));
            let Some(settlement) = Settlement::of(booked, real_cost, refund) else {
                return Ok(());
            };
            return match place {
                Place::Store => {
                    if matches!(settlement, Settlement::Charge(_))
                        || shared.store().refunds().is_some()
                    {
                        shared.calls.fetch_add(1, Ordering::Relaxed);
                    }
                    let (store, policy) = (Arc::clone(shared.store()), shared.policy.clone());
                    settlement
                        .apply(store, policy, key.clone())
                        .await
                        .map_err(AcquireError::Store)
                }
                Place::Local => {
                    if let Some((local, share)) = shared.local() {
                        settlement.apply_now(local, share, key);
                    }
                    Ok(())
                }
            };
        }
        if real_cost < booked {
            return match booking.undo(|units| shared.unit_costs(units), Some(booked - real_cost)) {
                Some(undo) => shared
                    .undo_now(key, undo)
                    .await
                    .map_err(AcquireError::Store),
                None => Ok(()),
            };
        }
        let extra = real_cost - booked;
        if extra == 0 {
            return Ok(());
        }
        let costs = shared.unit_costs(extra);
        match booking {
            Booking::Reserved(Place::Store, ..) => {
                let Some(reservations) = shared.store().reservations() else {
                    return Ok(());
                };
                shared.calls.fetch_add(1, Ordering::Relaxed);
                reservations
                    .charge_costs(&shared.policy, key, &costs)
                    .await
                    .map_err(AcquireError::Store)?;
                if let Some((local, share)) = shared.local() {
                    let _ = local.reserve_now(share, key, &costs, Duration::ZERO);
                }
                Ok(())
            }
            Booking::Reserved(Place::Local, ..) => match shared.local() {
                Some((local, share)) => local
                    .charge_costs_now(share, key, &costs)
                    .map_err(AcquireError::Store),
                None => Ok(()),
            },
            Booking::Checked(..) | Booking::Nothing => Ok(()),
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.pending {
            self.shared.give_back(&self.booking, &self.key);
        }
    }
}

//! What every clone of a limiter shares: the store, the policy, the memory fallback and the
//! breaker, and the one store call each booking makes ([`Shared::book`]). What memory booked
//! while the store was gone is told to it when it answers again (`rejoin.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::AcquireError;
use super::booking::{Booking, Undo};
use super::detached::detached;
use super::rejoin::Outage;
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::{MemoryStore, Reserved, Store, reservable};

pub(super) struct Shared {
    pub(super) store: Arc<dyn Store>,
    pub(super) policy: Policy,
    /// Every limit reserves and the store books slots: one call per permit. Otherwise the
    /// limiter checks and retries (`retry.rs`).
    pub(super) native: bool,
    pub(super) max_wait: Duration,
    deadline: Duration,
    /// `None`: fail while the store fails; else decide in `local` under `local_policy`.
    local_mode: bool,
    pub(super) local: MemoryStore,
    pub(super) local_policy: Policy,
    cool_down: Duration,
    /// Until when (ms after `epoch`) the store is left alone; 0 while it answers.
    pub(super) down_until: AtomicU64,
    /// What memory booked since the store failed, told to it when it answers (`rejoin.rs`).
    pub(super) outage: Outage,
    epoch: Instant,
    pub(super) calls: AtomicU64,
    pub(super) local_decisions: AtomicU64,
    /// Per limit: whether it counts permits (1 each) rather than their cost.
    per_request: Box<[bool]>,
}

/// The builder's settings (`builder.rs` documents each).
pub(super) struct Settings {
    pub(super) max_wait: Duration,
    pub(super) deadline: Duration,
    /// `None`: fail while the store fails.
    pub(super) instances: Option<u32>,
    pub(super) cool_down: Duration,
    pub(super) per_request: Box<[bool]>,
}

/// Where a booking was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    Store,
    Local,
}

impl Shared {
    pub(super) fn new(
        store: Arc<dyn Store>,
        policy: Policy,
        local: MemoryStore,
        settings: Settings,
    ) -> Self {
        let native = reservable(&policy) && store.reservations().is_some();
        Shared {
            local_policy: policy.scaled(settings.instances.unwrap_or(1)),
            local_mode: settings.instances.is_some(),
            native,
            store,
            policy,
            max_wait: settings.max_wait,
            deadline: settings.deadline,
            local,
            cool_down: settings.cool_down,
            down_until: AtomicU64::new(0),
            outage: Outage::default(),
            epoch: Instant::now(),
            calls: AtomicU64::new(0),
            local_decisions: AtomicU64::new(0),
            per_request: settings.per_request,
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1
    }

    /// Whether to ask the store now: it answers, or its cool-down is over and this caller
    /// won the one call that tries it again (the others decide in memory meanwhile).
    pub(super) fn store_open(&self) -> bool {
        let until = self.down_until.load(Ordering::Acquire);
        if until == 0 {
            return true;
        }
        let now = self.now_ms();
        now >= until
            && self
                .down_until
                .compare_exchange(
                    until,
                    now + ms(self.cool_down),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
    }

    pub(super) fn deadline(&self) -> Duration {
        self.deadline
    }

    pub(super) fn store_answered(&self) {
        if self.down_until.load(Ordering::Relaxed) != 0 {
            self.down_until.store(0, Ordering::Release);
            tracing::info!(policy = self.policy.name(), "the store answers again");
        }
    }

    /// The store failed: decide in memory (or fail) for a cool-down.
    pub(super) fn store_failed(&self, err: StoreError) -> Result<(), AcquireError> {
        if self
            .down_until
            .swap(self.now_ms() + ms(self.cool_down), Ordering::AcqRel)
            == 0
        {
            tracing::warn!(policy = self.policy.name(), error = %err, "the store failed; deciding in memory");
        }
        if self.local_mode {
            Ok(())
        } else {
            Err(AcquireError::Store(err))
        }
    }

    /// Readies a decision in memory, the store being left alone: counted; refused when the
    /// limiter fails rather than deciding in memory.
    pub(super) fn in_memory(&self) -> Result<(), AcquireError> {
        if !self.local_mode {
            return Err(AcquireError::Store(StoreError::CircuitOpen));
        }
        self.local_decisions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Books `cost` for `key` within `max_wait` in one call: the store's reservation, or, while
    /// it fails, one in memory at this process's share. The time the answer came, and the
    /// booking. For policies that do not reserve, `retry.rs` books instead.
    pub(super) async fn book(
        self: &Arc<Self>,
        key: &Key,
        cost: u64,
        max_wait: Duration,
    ) -> Result<(Instant, Booking), AcquireError> {
        if self.store_open() {
            let shared = Arc::clone(self);
            let (k, deadline) = (key.clone(), self.deadline);
            let costs = self.costs(cost);
            self.calls.fetch_add(1, Ordering::Relaxed);
            let call = async move {
                let Some(reservations) = shared.store.reservations() else {
                    return Err(StoreError::Unsupported("reservations"));
                };
                let booked = reservations.reserve(&shared.policy, &k, &costs, max_wait);
                let answer = match tokio::time::timeout(deadline, booked).await {
                    Ok(answer) => answer,
                    Err(_) => Err(StoreError::Timeout(deadline)),
                };
                // Back after failing: tell it what memory booked meanwhile before anyone
                // else goes back (here, so that a caller dropped meanwhile gives its slot back).
                if answer.is_ok() {
                    shared.store_returned().await;
                }
                answer
            };
            // Run apart from the caller: one that gives up while the call is in flight must
            // not leave a booked slot behind.
            let orphan = Arc::clone(self);
            let k = key.clone();
            let answer = detached(call, move |answer| {
                if let Ok(Reserved::Slot(r)) = answer {
                    Booking::Reserved(Place::Store, cost, r).give_back(&orphan, &k);
                }
            })
            .await;
            let at = Instant::now();
            match answer {
                Ok(Reserved::Slot(r)) => {
                    // Mirrored at this process's share, as far as it goes by the same slot: a
                    // backlog booked in the store is one in memory too, so that a store
                    // failing now does not let memory admit beside the slots still to come.
                    let costs = self.costs(cost);
                    let _ = self
                        .local
                        .reserve_now(&self.local_policy, key, &costs, r.wait());
                    return Ok((at, Booking::Reserved(Place::Store, cost, r)));
                }
                Ok(Reserved::TooLong { wait }) => {
                    return Err(AcquireError::TooLong { wait });
                }
                Ok(Reserved::Never) => {
                    return Err(AcquireError::Never { cost });
                }
                Err(err) => self.store_failed(err)?,
            }
        }
        self.in_memory()?;
        let costs = self.costs(cost);
        let answer = self
            .local
            .reserve_now(&self.local_policy, key, &costs, max_wait)
            .map_err(AcquireError::Store)?;
        match answer {
            Reserved::Slot(r) => {
                let at = Instant::now();
                let longest = self.policy.max_period();
                self.outage.record(key, at + r.wait(), &costs, longest);
                Ok((at, Booking::Reserved(Place::Local, cost, r)))
            }
            Reserved::TooLong { wait } => Err(AcquireError::TooLong { wait }),
            Reserved::Never => Err(AcquireError::Never { cost }),
        }
    }

    /// The costs of a permit of `cost`, one per limit (a limit that counts requests counts
    /// 1), or `cost` alone when every limit counts it.
    pub(super) fn costs(&self, cost: u64) -> Box<[u64]> {
        if !self.per_request.iter().any(|r| *r) {
            return Box::new([cost]);
        }
        self.per_request
            .iter()
            .map(|r| if *r { 1 } else { cost })
            .collect()
    }

    /// The costs of `units` more or fewer units of a permit: none on the limits that count
    /// requests.
    pub(super) fn unit_costs(&self, units: u64) -> Box<[u64]> {
        if !self.per_request.iter().any(|r| *r) {
            return Box::new([units]);
        }
        self.per_request
            .iter()
            .map(|r| if *r { 0 } else { units })
            .collect()
    }

    /// Gives `undo` back, on a task of its own (a drop cannot wait).
    pub(super) fn undo_later(self: &Arc<Self>, key: &Key, undo: Undo) {
        if matches!(
            undo,
            Undo::Reserved(Place::Local, _) | Undo::Refund(Place::Local, _)
        ) {
            let _ = self.undo_local(key, undo);
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (shared, key) = (Arc::clone(self), key.clone());
        runtime.spawn(async move {
            if let Err(err) = shared.undo_now(&key, undo).await {
                tracing::debug!(%err, "giving back a reservation failed");
            }
        });
    }

    fn undo_local(&self, key: &Key, undo: Undo) -> Result<(), StoreError> {
        match undo {
            Undo::Reserved(_, costs) => self.local.give_back_now(&self.local_policy, key, &costs),
            Undo::Refund(_, refund) => {
                self.local.refund_now(&self.local_policy, key, refund);
                Ok(())
            }
        }
    }

    /// Gives `undo` back and waits for it.
    pub(super) async fn undo_now(&self, key: &Key, undo: Undo) -> Result<(), StoreError> {
        match undo {
            Undo::Reserved(Place::Store, costs) => {
                if let Some(reservations) = self.store.reservations() {
                    self.calls.fetch_add(1, Ordering::Relaxed);
                    reservations.give_back(&self.policy, key, &costs).await?;
                    // The mirror gives back too (as far as it took: never below fresh).
                    let _ = self.local.give_back_now(&self.local_policy, key, &costs);
                }
                Ok(())
            }
            Undo::Refund(Place::Store, refund) => {
                if let Some(refunds) = self.store.refunds() {
                    self.calls.fetch_add(1, Ordering::Relaxed);
                    refunds.refund(&self.policy, key, refund).await?;
                }
                Ok(())
            }
            local => self.undo_local(key, local),
        }
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX / 2)
}

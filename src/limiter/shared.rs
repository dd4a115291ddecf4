//! What every clone of a limiter shares: its engine (one rule: the policy and its failure
//! mode; the store, the breaker, the deadline, the local fallback), and the one store call
//! each booking makes ([`Shared::book`]), detached from a caller that may give up. What memory
//! booked while the store was gone is told to it when it answers again (`rejoin.rs`). What one
//! permit holds in a limit (a [`Booking`]: a reserved slot, in the store or in memory, or an
//! admission by a check for policies that do not reserve), and how to give it back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::AcquireError;
use super::rejoin::Outage;
use crate::engine::{Engine, Failure, Late, OnFailure, Rule, Settings as EngineSettings};
use crate::error::StoreError;
use crate::failure::CircuitBreaker;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::{MemoryStore, Refund, Reservation, Reserved, Store, reservable};

/// The limiter's one rule in its engine.
const RULE: usize = 0;

pub(super) struct Shared {
    /// The engine over the policy: the store behind its breaker (a cool-down: any failure
    /// leaves the store alone for a while, then one call tries it), the deadline, the failure
    /// mode and the local fallback at this process's share.
    pub(super) engine: Engine,
    pub(super) policy: Policy,
    /// Every limit reserves and the store books slots: one call per permit. Otherwise the
    /// limiter checks and retries (`retry.rs`).
    pub(super) native: bool,
    pub(super) max_wait: Duration,
    /// What memory booked since the store failed, told to it when it answers (`rejoin.rs`).
    pub(super) outage: Outage,
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

impl Shared {
    pub(super) fn new(
        store: Arc<dyn Store>,
        policy: Policy,
        local: MemoryStore,
        settings: Settings,
    ) -> Self {
        let native = reservable(&policy) && store.reservations().is_some();
        let on_failure = match settings.instances {
            Some(instances) => OnFailure::Local { instances },
            None => OnFailure::Unavailable,
        };
        let engine_settings = EngineSettings {
            breaker: CircuitBreaker::on_any_failure(settings.cool_down),
            // No deny cache (a limiter waits for its slot), no bound on calls in flight (a
            // limiter's callers wait their turn).
            deny_cache: 0,
            max_calls: None,
            late: Late::ByMode,
            ..EngineSettings::new(settings.deadline)
        };
        let shared = crate::engine::Shared::new(store, engine_settings).with_local_store(local);
        // The limiter prepares its own calls (reservations, or the checks of `retry.rs`).
        let engine = Engine::new(&shared, [Rule::new(&policy, on_failure).unprepared()]);
        Shared {
            engine,
            native,
            policy,
            max_wait: settings.max_wait,
            outage: Outage::default(),
            calls: AtomicU64::new(0),
            local_decisions: AtomicU64::new(0),
            per_request: settings.per_request,
        }
    }

    pub(super) fn store(&self) -> &Arc<dyn Store> {
        self.engine.store()
    }

    pub(super) fn deadline(&self) -> Duration {
        self.engine.deadline()
    }

    /// The engine's local fallback: its memory and this process's share of the policy.
    pub(super) fn local(&self) -> Option<(&MemoryStore, &Policy)> {
        self.engine.local(RULE)
    }

    /// The store failed (or its circuit is open): the engine's failure path decides whether
    /// to book in memory (where, and at which share of the policy) or fail.
    pub(super) fn store_failed(
        &self,
        error: StoreError,
    ) -> Result<(&MemoryStore, &Policy), AcquireError> {
        match self.engine.failure(RULE, &error) {
            Failure::Local(share) => {
                let policy = share.policy().ok_or(AcquireError::Store(error))?;
                self.local_decisions.fetch_add(1, Ordering::Relaxed);
                Ok((share.store(), policy))
            }
            _ => Err(AcquireError::Store(error)),
        }
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
        let answer = match self.engine.enter(&self.policy, key) {
            Ok(pass) => {
                let shared = Arc::clone(self);
                let k = key.clone();
                let costs = self.costs(cost);
                self.calls.fetch_add(1, Ordering::Relaxed);
                let call = async move {
                    let Some(reservations) = (**shared.store()).reservations() else {
                        return Err(StoreError::Unsupported("reservations"));
                    };
                    let until = tokio::time::Instant::now() + shared.deadline();
                    let booked = reservations.reserve(&shared.policy, &k, &costs, max_wait);
                    let answer = shared.engine.wait(booked, until).await;
                    // Back after failing: tell it what memory booked meanwhile before anyone
                    // else goes back (here, so that a caller dropped meanwhile gives its slot
                    // back).
                    if answer.is_ok() && pass.is_probe() {
                        shared.store_returned().await;
                    }
                    shared.engine.record_call(pass, &answer);
                    answer
                };
                // Run apart from the caller: one that gives up while the call is in flight
                // must not leave a booked slot behind.
                let orphan = Arc::clone(self);
                let k = key.clone();
                detached(call, move |answer| {
                    if let Ok(Reserved::Slot(r)) = answer {
                        orphan.give_back(&Booking::Reserved(Place::Store, cost, r), &k);
                    }
                })
                .await
            }
            Err(error) => Err(error),
        };
        let at = Instant::now();
        let error = match answer {
            Ok(Reserved::Slot(r)) => {
                // Mirrored at this process's share, as far as it goes by the same slot: a
                // backlog booked in the store is one in memory too, so that a store failing
                // now does not let memory admit beside the slots still to come.
                if let Some((local, share)) = self.local() {
                    let _ = local.reserve_now(share, key, &self.costs(cost), r.wait());
                }
                return Ok((at, Booking::Reserved(Place::Store, cost, r)));
            }
            Ok(Reserved::TooLong { wait }) => return Err(AcquireError::TooLong { wait }),
            Ok(Reserved::Never) => return Err(AcquireError::Never { cost }),
            Err(error) => error,
        };
        let (local, share) = self.store_failed(error)?;
        let costs = self.costs(cost);
        let answer = local
            .reserve_now(share, key, &costs, max_wait)
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

    /// The store answered the call that tried it after a failure (its circuit stays open
    /// meanwhile): it is told first what memory booked meanwhile that still counts
    /// (`rejoin.rs`), before every caller goes back to it.
    async fn store_returned(&self) {
        let calls = self
            .outage
            .tell(self.store(), &self.policy, self.deadline())
            .await;
        self.calls.fetch_add(calls, Ordering::Relaxed);
    }

    /// Gives all of `booking` back, once, on a task of its own (a drop cannot wait).
    pub(super) fn give_back(self: &Arc<Self>, booking: &Booking, key: &Key) {
        if let Some(undo) = booking.undo(|units| self.unit_costs(units), None) {
            self.undo_later(key, undo);
        }
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
        let Some((local, share)) = self.local() else {
            return Ok(());
        };
        match undo {
            Undo::Reserved(_, costs) => local.give_back_now(share, key, &costs),
            Undo::Refund(_, refund) => {
                local.refund_now(share, key, refund);
                Ok(())
            }
        }
    }

    /// Gives `undo` back and waits for it.
    pub(super) async fn undo_now(&self, key: &Key, undo: Undo) -> Result<(), StoreError> {
        match undo {
            Undo::Reserved(Place::Store, costs) => {
                if let Some(reservations) = self.store().reservations() {
                    self.calls.fetch_add(1, Ordering::Relaxed);
                    reservations.give_back(&self.policy, key, &costs).await?;
                    // The mirror gives back too (as far as it took: never below fresh).
                    if let Some((local, share)) = self.local() {
                        let _ = local.give_back_now(share, key, &costs);
                    }
                }
                Ok(())
            }
            Undo::Refund(Place::Store, refund) => {
                if let Some(refunds) = self.store().refunds() {
                    self.calls.fetch_add(1, Ordering::Relaxed);
                    refunds.refund(&self.policy, key, refund).await?;
                }
                Ok(())
            }
            local => self.undo_local(key, local),
        }
    }
}

// A store call that runs apart from its caller, so that a caller that gives up (its future
// dropped while the call is in flight) cannot leave a booking behind unrefunded.
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

/// Where a booking was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    Store,
    Local,
}

#[derive(Debug)]
pub(super) enum Booking {
    /// A slot reserved in the store or in memory, of the permit's cost.
    Reserved(Place, u64, Reservation),
    /// Admitted by a check: its cost, and the store's time and token of the decision (for a
    /// refund), if it can be refunded.
    Checked(Place, u64, Option<(u64, u64)>),
    /// Nothing (a cost of 0).
    Nothing,
}

/// How to give back part of a booking.
pub(super) enum Undo {
    /// A reservation's give back, of these costs (one per limit, or one for all).
    Reserved(Place, Box<[u64]>),
    /// A refund of a check's admission.
    Refund(Place, Refund),
}

impl Booking {
    /// How long to wait, from the answer, before the slot.
    pub(super) fn wait(&self) -> Duration {
        match self {
            Booking::Reserved(_, _, r) => r.wait(),
            _ => Duration::ZERO,
        }
    }

    /// The permit's cost.
    pub(super) fn cost(&self) -> u64 {
        match self {
            Booking::Reserved(_, cost, _) | Booking::Checked(_, cost, _) => *cost,
            Booking::Nothing => 0,
        }
    }

    /// Where it was decided.
    pub(super) fn place(&self) -> Option<Place> {
        match self {
            Booking::Reserved(place, ..) | Booking::Checked(place, ..) => Some(*place),
            Booking::Nothing => None,
        }
    }

    /// How to give back `cost` of the permit's units (all of them for `None`; part of a
    /// reservation as `unit_costs` spreads units over the limits); `None` if there is nothing
    /// to give back.
    pub(super) fn undo(
        &self,
        unit_costs: impl FnOnce(u64) -> Box<[u64]>,
        cost: Option<u64>,
    ) -> Option<Undo> {
        let all = self.cost();
        let cost = cost.unwrap_or(all).min(all);
        match self {
            _ if cost == 0 => None,
            Booking::Reserved(place, _, r) if cost == all => {
                Some(Undo::Reserved(*place, r.costs().into()))
            }
            Booking::Reserved(place, ..) => Some(Undo::Reserved(*place, unit_costs(cost))),
            Booking::Checked(place, _, Some((at_us, token))) => {
                Some(Undo::Refund(*place, Refund::new(cost, *at_us, *token)))
            }
            _ => None,
        }
    }
}

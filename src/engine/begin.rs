//! Starting a decision: the deny cache, the breaker of the key's failure domain, the bound on
//! calls in flight, then the store call ([`Engine::begin`], [`Engine::resume`]).

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::OwnedSemaphorePermit;

use super::breaker::{Admission, Outcome};
use super::deny_cache::{Lookup, Stamp};
use super::in_flight::InFlight;
use super::{Begin, Engine, PROBE_DEADLINES, Queued, Settled, Ticket};
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::{Check, Store};

impl Engine {
    /// Starts deciding `cost` units for `key` under rule `rule`.
    pub(crate) fn begin(&self, rule: usize, key: Key, cost: u64) -> Begin {
        let Some(policy) = self.policy(rule) else {
            return Begin::Done(Settled::Unavailable, Ticket::unasked(rule, key, cost));
        };
        let store = self.store.as_ref();
        let gate = match self.deny_cache.lookup(rule, &key, cost, false, |cached| {
            still_stands(store, policy, &key, cached)
        }) {
            Lookup::Miss => None,
            Lookup::Hit(denial) => {
                return Begin::Done(Settled::Decided(denial), Ticket::unasked(rule, key, cost));
            }
            Lookup::Refresh(turn) => Some(turn),
            Lookup::Wait(gate) => return Begin::Wait(gate, Queued { rule, key, cost }),
        };
        self.ask(rule, policy, key, cost, gate)
    }

    /// After waiting at the gate: with `turn`, or without it if the deadline passed first.
    pub(crate) fn resume(&self, queued: Queued, turn: Option<OwnedSemaphorePermit>) -> Begin {
        let Queued { rule, key, cost } = queued;
        let Some(policy) = self.policy(rule) else {
            return Begin::Done(Settled::Unavailable, Ticket::unasked(rule, key, cost));
        };
        let store = self.store.as_ref();
        if let Lookup::Hit(denial) = self.deny_cache.lookup(rule, &key, cost, true, |cached| {
            still_stands(store, policy, &key, cached)
        }) {
            return Begin::Done(Settled::Decided(denial), Ticket::unasked(rule, key, cost));
        }
        self.ask(rule, policy, key, cost, turn)
    }

    /// Asks the store (through the breaker and the bound on calls in flight).
    fn ask(
        &self,
        rule: usize,
        policy: &Policy,
        key: Key,
        cost: u64,
        gate: Option<OwnedSemaphorePermit>,
    ) -> Begin {
        let domain = (*self.store).failure_domain(policy, &key);
        let admission = self.breakers.admit(domain, self.deadline);
        let mut ticket = Ticket {
            rule,
            key,
            cost,
            domain,
            admission,
            permit: None,
            _gate: gate,
            asked: None,
            stamp: Stamp::now(self.store.as_ref()),
        };
        if admission == Admission::Skip || (admission == Admission::Probe && self.probe(domain)) {
            let settled = self.store_failed(&StoreError::CircuitOpen, &ticket);
            return Begin::Done(settled, ticket);
        }
        match (*self.store).check(policy, &ticket.key, cost) {
            // An answer without I/O cannot hang: the breaker only watches calls that wait,
            // unless this one was its probe.
            Check::Ready(outcome) => {
                if admission == Admission::Probe {
                    self.record(&ticket, &outcome);
                }
                let settled = match outcome {
                    Ok(decision) => Settled::Store(decision, None),
                    Err(error) => self.store_failed(&error, &ticket),
                };
                Begin::Done(settled, ticket)
            }
            waiting => match self.in_flight.as_ref().map(InFlight::try_acquire) {
                // No bound: nothing counted.
                None => {
                    ticket.asked = Some(Instant::now());
                    Begin::Ask(waiting.into_future(), ticket)
                }
                Some(Some(permit)) => {
                    ticket.permit = Some(permit);
                    ticket.asked = Some(Instant::now());
                    Begin::Ask(waiting.into_future(), ticket)
                }
                // The call is dropped unsent (a store future does nothing until polled).
                Some(None) => {
                    let settled = self.overloaded(&ticket);
                    Begin::Done(settled, ticket)
                }
            },
        }
    }

    /// Too many store calls in flight for `ticket`'s: decided in memory.
    #[cold]
    #[inline(never)]
    fn overloaded(&self, ticket: &Ticket) -> Settled {
        self.breakers.abandon(ticket.domain, ticket.admission);
        crate::telemetry::store_failure(self.meter.store(), "overload");
        self.in_memory(
            ticket,
            "too many rate-limit store calls in flight; deciding in memory",
        )
    }

    /// Probes the store behind `domain` in the background, for its open breaker, if the store
    /// can be probed (and a runtime runs): the request that drew the probe is then decided as
    /// while the breaker is open, and no request waits for a store that may still be gone.
    #[cold]
    #[inline(never)]
    fn probe(&self, domain: u16) -> bool {
        let (Some(probe), Ok(runtime)) = (
            self.store.probe(domain),
            tokio::runtime::Handle::try_current(),
        ) else {
            return false;
        };
        let breakers = Arc::clone(&self.breakers);
        let within = PROBE_DEADLINES * self.deadline;
        runtime.spawn(async move {
            let outcome = match tokio::time::timeout(within, probe).await {
                Ok(Ok(())) => Outcome::Success,
                Ok(Err(_)) => Outcome::Failure,
                Err(_) => Outcome::Timeout,
            };
            breakers.record(domain, Admission::Probe, outcome);
        });
        true
    }
}

/// The store's versions now, if a denial of `key` under `policy` cached under `cached` still
/// stands: no override changed since, and the key was not reset.
fn still_stands(store: &dyn Store, policy: &Policy, key: &Key, cached: Stamp) -> Option<Stamp> {
    let now = Stamp::now(store);
    if now.overrides != cached.overrides {
        return None;
    }
    let reset = now.resets != cached.resets
        && store
            .admin()
            .is_none_or(|admin| admin.reset_since(policy, key, cached.resets));
    (!reset).then_some(now)
}

//! A decision's way through the engine. Its start: the deny cache, the breaker of the key's
//! failure domain, the bound on calls in flight, then the store call ([`Engine::begin`],
//! [`Engine::resume`]). Its end, the store call settled ([`Engine::settle`]): the breaker
//! counts it, the deny cache and the local fallback's mirror learn from it; a call that missed
//! its deadline is left to finish in the background ([`Engine::missed_deadline`]).

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;

use super::breaker::{Admission, Outcome, Probed};
use super::deny_cache::{Lookup, Stamp};
use super::held_lease::{HeldLease, LeaseStore};
use super::in_flight::InFlight;
use super::store_meter::LeaseMeter;
use super::{Begin, Engine, PROBE_DEADLINES, Queued, Settled, Ticket};
use crate::decision::{Decision, DecisionSource};
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::{Check, CheckFuture, Store};

impl Engine {
    /// Starts deciding `cost` units for `key` under rule `rule`.
    pub(crate) fn begin(&self, rule: usize, key: Key, cost: u64) -> Begin {
        let Some(policy) = self.rules.get(rule).and_then(|r| r.policy.as_ref()) else {
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
        let Some(policy) = self.rules.get(rule).and_then(|r| r.policy.as_ref()) else {
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
    // Inlined into `begin`, every request's way to the store (and `resume`'s, a rare one).
    #[inline]
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

impl Engine {
    /// A call of `ticket`'s domain missed its deadline: if nothing in the domain answered
    /// since it was asked, finds out (with a probe past the calls in flight, where the store
    /// offers one) whether the store is gone, and if so opens the domain's breaker at once,
    /// so that the requests after this one are decided at memory speed at any request rate.
    fn confirm_silence(&self, ticket: &Ticket) {
        let Some(asked) = ticket.asked else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if !self.breakers.start_confirming(ticket.domain, asked) {
            return;
        }
        let (breakers, domain) = (Arc::clone(&self.breakers), ticket.domain);
        let probe = self.store.probe(domain);
        let within = PROBE_DEADLINES * self.deadline;
        runtime.spawn(async move {
            let started = Instant::now();
            let probed = match probe {
                Some(probe) => match tokio::time::timeout(within, probe).await {
                    Ok(Ok(())) => Probed::Alive,
                    Ok(Err(_)) => Probed::Refused,
                    Err(_) if starved(started.elapsed(), within) => Probed::Alive,
                    Err(_) => Probed::Silent,
                },
                None => Probed::Silent,
            };
            breakers.confirmed(domain, asked, probed);
        });
    }

    /// Settles a store call that waited: the breaker counts it, then its decision or the
    /// failure mode's.
    pub(crate) fn settle(&self, outcome: Result<Decision, StoreError>, ticket: &Ticket) -> Settled {
        self.record(ticket, &outcome);
        let latency = ticket.asked.map(|asked| asked.elapsed());
        if let Some(latency) = latency {
            self.meter.store_latency(latency);
        }
        // Only a store that waits can be late: what it admits is mirrored into the fallback,
        // which then knows this instance's spending when a later call misses its deadline.
        if let Ok(decision) = &outcome
            && decision.is_allowed()
            && decision.source() == DecisionSource::Store
        {
            self.local.mirror(ticket.rule, &ticket.key, ticket.cost);
        }
        if let (Ok(decision), Some(asked)) = (&outcome, ticket.asked) {
            self.deny_cache.insert(
                ticket.rule,
                &ticket.key,
                ticket.cost,
                (asked, ticket.stamp),
                decision,
            );
        }
        match outcome {
            Ok(decision) => Settled::Store(decision, latency),
            Err(error) => self.store_failed(&error, ticket),
        }
    }

    /// The store did not answer within the deadline. That alone does not show it failed: a
    /// flood that queues calls (here or in the store) looks the same for a while, and failing
    /// open on it would hand an attacker an unlimited window. So the request is decided in
    /// memory, and the call is left to finish in the background (holding its place among the
    /// calls in flight) for the breaker to learn whether the store answered late (alive,
    /// busy) or not within [`lost_after`](Self::lost_after) (gone).
    pub(crate) fn missed_deadline(&self, check: CheckFuture, ticket: &mut Ticket) -> Settled {
        let breakers = Arc::clone(&self.breakers);
        let (domain, admission, permit) = (ticket.domain, ticket.admission, ticket.permit.take());
        let lost_after = self.lost_after();
        let (latency, asked) = (self.meter.latency_handle(), ticket.asked);
        // A late admission may have taken a concurrency lease that nobody will hold: given
        // back at once (through a `HeldLease` dropped as soon as it is made).
        let lease_of = self
            .policy(ticket.rule)
            .map(|policy| (Arc::clone(&self.store), policy.clone(), ticket.key.clone()));
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let outcome = tokio::time::timeout(lost_after, check).await;
                    breakers.record(domain, admission, Outcome::of(outcome.as_ref().ok()));
                    if let (Ok(_), Some(asked)) = (&outcome, asked) {
                        latency.record(asked.elapsed());
                    }
                    if let (Ok(Ok(decision)), Some((store, policy, key))) = (&outcome, lease_of)
                        && let Some(lease) = decision.lease()
                    {
                        drop(HeldLease::new(
                            LeaseStore::Shared(store),
                            policy,
                            key,
                            lease,
                            LeaseMeter::uncounted(),
                        ));
                    }
                    drop(permit);
                });
            }
            Err(_) => breakers.record(domain, admission, Outcome::Timeout),
        }
        self.confirm_silence(ticket);
        crate::telemetry::store_failure(self.meter.store(), "deadline");
        self.in_memory(
            ticket,
            "rate-limit store missed the deadline; deciding in memory",
        )
    }

    pub(super) fn record(&self, ticket: &Ticket, outcome: &Result<Decision, StoreError>) {
        self.breakers
            .record(ticket.domain, ticket.admission, Outcome::of(Some(outcome)));
    }
}

/// Whether a probe that timed out after `elapsed` (of `within`) was this process's silence
/// rather than the store's: its timer fired late, so the runtime (or the whole process, on a
/// busy machine) was too busy to run it on time, and the reply may be sitting unread. A flood
/// that starves this process must not open the breaker, which would fail open in `open`
/// mode: only a probe that timed out on time proves the store silent.
fn starved(elapsed: Duration, within: Duration) -> bool {
    elapsed > within + within / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_probe_timed_out_on_time_proves_silence() {
        let within = Duration::from_millis(200);
        assert!(!starved(within, within));
        assert!(!starved(within + Duration::from_millis(49), within));
        assert!(starved(within + Duration::from_millis(51), within));
        assert!(starved(Duration::from_secs(2), within));
    }
}

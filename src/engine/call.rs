//! The awaiting path, for fronts that make several store calls per request one after the other
//! (the RLS's checks) or calls other than a check (the limiter's reservations): each call
//! through the breaker of its failure domain and the bound on calls in flight ([`Pass`]),
//! bounded by a deadline, and the deny cache asked and told about single counters. A call that
//! fails goes to the one failure path ([`Engine::failure`]).

use std::future::{Future, IntoFuture, poll_fn};
use std::pin::{Pin, pin};
use std::task::{Poll, ready};
use std::time::Instant;

use super::Engine;
use super::breaker::{Admission, Outcome};
use super::deadline::Deadline;
#[cfg(feature = "rls")]
use super::deny_cache::{Lookup, Stamp};
use super::in_flight::CallSlot;
#[cfg(feature = "rls")]
use crate::decision::Decision;
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;
#[cfg(feature = "rls")]
use crate::store::Commit;

/// A store call the breaker admitted, and its place among the calls in flight (none when
/// the engine has no bound): owned, so that a call made on a task of its own (the limiter's,
/// which outlives a dropped caller) carries it.
pub(crate) struct Pass {
    domain: u16,
    admission: Admission,
    _permit: Option<CallSlot>,
}

impl Pass {
    /// Whether this call tries a store whose circuit was open: its success closes it.
    pub(crate) fn is_probe(&self) -> bool {
        self.admission == Admission::Probe
    }
}

impl Engine {
    /// A pass for one call of `policy` for `key`: through the breaker of its failure domain
    /// (open: [`StoreError::CircuitOpen`]) and the bound on calls in flight (full:
    /// [`StoreError::Overloaded`]). Make the call, [`wait`](Self::wait) for it, then
    /// [`record`](Self::record_call) its outcome.
    pub(crate) fn enter(&self, policy: &Policy, key: &Key) -> Result<Pass, StoreError> {
        let domain = (*self.store).failure_domain(policy, key);
        let admission = self.breakers.admit(domain, self.deadline);
        if admission == Admission::Skip {
            return Err(StoreError::CircuitOpen);
        }
        // No bound (the RLS's default, the limiter): nothing counted.
        let permit = match &self.in_flight {
            None => None,
            Some(bound) => match bound.try_acquire() {
                Some(permit) => Some(permit),
                None => {
                    self.breakers.abandon(domain, admission);
                    crate::telemetry::store_failure(self.meter.store(), "overload");
                    return Err(StoreError::Overloaded(bound.max()));
                }
            },
        };
        Ok(Pass {
            domain,
            admission,
            _permit: permit,
        })
    }

    /// Awaits `call` until `until` (past it, [`StoreError::Timeout`] with the deadline),
    /// timing it.
    pub(crate) async fn wait<T>(
        &self,
        call: impl IntoFuture<Output = Result<T, StoreError>>,
        until: tokio::time::Instant,
    ) -> Result<T, StoreError> {
        let asked = Instant::now();
        let mut call = pin!(call.into_future());
        // Armed only once the call has to wait: a store in memory never touches the timer.
        let mut deadline: Option<Deadline> = None;
        let outcome = poll_fn(|cx| {
            if let Poll::Ready(outcome) = call.as_mut().poll(cx) {
                return Poll::Ready(outcome);
            }
            let deadline = deadline.get_or_insert_with(|| Deadline::at(until));
            ready!(Pin::new(deadline).poll(cx));
            Poll::Ready(Err(StoreError::Timeout(self.deadline)))
        })
        .await;
        if !matches!(&outcome, Err(error) if error.is_timeout()) {
            self.meter.store_latency(asked.elapsed());
        }
        outcome
    }

    /// The breaker counts the `outcome` of the call `pass` let through; a failure is counted
    /// in the store's metrics.
    pub(crate) fn record_call<T>(&self, pass: Pass, outcome: &Result<T, StoreError>) {
        self.breakers
            .record(pass.domain, pass.admission, Outcome::of(Some(outcome)));
        if let Err(error) = outcome {
            crate::telemetry::store_failure(
                self.meter.store(),
                crate::telemetry::failure_reason(error),
            );
        }
    }

    #[cfg(feature = "rls")]
    /// Checks `costs` of `policy` for `key` under rule `rule` in the store (one for every
    /// limit, or one per limit: [`LimitCosts`](crate::store::LimitCosts), committed as
    /// `commit` says: every cost landing under [`Commit::Always`] takes one per limit),
    /// through a [`Pass`], giving up at `until` (the request's deadline). Where every cost
    /// lands, what the store charged is mirrored into the rule's local share at once (all or
    /// none: the front mirrors what it keeps, [`mirror`](Self::mirror)).
    pub(crate) async fn call(
        &self,
        rule: usize,
        policy: &Policy,
        key: &Key,
        (costs, commit): (&[u64], Commit),
        until: tokio::time::Instant,
    ) -> Result<Decision, StoreError> {
        let limits = match costs {
            [_] if commit == Commit::AllOrNone => None,
            _ => Some(
                (*self.store)
                    .limit_costs()
                    .ok_or(StoreError::Unsupported("costs per limit"))?,
            ),
        };
        let pass = self.enter(policy, key)?;
        // Made once the breaker admits it: a store in memory decides (and commits) at once.
        let check = match (limits, costs) {
            (Some(limits), _) => limits.check_costs(policy, key, costs, commit),
            (None, [cost]) => self.store.check(policy, key, *cost),
            (None, _) => return Err(StoreError::Unsupported("costs per limit")),
        };
        let outcome = self.wait(check, until).await;
        self.record_call(pass, &outcome);
        if outcome.is_ok() && commit == Commit::Always {
            self.local.mirror_costs(rule, policy, key, (costs, commit));
        }
        outcome
    }

    #[cfg(feature = "rls")]
    /// Charges the local share of rule `rule` with `costs` of `policy` for `key`, which the
    /// store admitted through this instance and the front kept (if the rule mirrors).
    pub(crate) fn mirror(&self, rule: usize, policy: &Policy, key: &Key, costs: (&[u64], Commit)) {
        self.local.mirror_costs(rule, policy, key, costs);
    }

    #[cfg(feature = "rls")]
    /// The store's versions now: a denial learned from a call made now is cached under them.
    pub(crate) fn versions(&self) -> Stamp {
        Stamp::now(self.store.as_ref())
    }

    #[cfg(feature = "rls")]
    /// The cached denial of `cost` units for `key` under rule `rule`, if one stands: cached
    /// under the store's versions now (any override or reset since drops it) and not expired.
    pub(crate) fn cached_denial(&self, rule: usize, key: &Key, cost: u64) -> Option<Decision> {
        let now = self.versions();
        let stands = |cached: Stamp| (cached == now).then_some(now);
        match self.deny_cache.lookup(rule, key, cost, true, stands) {
            Lookup::Hit(denial) => Some(denial),
            _ => None,
        }
    }

    /// Drops the cached denial of `key` under rule `rule`, if any, and its state in the rule's
    /// local share (the admin API reset it); `policy` is the counter's, whole.
    #[cfg(all(feature = "rls", feature = "admin"))]
    pub(crate) fn forget_counter(&self, rule: usize, policy: &Policy, key: &Key) {
        self.deny_cache.remove(rule, key);
        if let Some(share) = self.local.mirroring(rule) {
            share.store().reset_now(&share.scaled(policy), key);
        }
    }

    /// Drops the cached denial of `key` under rule `rule`, if any.
    #[cfg(all(feature = "rls", feature = "admin"))]
    pub(crate) fn forget_denial(&self, rule: usize, key: &Key) {
        self.deny_cache.remove(rule, key);
    }

    #[cfg(feature = "rls")]
    /// Remembers the store's `decision` of `cost` units for `key` under rule `rule`, asked at
    /// `asked` under the store's versions `stamp`, if it is a denial that can be cached.
    pub(crate) fn remember(
        &self,
        rule: usize,
        key: &Key,
        cost: u64,
        (asked, stamp): (Instant, Stamp),
        decision: &Decision,
    ) {
        self.deny_cache
            .insert(rule, key, cost, (asked, stamp), decision);
    }
}

//! The awaiting path, for fronts that make several checks per request one after the other
//! (the RLS): one store call through the breaker of its failure domain, bounded by the
//! request's deadline, and the deny cache asked and told about single counters.

use std::time::Instant;

use super::breaker::Admission;
use super::deny_cache::{Lookup, Stamp};
use super::settle::outcome_of;
use super::{Engine, begin::stamp};
use crate::decision::Decision;
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::Commit;

impl Engine {
    /// Checks `costs` of `policy` for `key` in the store (one for every limit, or one per
    /// limit: [`LimitCosts`](crate::store::LimitCosts), committed as `commit` says: every
    /// cost landing under [`Commit::Always`] takes one per limit), through the breaker of its
    /// failure domain, giving up at `until` (the request's deadline).
    pub(crate) async fn call(
        &self,
        policy: &Policy,
        key: &Key,
        (costs, commit): (&[u64], Commit),
        until: tokio::time::Instant,
    ) -> Result<Decision, StoreError> {
        let limits = match costs {
            [_] if commit == Commit::AllOrNone => None,
            _ => Some(
                self.store
                    .limit_costs()
                    .ok_or(StoreError::Unsupported("costs per limit"))?,
            ),
        };
        let domain = self.store.failure_domain(policy, key);
        let admission = self.breakers.admit(domain, self.deadline);
        if admission == Admission::Skip {
            return Err(StoreError::CircuitOpen);
        }
        // Made once the breaker admits it: a store in memory decides (and commits) at once.
        let check = match (limits, costs) {
            (Some(limits), _) => limits.check_costs(policy, key, costs, commit),
            (None, [cost]) => self.store.check(policy, key, *cost),
            (None, _) => return Err(StoreError::Unsupported("costs per limit")),
        };
        let asked = Instant::now();
        let outcome = tokio::time::timeout_at(until, check)
            .await
            .unwrap_or(Err(StoreError::Timeout(self.deadline)));
        self.breakers
            .record(domain, admission, outcome_of(Some(&outcome)));
        if !matches!(&outcome, Err(error) if error.is_timeout()) {
            self.meter.store_latency(asked.elapsed());
        }
        if let Err(error) = &outcome {
            crate::telemetry::store_failure(
                self.meter.store(),
                crate::telemetry::failure_reason(error),
            );
        }
        outcome
    }

    /// The store's versions now: a denial learned from a call made now is cached under them.
    pub(crate) fn versions(&self) -> Stamp {
        stamp(self.store.as_ref())
    }

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

    /// Drops the cached denial of `key` under rule `rule`, if any (the admin API reset it).
    #[cfg(all(feature = "rls", feature = "admin"))]
    pub(crate) fn forget_denial(&self, rule: usize, key: &Key) {
        self.deny_cache.remove(rule, key);
    }

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

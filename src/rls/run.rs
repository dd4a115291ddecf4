//! The store calls of one request: its counters in as few atomic checks as their costs allow,
//! within one deadline, through the circuit breakers.
//!
//! Every counter of one cost goes into one check (one `Policy` of their limits, each limit
//! under its counter's key: [`Key::with_named_limit_keys`]), so the common request, whose
//! descriptors all charge the request's `hits_addend`, is one atomic store call: all charged
//! or none. A check holds at most [`MAX_LIMITS`] limits, distinct counters and one sliding
//! log; more, or descriptors charging different `hits_addend`s, are further checks, made one
//! after the other: the first denial stops the charging, and the checks already admitted are
//! refunded (on a store with [`Refunds`](crate::store::Refunds)), so a rejected request
//! charges nothing once the refunds land. Check-only descriptors (`hits_addend` 0) are checks
//! of cost 0, made first. Quota-mode and shadow-mode descriptors are checked on their own,
//! after the enforced ones: their being over must not stop the others' charge.

use std::sync::Arc;
use std::time::Duration;

use smallvec::SmallVec;
use tokio::time::Instant;

use super::plan::{Counter, Mode, Plan, Resolved};
use crate::decision::{Decision, LimitState};
use crate::engine::breaker::{Admission, Outcome};
use crate::engine::breakers::Breakers;
use crate::error::StoreError;
use crate::key::Key;
use crate::limit::Algorithm;
use crate::policy::{MAX_LIMITS, Policy};
use crate::store::{Refund, Store};

/// The policy name of every RLS check (the counters' keys tell them apart).
const POLICY: &str = "rls";

/// What the store said of one counter, and the cost it was asked for.
#[derive(Debug, Clone)]
pub(super) struct Evaluated {
    pub(super) state: LimitState,
    pub(super) asked: u64,
}

/// Whether a counter is over its limit: refused its cost, or, asked for nothing (a
/// check-only descriptor, or one left uncharged because the request was refused), without the
/// units its own cost (at least 1) needs: we never count refused hits, so "over" for a check
/// means one more unit would be refused.
pub(super) fn is_over(counter: &Counter, evaluated: Option<&Evaluated>) -> bool {
    match (counter.limit, evaluated) {
        (None, _) => true,
        (Some(_), Some(e)) if e.asked == 0 => {
            !e.state.is_allowed() || e.state.remaining() < counter.cost.max(1)
        }
        (Some(_), Some(e)) => !e.state.is_allowed(),
        (Some(_), None) => false,
    }
}

/// One check: counters (indexes into the plan) of one cost.
#[derive(Debug)]
struct Group {
    members: SmallVec<[usize; 4]>,
    cost: u64,
}

/// A check the store admitted with a cost, kept to refund if the request is refused.
struct Charged {
    descriptor: Option<usize>,
    policy: Policy,
    key: Key,
    decision: Decision,
    cost: u64,
}

/// The store, its breakers and the request's deadline.
pub(super) struct Runner<'a> {
    pub(super) store: &'a Arc<dyn Store>,
    pub(super) breakers: &'a Breakers,
    pub(super) deadline: Duration,
    pub(super) until: Instant,
}

impl Runner<'_> {
    /// Evaluates every counter of `plan`; `None` for the zero limits (never asked).
    pub(super) async fn run(&self, plan: &Plan) -> Result<Vec<Option<Evaluated>>, StoreError> {
        let mut charged = Vec::new();
        let outcome = self.run_charging(plan, &mut charged).await;
        match outcome {
            Ok((results, refused)) => {
                let over = |d: usize| {
                    counters_of(plan, d).any(|c| is_over(&plan.counters[c], results[c].as_ref()))
                };
                // A refused request gives back all it charged; a quota or shadow descriptor
                // over its limit gives back its own charge (its checks were its own).
                for charge in charged {
                    let give_back = refused || charge.descriptor.is_some_and(over);
                    if give_back {
                        self.refund(charge);
                    }
                }
                Ok(results)
            }
            Err(error) => {
                for charge in charged {
                    self.refund(charge);
                }
                Err(error)
            }
        }
    }

    async fn run_charging(
        &self,
        plan: &Plan,
        charged: &mut Vec<Charged>,
    ) -> Result<(Vec<Option<Evaluated>>, bool), StoreError> {
        let counters = &plan.counters;
        let mut results: Vec<Option<Evaluated>> = vec![None; counters.len()];
        let live = |c: &Counter| c.limit.is_some();
        // Check-only counters first: reads, never charged.
        let reads = groups(
            counters,
            (0..counters.len()).filter(|&c| live(&counters[c]) && counters[c].cost == 0),
            |_| 0,
        );
        for group in &reads {
            self.check(plan, group, &mut results).await?;
        }
        let enforced = |d: usize| {
            matches!(
                plan.descriptors[d],
                Resolved::Limited {
                    mode: Mode::Enforce,
                    ..
                }
            )
        };
        let mut refused = (0..counters.len()).any(|c| {
            enforced(counters[c].descriptor) && is_over(&counters[c], results[c].as_ref())
        });
        if !refused {
            let charging = (0..counters.len()).filter(|&c| {
                live(&counters[c]) && counters[c].cost > 0 && enforced(counters[c].descriptor)
            });
            for group in groups(counters, charging, |c| counters[c].cost) {
                let (decision, policy, key) = self.check(plan, &group, &mut results).await?;
                if !decision.is_allowed() {
                    refused = true;
                    break;
                }
                charged.push(Charged {
                    descriptor: None,
                    policy,
                    key,
                    decision,
                    cost: group.cost,
                });
            }
        }
        if !refused {
            // Quota and shadow descriptors: each on its own.
            for (d, resolved) in plan.descriptors.iter().enumerate() {
                let Resolved::Limited {
                    mode: Mode::Quota | Mode::Shadow,
                    first,
                    len,
                } = *resolved
                else {
                    continue;
                };
                let members =
                    (first..first + len).filter(|&c| live(&counters[c]) && counters[c].cost > 0);
                for group in groups(counters, members, |c| counters[c].cost) {
                    let (decision, policy, key) = self.check(plan, &group, &mut results).await?;
                    if !decision.is_allowed() {
                        break;
                    }
                    charged.push(Charged {
                        descriptor: Some(d),
                        policy,
                        key,
                        decision,
                        cost: group.cost,
                    });
                }
            }
        }
        // What the refusal left unasked is read, for its status.
        let unasked = (0..counters.len()).filter(|&c| live(&counters[c]) && results[c].is_none());
        for group in groups(counters, unasked, |_| 0) {
            self.check(plan, &group, &mut results).await?;
        }
        Ok((results, refused))
    }

    /// One atomic check of `group`'s counters; their states go into `results`.
    async fn check(
        &self,
        plan: &Plan,
        group: &Group,
        results: &mut [Option<Evaluated>],
    ) -> Result<(Decision, Policy, Key), StoreError> {
        let counters = &plan.counters;
        let limits = group.members.iter().filter_map(|&c| counters[c].limit);
        let policy = Policy::new(POLICY, limits)?;
        let key = plan
            .domain_key
            .clone()
            .with_named_limit_keys(group.members.iter().map(|&c| counters[c].own.clone()));
        let domain = self.store.failure_domain(&policy, &key);
        let admission = self.breakers.admit(domain, self.deadline);
        if admission == Admission::Skip {
            return Err(StoreError::CircuitOpen);
        }
        let answer =
            tokio::time::timeout_at(self.until, self.store.check(&policy, &key, group.cost)).await;
        let decision = match answer {
            Err(_) => {
                self.breakers.record(domain, admission, Outcome::Timeout);
                return Err(StoreError::Timeout(self.deadline));
            }
            Ok(Err(error)) => {
                self.breakers.record(domain, admission, Outcome::Failure);
                return Err(error);
            }
            Ok(Ok(decision)) => {
                self.breakers.record(domain, admission, Outcome::Success);
                decision
            }
        };
        for (&c, state) in group.members.iter().zip(decision.limits()) {
            results[c] = Some(Evaluated {
                state: state.clone(),
                asked: group.cost,
            });
        }
        Ok((decision, policy, key))
    }

    /// Gives back what `charge` consumed, in the background: the answer does not wait.
    fn refund(&self, charge: Charged) {
        let Some(refund) = Refund::of(&charge.decision, charge.cost) else {
            return;
        };
        let store = Arc::clone(self.store);
        tokio::spawn(async move {
            if let Some(refunds) = store.refunds()
                && let Err(error) = refunds.refund(&charge.policy, &charge.key, refund).await
            {
                tracing::warn!(%error, "rls: a refused request's charge could not be refunded");
            }
        });
    }
}

/// The counters of descriptor `d`.
fn counters_of(plan: &Plan, d: usize) -> impl Iterator<Item = usize> + use<> {
    match plan.descriptors.get(d) {
        Some(Resolved::Limited { first, len, .. }) => *first..first + len,
        _ => 0..0,
    }
}

/// `members` in checks: each with one cost, at most `MAX_LIMITS` limits, distinct counters and
/// at most one limit of a per-key algorithm (sliding log). Limits are ordered by algorithm
/// within a check, so a store that compiles a script per mix of algorithms sees few mixes.
fn groups(
    counters: &[Counter],
    members: impl Iterator<Item = usize>,
    cost: impl Fn(usize) -> u64,
) -> Vec<Group> {
    let per_key = |c: usize| {
        counters[c]
            .limit
            .is_some_and(|l| l.algorithm() == Algorithm::SlidingLog)
    };
    let mut groups: Vec<Group> = Vec::new();
    for c in members {
        let cost = cost(c);
        let fits = |g: &Group| {
            g.cost == cost
                && g.members.len() < MAX_LIMITS
                && !g
                    .members
                    .iter()
                    .any(|&m| counters[m].own == counters[c].own)
                && !(per_key(c) && g.members.iter().any(|&m| per_key(m)))
        };
        match groups.iter_mut().find(|g| fits(g)) {
            Some(group) => group.members.push(c),
            None => groups.push(Group {
                members: SmallVec::from_slice(&[c]),
                cost,
            }),
        }
    }
    for group in &mut groups {
        group
            .members
            .sort_by_key(|&c| counters[c].limit.map(|l| l.algorithm() as usize));
    }
    groups
}

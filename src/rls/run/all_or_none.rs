//! All or none ([`Commit::AllOrNone`], `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true`): a
//! request is charged only if every counter admits its hits. Checks of one store and one hash
//! tag (a lane, one Cluster slot) are made one after the other, the lanes at once (joined in
//! this task): the first denial anywhere starts no further check, and the checks admitted, in
//! any lane, are refunded (on a store with [`Refunds`](crate::store::Refunds)), so a rejected
//! request charges nothing once the refunds land, about a round trip later. Check-only
//! descriptors (`hits_addend` 0) are reads of cost 0, made first, at once. Quota-mode and
//! shadow-mode descriptors are checked on their own, after the enforced ones: their being
//! over must not stop the others' charge. What is kept is mirrored into the domain's local
//! share (the engine's, when its failure mode is local).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use smallvec::SmallVec;

use super::super::plan::{Counter, Mode, Plan, Resolved};
use super::home::{Home, Homes, pick};
use super::join::join_all;
use super::{
    Evaluated, Group, POLICY, Runner, Via, counters_of, groups, is_over, one_or_each, states,
};
use crate::decision::{Decision, LimitState};
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::{Commit, Refund, Store};

/// A check the store admitted with a cost, kept to refund if the request is refused.
struct Charged {
    /// The store that charged it.
    home: Home,
    /// The counters it charged.
    members: SmallVec<[usize; 4]>,
    descriptor: Option<usize>,
    policy: Policy,
    key: Key,
    decision: Decision,
    /// Each member's cost, in the order of `members`.
    costs: SmallVec<[u64; 4]>,
}

/// A check to charge, and the quota- or shadow-mode descriptor it is made for (`None`: the
/// enforced descriptors').
struct Step {
    group: Group,
    descriptor: Option<usize>,
}

/// What one lane's checks did.
#[derive(Default)]
struct Ran {
    /// Each counter's state, as its check answered.
    evaluated: Vec<(usize, Evaluated)>,
    charged: Vec<Charged>,
    refused: bool,
    /// The error that stopped the lane.
    error: Option<StoreError>,
}

impl Runner<'_> {
    /// Evaluates every counter of `plan`, all or none.
    pub(super) async fn run_all_or_none(
        &self,
        plan: &Plan,
    ) -> Result<Vec<Option<Evaluated>>, StoreError> {
        let mut charged = Vec::new();
        let outcome = self.run_charging(plan, &mut charged).await;
        match outcome {
            Ok((mut results, refused)) => {
                let over = |d: usize, results: &[Option<Evaluated>]| {
                    counters_of(plan, d).any(|c| is_over(&plan.counters[c], results[c].as_ref()))
                };
                // A refused request gives back all it charged; a quota or shadow descriptor
                // over its limit gives back its own charge (its checks were its own).
                let give_back: SmallVec<[bool; 4]> = charged
                    .iter()
                    .map(|charge| refused || charge.descriptor.is_some_and(|d| over(d, &results)))
                    .collect();
                for (mut charge, give_back) in charged.into_iter().zip(give_back) {
                    if !give_back {
                        self.mirror(plan, &charge);
                        continue;
                    }
                    let members = std::mem::take(&mut charge.members);
                    if self.refund(charge) {
                        // Its counters' statuses say what they hold once it lands.
                        for c in members {
                            if let Some(evaluated) = &mut results[c] {
                                *evaluated = given_back(evaluated);
                            }
                        }
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
        let homes = self.homes();
        let mixed = self.mixed();
        let mut results: Vec<Option<Evaluated>> = vec![None; counters.len()];
        let live = |c: &Counter| c.limit.is_some();
        self.cached(plan, &mut results);
        let unknown =
            |c: usize, results: &[Option<Evaluated>]| live(&counters[c]) && results[c].is_none();
        // Check-only counters first: reads, never charged.
        let reads = groups(
            counters,
            homes,
            (0..counters.len()).filter(|&c| unknown(c, &results) && counters[c].cost == 0),
            |_| 0,
            mixed,
        );
        self.read(plan, &reads, &mut results).await?;
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
            let steps = groups(counters, homes, charging, |c| counters[c].cost, mixed)
                .into_iter()
                .map(|group| Step {
                    group,
                    descriptor: None,
                });
            let lanes = lanes(counters, homes, steps);
            refused = self
                .charge(plan, lanes, true, &mut results, charged)
                .await?;
        }
        if !refused {
            // Quota and shadow descriptors: each on its own.
            let mut steps = Vec::new();
            for (d, resolved) in plan.descriptors.iter().enumerate() {
                let Resolved::Limited {
                    mode: Mode::Quota | Mode::Shadow,
                    first,
                    len,
                } = *resolved
                else {
                    continue;
                };
                // A descriptor with a counter known over charges none of its counters.
                if (first..first + len).any(|c| results[c].is_some() && counters[c].cost > 0) {
                    continue;
                }
                let members =
                    (first..first + len).filter(|&c| live(&counters[c]) && counters[c].cost > 0);
                steps.extend(
                    groups(counters, homes, members, |c| counters[c].cost, mixed)
                        .into_iter()
                        .map(|group| Step {
                            group,
                            descriptor: Some(d),
                        }),
                );
            }
            let lanes = lanes(counters, homes, steps.into_iter());
            self.charge(plan, lanes, false, &mut results, charged)
                .await?;
        }
        // What the refusal left unasked is read, for its status.
        let unasked = (0..counters.len()).filter(|&c| live(&counters[c]) && results[c].is_none());
        let unasked = groups(counters, homes, unasked, |_| 0, mixed);
        self.read(plan, &unasked, &mut results).await?;
        Ok((results, refused))
    }

    /// Runs `lanes` at once, each its steps one after the other. `all_or_none` (the enforced
    /// descriptors): a refusal refuses the request, and starts no further check in any lane;
    /// else a refusal skips the rest of its descriptor's steps. An error starts no further
    /// check in any lane. Whatever the lanes charged goes into `charged` (to refund or keep),
    /// their states into `results`. True if a step was refused.
    async fn charge(
        &self,
        plan: &Plan,
        lanes: Vec<Vec<Step>>,
        all_or_none: bool,
        results: &mut [Option<Evaluated>],
        charged: &mut Vec<Charged>,
    ) -> Result<bool, StoreError> {
        let stop = AtomicBool::new(false);
        let ran = match &lanes[..] {
            [] => Vec::new(),
            // The common request, one lane (one hash tag): awaited in place, its future
            // neither boxed in a vector nor moved out of one.
            [lane] => vec![self.lane(plan, lane, all_or_none, &stop).await],
            _ => {
                join_all(
                    lanes
                        .iter()
                        .map(|lane| self.lane(plan, lane, all_or_none, &stop))
                        .collect(),
                )
                .await
            }
        };
        let (mut refused, mut failed) = (false, None);
        for lane in ran {
            for (c, evaluated) in lane.evaluated {
                results[c] = Some(evaluated);
            }
            charged.extend(lane.charged);
            refused |= lane.refused;
            failed = failed.or(lane.error);
        }
        match failed {
            Some(error) => Err(error),
            None => Ok(refused),
        }
    }

    /// One lane's steps, one after the other (see [`charge`](Self::charge)).
    async fn lane(&self, plan: &Plan, steps: &[Step], all_or_none: bool, stop: &AtomicBool) -> Ran {
        let mut ran = Ran::default();
        let mut denied = None;
        for step in steps {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if step.descriptor.is_some() && step.descriptor == denied {
                continue;
            }
            let (decision, policy, key) = match self.check(plan, &step.group).await {
                Ok(checked) => checked,
                Err(error) => {
                    stop.store(true, Ordering::Relaxed);
                    ran.error = Some(error);
                    break;
                }
            };
            ran.evaluated.extend(states(&step.group, &decision, false));
            if !decision.is_allowed() {
                ran.refused = true;
                denied = step.descriptor;
                if all_or_none {
                    stop.store(true, Ordering::Relaxed);
                    break;
                }
                continue;
            }
            ran.charged.push(Charged {
                home: self.homes().of(&plan.counters[step.group.lead]),
                members: step.group.members.clone(),
                descriptor: step.descriptor,
                policy,
                key,
                decision,
                costs: step.group.costs.clone(),
            });
        }
        ran
    }

    /// Charges the local fallback with what the store admitted through this server and the
    /// request kept (its share of each limit), so that a failing store does not open a
    /// second budget here.
    fn mirror(&self, plan: &Plan, charge: &Charged) {
        if let Via::Engine {
            engine, per_second, ..
        } = self.via
        {
            let costs = (one_or_each(&charge.costs), Commit::AllOrNone);
            pick(engine, per_second, charge.home).mirror(
                plan.rule,
                &charge.policy,
                &charge.key,
                costs,
            );
        }
    }

    /// Gives back what `charge` consumed, in the background: the answer does not wait. False
    /// if nothing is given back (the store cannot refund, or the charge was not the store's).
    /// A check of several costs is given back counter by counter, each its own cost.
    fn refund(&self, charge: Charged) -> bool {
        let refunds = refunds_of(&charge);
        if refunds.is_empty() {
            return false;
        }
        let (store, share): (Arc<dyn Store>, _) = match self.via {
            Via::Engine {
                engine, per_second, ..
            } => (
                Arc::clone(pick(engine, per_second, charge.home).store()),
                None,
            ),
            Via::Local(share) => (Arc::new(share.store().clone()), Some(share)),
        };
        if store.refunds().is_none() {
            return false;
        }
        // At the share, as the local fallback charged it.
        let refunds: Vec<_> = refunds
            .into_iter()
            .map(|(policy, key, refund)| match share {
                Some(share) => (share.scaled(&policy), key, refund),
                None => (policy, key, refund),
            })
            .collect();
        tokio::spawn(async move {
            for (policy, key, refund) in refunds {
                if let Some(refunds) = store.refunds()
                    && let Err(error) = refunds.refund(&policy, &key, refund).await
                {
                    tracing::warn!(%error, "rls: a refused request's charge could not be refunded");
                }
            }
        });
        true
    }
}

/// `steps` in lanes, one per store and hash tag (a Cluster slot), in order: a lane's checks
/// are made one after the other (the first refusal spares the rest their charge and refund),
/// the lanes at once. Under [`HashTag::Domain`](super::super::HashTag::Domain), one lane per
/// store.
fn lanes(counters: &[Counter], homes: Homes, steps: impl Iterator<Item = Step>) -> Vec<Vec<Step>> {
    let tag = |step: &Step| {
        let lead = &counters[step.group.lead];
        (homes.of(lead), &lead.tag)
    };
    let mut lanes: Vec<Vec<Step>> = Vec::new();
    for step in steps {
        match lanes
            .iter_mut()
            .find(|lane| lane.first().map(tag) == Some(tag(&step)))
        {
            Some(lane) => lane.push(step),
            None => lanes.push(vec![step]),
        }
    }
    lanes
}

/// The refunds that give back `charge`: one of its whole check when its counters were charged
/// one cost, else one per counter charged (its limit under its own key, its own cost), each
/// under a token of its own derived from the check's (a store applies a token once).
fn refunds_of(charge: &Charged) -> Vec<(Policy, Key, Refund)> {
    if let [cost] = one_or_each(&charge.costs) {
        return Refund::of(&charge.decision, *cost)
            .map(|refund| vec![(charge.policy.clone(), charge.key.clone(), refund)])
            .unwrap_or_default();
    }
    let tag = charge.key.primary();
    let limits = charge.policy.limits();
    charge
        .key
        .limit_keys()
        .zip(limits)
        .zip(&charge.costs)
        .enumerate()
        .filter_map(|(i, (((_, own), limit), &cost))| {
            let whole = Refund::of(&charge.decision, cost)?;
            let at_us = super::micros(whole.evaluated_at());
            if at_us == 0 {
                return None;
            }
            // Distinct per counter, and (mixed by an odd constant) never another decision's.
            let token = whole.token() ^ 0x9e37_79b9_7f4a_7c15_u64.wrapping_mul(i as u64 + 1);
            let policy = Policy::new(POLICY, [*limit]).ok()?;
            let key = tag.clone().with_named_limit_keys([own.clone()]);
            Some((policy, key, Refund::new(cost, at_us, token)))
        })
        .collect()
}

/// `evaluated` once its charge is given back: the units it was asked for left again (within
/// the limit), as a read would find them.
fn given_back(evaluated: &Evaluated) -> Evaluated {
    let limit = *evaluated.state.limit();
    let remaining = evaluated
        .state
        .remaining()
        .saturating_add(evaluated.asked)
        .min(limit.count());
    // Whole again: nothing to wait for, as a read of an untouched counter says.
    let reset = if remaining >= limit.count() {
        std::time::Duration::ZERO
    } else {
        evaluated.state.reset_after()
    };
    Evaluated {
        state: LimitState::allowed(limit, remaining, reset),
        asked: 0,
        cached: false,
        always: false,
        at_us: 0,
    }
}

//! The store calls of one request: its counters in as few atomic checks as their stores and
//! hash tags allow, within one deadline, through the circuit breakers.
//!
//! Every counter of one store and one hash tag goes into one check (one `Policy` of their
//! limits, each limit under its counter's key: [`Key::with_named_limit_keys`], each charged
//! its descriptor's hits: [`LimitCosts`](crate::store::LimitCosts)), so the common request
//! under [`HashTag::Domain`](super::HashTag::Domain), whatever its descriptors' `hits_addend`,
//! is one atomic store call: all charged or none, never charged and refunded. (A store
//! without `LimitCosts` gets a check per cost.) A check holds at most
//! [`MAX_LIMITS`](crate::policy::MAX_LIMITS) limits, distinct counters and one sliding log;
//! more, or counters of different stores (the per-second one) or hash tags
//! ([`HashTag::Descriptor`](super::HashTag::Descriptor): one per descriptor, so one Cluster
//! slot each) are further checks. Checks of one tag (a lane) are made one after the other,
//! the lanes at once (joined in this task): the first denial anywhere starts no further
//! check, and the checks admitted, in any lane, are refunded (on a store with
//! [`Refunds`](crate::store::Refunds)), so a rejected request charges nothing once the
//! refunds land, about a round trip later. Check-only descriptors (`hits_addend` 0) are reads
//! of cost 0, made first, at once. Quota-mode and shadow-mode descriptors are checked on their
//! own, after the enforced ones: their being over must not stop the others' charge.

use std::sync::Arc;
use std::time::{Instant, UNIX_EPOCH};

use smallvec::SmallVec;

use super::home::{Home, pick};
use super::lanes::{Group, Step, groups, lanes};
use super::plan::{Counter, Mode, Plan, Resolved};
use crate::decision::{Decision, DecisionSource, LimitState};
use crate::engine::Engine;
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::{Commit, MemoryStore, Refund, Store};

/// The policy name of every RLS check (the counters' keys tell them apart).
pub(crate) const POLICY: &str = "rls";

/// What the store said of one counter, and the cost it was asked for.
#[derive(Debug, Clone)]
pub(super) struct Evaluated {
    pub(super) state: LimitState,
    pub(super) asked: u64,
    /// Answered by the deny cache, without a store call.
    pub(super) cached: bool,
    /// Answered where every cost lands ([`Commit::Always`]): the state's verdict is the
    /// counter's, a check of nothing included.
    pub(super) always: bool,
    /// The store's time of its answer (Unix µs); 0 for an answer the store did not make
    /// now (the deny cache's, a refund's, a failure mode's).
    pub(super) at_us: u64,
}

/// Whether a counter is over its limit: refused its cost, or, asked for nothing (a
/// check-only descriptor, or one left uncharged because the request was refused) in the
/// all-or-none mode, without the units its own cost (at least 1) needs: refused hits are not
/// counted there, so "over" for a check means one more unit would be refused. Where every
/// cost lands, the store's verdict (a check of nothing is over once the counter is past its
/// limit, as the Go service's `OVER_LIMIT` when the count is past it).
pub(super) fn is_over(counter: &Counter, evaluated: Option<&Evaluated>) -> bool {
    match (counter.limit, evaluated) {
        (None, _) => true,
        (Some(_), Some(e)) if e.asked == 0 && !e.always => {
            !e.state.is_allowed() || e.state.remaining() < counter.cost.max(1)
        }
        (Some(_), Some(e)) => !e.state.is_allowed(),
        (Some(_), None) => false,
    }
}

/// A check the store admitted with a cost, kept to refund if the request is refused.
pub(super) struct Charged {
    /// The store that charged it.
    pub(super) home: Home,
    /// The counters it charged.
    pub(super) members: SmallVec<[usize; 4]>,
    pub(super) descriptor: Option<usize>,
    pub(super) policy: Policy,
    pub(super) key: Key,
    pub(super) decision: Decision,
    /// Each member's cost, in the order of `members`.
    pub(super) costs: SmallVec<[u64; 4]>,
}

/// The deny cache's rule for every counter (a counter's key names its domain).
pub(super) const RULE: usize = 0;

/// Where a request's checks go.
#[derive(Clone, Copy)]
pub(super) enum Via<'a> {
    /// The engine: its deny cache, the breakers, the store, until the request's deadline;
    /// with the local fallback to mirror admissions into (its store and the servers sharing
    /// the limits) in local failure mode. Counters of unit `second` go to `per_second`'s
    /// store when there is one.
    Engine {
        engine: &'a Engine,
        per_second: Option<&'a Engine>,
        until: tokio::time::Instant,
        mirror: Option<(&'a MemoryStore, u32)>,
    },
    /// The local fallback: this server's share of each limit (counts divided by the servers),
    /// in memory.
    Local(&'a MemoryStore, u32),
}

/// The checks of one request.
pub(super) struct Runner<'a> {
    pub(super) via: Via<'a>,
    /// How the request's hits commit: every one landing (the Go service's default), or all
    /// or none.
    pub(super) commit: Commit,
}

impl Runner<'_> {
    /// Evaluates every counter of `plan`; `None` for the zero limits (never asked).
    pub(super) async fn run(&self, plan: &Plan) -> Result<Vec<Option<Evaluated>>, StoreError> {
        if self.always() {
            return self.run_always(plan).await;
        }
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
                        self.mirror(&charge);
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

    /// Whether every hit lands: [`Commit::Always`], on stores that check a cost per limit
    /// (on another, all or none).
    pub(super) fn always(&self) -> bool {
        self.commit == Commit::Always && self.mixed()
    }

    /// Every counter charged its hits, whatever the others and its own limit say, in one
    /// atomic check per store and hash tag, all at once: nothing to stop, nothing to refund.
    /// Quota- and shadow-mode descriptors too (their verdict counts differently, not their
    /// charge), as the Go service increments every descriptor. A counter the deny cache knows
    /// over is answered from it and not charged, as the Go service's local cache skips the
    /// `INCRBY` of a key it holds over the limit.
    async fn run_always(&self, plan: &Plan) -> Result<Vec<Option<Evaluated>>, StoreError> {
        let counters = &plan.counters;
        let mut results: Vec<Option<Evaluated>> = vec![None; counters.len()];
        self.cached(plan, &mut results);
        let members =
            (0..counters.len()).filter(|&c| counters[c].limit.is_some() && results[c].is_none());
        let checks = groups(counters, self.homes(), members, |c| counters[c].cost, true);
        self.read(plan, &checks, &mut results).await?;
        Ok(results)
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
            refused = self
                .charge(
                    plan,
                    lanes(counters, homes, steps),
                    true,
                    &mut results,
                    charged,
                )
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
            self.charge(
                plan,
                lanes(counters, homes, steps.into_iter()),
                false,
                &mut results,
                charged,
            )
            .await?;
        }
        // What the refusal left unasked is read, for its status.
        let unasked = (0..counters.len()).filter(|&c| live(&counters[c]) && results[c].is_none());
        let unasked = groups(counters, homes, unasked, |_| 0, mixed);
        self.read(plan, &unasked, &mut results).await?;
        Ok((results, refused))
    }

    /// One atomic check of `group`'s counters.
    pub(super) async fn check(
        &self,
        plan: &Plan,
        group: &Group,
    ) -> Result<(Decision, Policy, Key), StoreError> {
        let counters = &plan.counters;
        // A counter checked alone: its rule's policy, made with the configuration.
        let alone = match &group.members[..] {
            [only] => counters[*only].policy.as_ref(),
            _ => None,
        };
        let policy = match alone {
            Some(policy) => policy.clone(),
            None => Policy::new(
                POLICY,
                group.members.iter().filter_map(|&c| counters[c].limit),
            )?,
        };
        let key = counters[group.lead]
            .tag
            .clone()
            .with_named_limit_keys(group.members.iter().map(|&c| counters[c].own.clone()));
        let home = self.homes().of(&counters[group.lead]);
        let always = self.always();
        let (costs, commit) = if always {
            (&group.costs[..], Commit::Always)
        } else {
            (one_or_each(&group.costs), Commit::AllOrNone)
        };
        let decision = match self.via {
            Via::Engine {
                engine,
                per_second,
                until,
                mirror,
            } => {
                let engine = pick(engine, per_second, home);
                let (asked, stamp) = (Instant::now(), engine.versions());
                let decision = engine.call(&policy, &key, (costs, commit), until).await?;
                if always {
                    // Every call charges: its denials hold for any cost, a check of nothing
                    // included, until the debt is paid.
                    remember(engine, plan, group, (asked, stamp), &decision, true);
                    if let Some((store, instances)) = mirror {
                        let scaled = policy.scaled(instances);
                        let _ = check_in_memory(store, &scaled, &key, (costs, commit));
                    }
                } else if group.charges() && !decision.is_allowed() {
                    remember(engine, plan, group, (asked, stamp), &decision, false);
                }
                decision
            }
            Via::Local(store, instances) => {
                let policy = policy.scaled(instances);
                check_in_memory(store, &policy, &key, (costs, commit))?
                    .with_source(DecisionSource::Local)
            }
        };
        Ok((decision, policy, key))
    }

    /// Whether counters of different costs can be one check: every store of the request
    /// checks a cost per limit ([`LimitCosts`](crate::store::LimitCosts)), as the memory and
    /// Redis stores do. Else each cost is a check of its own (charged one after the other,
    /// refunded if a later one refuses).
    fn mixed(&self) -> bool {
        match self.via {
            Via::Engine {
                engine, per_second, ..
            } => [Some(engine), per_second]
                .into_iter()
                .flatten()
                .all(|e| e.store().limit_costs().is_some()),
            Via::Local(..) => true,
        }
    }

    /// The counters the deny cache knows over, for the units they would charge (a check of
    /// nothing asks whether one unit more would pass): answered as the store would.
    fn cached(&self, plan: &Plan, results: &mut [Option<Evaluated>]) {
        let homes = self.homes();
        for (c, counter) in plan.counters.iter().enumerate() {
            if counter.limit.is_none() {
                continue;
            }
            let Some(engine) = self.engine(homes.of(counter)) else {
                return;
            };
            // Where every cost lands a denial holds for any cost; else for the units the
            // counter would charge, at least one.
            let always = self.always();
            let cost = if always {
                counter.cost
            } else {
                counter.cost.max(1)
            };
            if let Some(denial) = engine.cached_denial(RULE, &counter.own, cost)
                && let Some(state) = denial.limits().first()
            {
                results[c] = Some(Evaluated {
                    state: state.clone(),
                    asked: cost,
                    cached: true,
                    always,
                    at_us: 0,
                });
            }
        }
    }

    /// Charges the local fallback with what the store admitted through this server (its
    /// share of each limit), so that a failing store does not open a second budget here.
    fn mirror(&self, charge: &Charged) {
        if let Via::Engine {
            mirror: Some((store, instances)),
            ..
        } = self.via
        {
            let policy = charge.policy.scaled(instances);
            let costs = (one_or_each(&charge.costs), Commit::AllOrNone);
            let _ = check_in_memory(store, &policy, &charge.key, costs);
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
        let store: Arc<dyn Store> = match self.via {
            Via::Engine {
                engine, per_second, ..
            } => Arc::clone(pick(engine, per_second, charge.home).store()),
            Via::Local(store, _) => Arc::new(store.clone()),
        };
        if store.refunds().is_none() {
            return false;
        }
        let scale = match self.via {
            Via::Local(_, instances) => Some(instances),
            Via::Engine { .. } => None,
        };
        tokio::spawn(async move {
            for (policy, key, refund) in refunds {
                let policy = match scale {
                    Some(instances) => policy.scaled(instances),
                    None => policy,
                };
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

/// `costs`, or its one cost when every counter has it: a check of one cost for every limit.
fn one_or_each(costs: &[u64]) -> &[u64] {
    match costs.split_first() {
        Some((first, rest)) if rest.iter().all(|c| c == first) => &costs[..1],
        _ => costs,
    }
}

/// `costs` (one for every limit, or one each; one each under [`Commit::Always`]) of `policy`
/// for `key`, checked in `store`.
fn check_in_memory(
    store: &MemoryStore,
    policy: &Policy,
    key: &Key,
    (costs, commit): (&[u64], Commit),
) -> Result<Decision, StoreError> {
    match (costs, commit) {
        ([cost], Commit::AllOrNone) => Ok(store.check_now(policy, key, *cost)),
        (each, commit) => store.check_costs_now(policy, key, each, commit),
    }
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
            let at_us = whole
                .evaluated_at()
                .duration_since(UNIX_EPOCH)
                .ok()
                .and_then(|d| u64::try_from(d.as_micros()).ok())?;
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

/// Caches each counter `decision` denied, on its own: a counter denied its cost stays denied
/// it until its retry time, whatever other counters (of whatever costs) shared the check.
/// `always`: every cost landed, and a denial's retry is when the counter's debt is paid, so
/// it holds for any cost (it is cached for a cost of 0).
fn remember(
    engine: &Engine,
    plan: &Plan,
    group: &Group,
    asked: (Instant, crate::engine::deny_cache::Stamp),
    decision: &Decision,
    always: bool,
) {
    let now_us = decision
        .evaluated_at()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    for ((&c, &cost), state) in group
        .members
        .iter()
        .zip(&group.costs)
        .zip(decision.limits())
    {
        if state.is_allowed() || (cost == 0 && !always) {
            continue;
        }
        let cost = if always { 0 } else { cost };
        // Under the decision's source: the deny cache keeps only the store's exact denials
        // (not a local-first store's probabilistic ones).
        let alone = Decision::from_states(
            decision.policy_arc(),
            now_us,
            std::iter::once(state.clone()).collect(),
        )
        .with_source(decision.source());
        engine.remember(RULE, &plan.counters[c].own, cost, asked, &alone);
    }
}

/// The counters of descriptor `d`.
fn counters_of(plan: &Plan, d: usize) -> impl Iterator<Item = usize> + use<> {
    match plan.descriptors.get(d) {
        Some(Resolved::Limited { first, len, .. }) => *first..first + len,
        _ => 0..0,
    }
}

#[cfg(test)]
mod tests;

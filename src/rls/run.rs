//! The store calls of one request: its counters in as few atomic checks as their stores and
//! hash tags allow, within one deadline, through the engine (its deny cache, breakers, call
//! budget; the domain's rule).
//!
//! Every counter of one store and one hash tag goes into one check (one `Policy` of their
//! limits, each limit under its counter's key: [`Key::with_named_limit_keys`], each charged
//! its descriptor's hits: [`LimitCosts`](crate::store::LimitCosts)), so the common request
//! under [`HashTag::Domain`](super::HashTag::Domain), whatever its descriptors' `hits_addend`,
//! is one atomic store call. (A store without `LimitCosts` gets a check per cost.) A check
//! holds at most [`MAX_LIMITS`](crate::policy::MAX_LIMITS) limits, distinct counters and one
//! sliding log; more, or counters of different stores (the per-second one: `home.rs`) or hash
//! tags ([`HashTag::Descriptor`](super::HashTag::Descriptor): one per descriptor, so one
//! Cluster slot each) are further checks.
//!
//! Where every hit lands ([`Commit::Always`], the default) every check is made at once and
//! nothing is refunded (here). All or none (`all_or_none.rs`): checks of one tag (a lane) are
//! made one after the other, the lanes at once, the first denial anywhere starts no further
//! check, and the checks admitted are refunded.

mod all_or_none;
mod home;
mod join;

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use smallvec::SmallVec;

#[cfg(feature = "admin")]
pub(super) use home::Home;
pub(super) use home::Homes;

use super::plan::{Counter, Plan, Resolved};
use crate::decision::{Decision, LimitState};
use crate::engine::{Engine, LocalShare, Stamp};
use crate::error::StoreError;
use crate::key::Key;
use crate::limit::Algorithm;
use crate::policy::{MAX_LIMITS, Policy};
use crate::store::Commit;

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

/// Where a request's checks go.
#[derive(Clone, Copy)]
pub(super) enum Via<'a> {
    /// The engine, until the request's deadline: its deny cache, the breakers, the call
    /// budget, the store; the domain's rule mirrors admissions into the local fallback when
    /// its failure mode is local. Counters of unit `second` go to `per_second`'s store when
    /// there is one.
    Engine {
        engine: &'a Engine,
        per_second: Option<&'a Engine>,
        until: tokio::time::Instant,
    },
    /// The engine's local fallback: this server's share of each limit, in memory.
    Local(LocalShare<'a>),
}

/// The checks of one request.
pub(super) struct Runner<'a> {
    pub(super) via: Via<'a>,
    /// How the request's hits commit: every one landing (the Go service's default), or all
    /// or none.
    pub(super) commit: Commit,
}

/// One check: counters (indexes into the plan) of one hash tag, each with its cost (one cost
/// for all, unless the store checks a cost per limit: [`LimitCosts`](crate::store::LimitCosts)).
#[derive(Debug)]
pub(super) struct Group {
    pub(super) members: SmallVec<[usize; 4]>,
    /// Each member's cost, in the order of `members`.
    pub(super) costs: SmallVec<[u64; 4]>,
    /// Its first member, whose hash tag every member has.
    pub(super) lead: usize,
}

impl Group {
    /// Whether the check charges anything (a read charges nothing).
    fn charges(&self) -> bool {
        self.costs.iter().any(|&c| c > 0)
    }
}

impl Runner<'_> {
    /// Evaluates every counter of `plan`; `None` for the zero limits (never asked).
    pub(super) async fn run(&self, plan: &Plan) -> Result<Vec<Option<Evaluated>>, StoreError> {
        if self.always() {
            return self.run_always(plan).await;
        }
        self.run_all_or_none(plan).await
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

    /// Checks `groups` all at once: reads (checks of nothing), or, where every hit lands
    /// ([`Runner::always`]), every check of the request.
    async fn read(
        &self,
        plan: &Plan,
        groups: &[Group],
        results: &mut [Option<Evaluated>],
    ) -> Result<(), StoreError> {
        let mut record = |group: &Group, decision: &Decision| {
            for (c, evaluated) in states(group, decision, self.always()) {
                results[c] = Some(evaluated);
            }
        };
        match groups {
            // Most requests read nothing: no futures to make and move.
            [] => {}
            // The common request, one check: awaited in place.
            [group] => record(group, &self.check(plan, group).await?.0),
            _ => {
                let checks = join::join_all(groups.iter().map(|g| self.check(plan, g)).collect());
                for (group, checked) in groups.iter().zip(checks.await) {
                    record(group, &checked?.0);
                }
            }
        }
        Ok(())
    }

    /// One atomic check of `group`'s counters.
    async fn check(
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
        let always = self.always();
        let (costs, commit) = if always {
            (&group.costs[..], Commit::Always)
        } else {
            (one_or_each(&group.costs), Commit::AllOrNone)
        };
        match self.via {
            Via::Engine {
                engine,
                per_second,
                until,
            } => {
                let engine = home::pick(engine, per_second, self.homes().of(&counters[group.lead]));
                let (asked, stamp) = (Instant::now(), engine.versions());
                let costs = (costs, commit);
                let decision = engine.call(plan.rule, &policy, &key, costs, until).await?;
                // Every call charges where every cost lands: its denials hold for any cost, a
                // check of nothing included, until the debt is paid.
                if always || (group.charges() && !decision.is_allowed()) {
                    remember(engine, plan, group, (asked, stamp), &decision, always);
                }
                Ok((decision, policy, key))
            }
            Via::Local(share) => {
                let (decision, policy) = share.check(&policy, &key, (costs, commit))?;
                Ok((decision, policy, key))
            }
        }
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
                .all(|e| (**e.store()).limit_costs().is_some()),
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
            if let Some(denial) = engine.cached_denial(plan.rule, &counter.own, cost)
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
}

/// `members` in checks: each of one store and one hash tag (one Cluster slot: one call to one
/// node), of one cost unless `mixed` (the stores check a cost per limit, so counters of
/// different costs are one atomic check), at most `MAX_LIMITS` limits, distinct counters and
/// at most one limit of a per-key algorithm (sliding log). Limits are ordered by algorithm
/// within a check, so a store that compiles a script per mix of algorithms sees few mixes.
/// Most requests make one check: it is kept in place, not allocated.
fn groups(
    counters: &[Counter],
    homes: Homes,
    members: impl Iterator<Item = usize>,
    cost: impl Fn(usize) -> u64,
    mixed: bool,
) -> SmallVec<[Group; 1]> {
    let per_key = |c: usize| {
        counters[c]
            .limit
            .is_some_and(|l| l.algorithm() == Algorithm::SlidingLog)
    };
    let mut groups: SmallVec<[Group; 1]> = SmallVec::new();
    for c in members {
        let fits = |g: &Group| {
            (mixed || cost(g.lead) == cost(c))
                && counters[g.lead].tag == counters[c].tag
                && homes.of(&counters[g.lead]) == homes.of(&counters[c])
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
                costs: SmallVec::new(),
                lead: c,
            }),
        }
    }
    for group in &mut groups {
        group
            .members
            .sort_by_key(|&c| counters[c].limit.map(|l| l.algorithm() as usize));
        group.costs = group.members.iter().map(|&c| cost(c)).collect();
    }
    groups
}

/// Each counter of `group` and its state in `decision` (`always`: where every cost lands).
fn states<'a>(
    group: &'a Group,
    decision: &'a Decision,
    always: bool,
) -> impl Iterator<Item = (usize, Evaluated)> + 'a {
    let at_us = micros(decision.evaluated_at());
    group
        .members
        .iter()
        .zip(&group.costs)
        .zip(decision.limits())
        .map(move |((&c, &asked), state)| {
            let state = state.clone();
            (
                c,
                Evaluated {
                    state,
                    asked,
                    cached: false,
                    always,
                    at_us,
                },
            )
        })
}

/// `costs`, or its one cost when every counter has it: a check of one cost for every limit.
fn one_or_each(costs: &[u64]) -> &[u64] {
    match costs.split_first() {
        Some((first, rest)) if rest.iter().all(|c| c == first) => &costs[..1],
        _ => costs,
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
    asked: (Instant, Stamp),
    decision: &Decision,
    always: bool,
) {
    let now_us = micros(decision.evaluated_at());
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
        engine.remember(plan.rule, &plan.counters[c].own, cost, asked, &alone);
    }
}

/// The counters of descriptor `d`.
fn counters_of(plan: &Plan, d: usize) -> impl Iterator<Item = usize> + use<> {
    match plan.descriptors.get(d) {
        Some(Resolved::Limited { first, len, .. }) => *first..first + len,
        _ => 0..0,
    }
}

/// `time` in Unix microseconds (0 before the epoch).
pub(super) fn micros(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_micros()).ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;

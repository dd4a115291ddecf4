//! How a request's counters become checks (one store call each) and lanes (the checks of one
//! store and one hash tag, one Cluster slot, made one after the other), and the lanes run at
//! once, joined in the request's task: one round trip for a request spread over several shards,
//! or over the main store and the per-second one ([`Home`](super::home::Home)).

use std::sync::atomic::{AtomicBool, Ordering};

use smallvec::SmallVec;

use super::home::Homes;
use super::join::join_all;
use super::plan::{Counter, Plan};
use super::run::{Charged, Evaluated, Runner};
use crate::decision::Decision;
use crate::error::StoreError;
use crate::limit::Algorithm;
use crate::policy::MAX_LIMITS;

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
    pub(super) fn charges(&self) -> bool {
        self.costs.iter().any(|&c| c > 0)
    }
}

/// A check to charge, and the quota- or shadow-mode descriptor it is made for (`None`: the
/// enforced descriptors').
pub(super) struct Step {
    pub(super) group: Group,
    pub(super) descriptor: Option<usize>,
}

/// `steps` in lanes, one per store and hash tag (a Cluster slot), in order: a lane's checks
/// are made one after the other (the first refusal spares the rest their charge and refund),
/// the lanes at once. Under [`HashTag::Domain`](super::HashTag::Domain), one lane per store.
pub(super) fn lanes(
    counters: &[Counter],
    homes: Homes,
    steps: impl Iterator<Item = Step>,
) -> Vec<Vec<Step>> {
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

/// `members` in checks: each of one store and one hash tag (one Cluster slot: one call to one
/// node), of one cost unless `mixed` (the stores check a cost per limit, so counters of
/// different costs are one atomic check), at most `MAX_LIMITS` limits, distinct counters and
/// at most one limit of a per-key algorithm (sliding log). Limits are ordered by algorithm
/// within a check, so a store that compiles a script per mix of algorithms sees few mixes.
pub(super) fn groups(
    counters: &[Counter],
    homes: Homes,
    members: impl Iterator<Item = usize>,
    cost: impl Fn(usize) -> u64,
    mixed: bool,
) -> Vec<Group> {
    let per_key = |c: usize| {
        counters[c]
            .limit
            .is_some_and(|l| l.algorithm() == Algorithm::SlidingLog)
    };
    let mut groups: Vec<Group> = Vec::new();
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
    /// Checks `groups` all at once: reads (checks of nothing), or, where every hit lands
    /// ([`Runner::always`]), every check of the request.
    pub(super) async fn read(
        &self,
        plan: &Plan,
        groups: &[Group],
        results: &mut [Option<Evaluated>],
    ) -> Result<(), StoreError> {
        if groups.is_empty() {
            // Most requests read nothing: no futures to make and move.
            return Ok(());
        }
        let checks = join_all(groups.iter().map(|g| self.check(plan, g)).collect()).await;
        for (group, checked) in groups.iter().zip(checks) {
            let (decision, ..) = checked?;
            for (c, evaluated) in states(group, &decision, self.always()) {
                results[c] = Some(evaluated);
            }
        }
        Ok(())
    }

    /// Runs `lanes` at once, each its steps one after the other. `all_or_none` (the enforced
    /// descriptors): a refusal refuses the request, and starts no further check in any lane;
    /// else a refusal skips the rest of its descriptor's steps. An error starts no further
    /// check in any lane. Whatever the lanes charged goes into `charged` (to refund or keep),
    /// their states into `results`. True if a step was refused.
    pub(super) async fn charge(
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
}

/// Each counter of `group` and its state in `decision` (`always`: where every cost lands).
fn states<'a>(
    group: &'a Group,
    decision: &'a Decision,
    always: bool,
) -> impl Iterator<Item = (usize, Evaluated)> + 'a {
    let at_us = super::settle::micros(decision.evaluated_at());
    group
        .members
        .iter()
        .zip(&group.costs)
        .zip(decision.limits())
        .map(move |((&c, &asked), state)| {
            (
                c,
                Evaluated {
                    state: state.clone(),
                    asked,
                    cached: false,
                    always,
                    at_us,
                },
            )
        })
}

#[cfg(test)]
mod tests {
    use super::super::config::RlsConfig;
    use super::super::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
    use super::super::testing::{Flaky, request};
    use super::super::{HashTag, RateLimitService};
    use crate::store::{MemoryStore, Store};

    const CONFIG: &str = "
domain: d
descriptors:
  - {key: ip, rate_limit: {unit: day, requests_per_unit: 1}}
  - {key: path, rate_limit: {unit: day, requests_per_unit: 5}}
  - key: user
    rate_limits:
      - {unit: day, requests_per_unit: 5}
      - {unit: hour, requests_per_unit: 4}
";

    fn service(store: impl Store, tag: HashTag) -> RateLimitService {
        let config = RlsConfig::parse([("d.yaml", CONFIG)], false).unwrap();
        RateLimitService::builder(store)
            .config(config)
            .deny_cache(0)
            .hash_tag(tag)
            .commit(crate::store::Commit::AllOrNone)
            .build()
    }

    #[tokio::test]
    async fn a_check_per_domain_or_per_descriptor() {
        let three = request("d", &[&[("ip", "1")], &[("path", "/")], &[("user", "u")]]);
        for (tag, calls) in [(HashTag::Domain, 1), (HashTag::Descriptor, 3)] {
            let store = Flaky::default();
            let service = service(store.clone(), tag);
            let answer = service.should_rate_limit(three.clone()).await.unwrap();
            assert_eq!(answer.overall_code(), Code::Ok, "{tag}");
            let remaining: Vec<u32> = answer.statuses.iter().map(|s| s.limit_remaining).collect();
            assert_eq!(remaining, [0, 4, 3], "{tag}");
            // A descriptor's limits (`user`'s two) stay in one check.
            assert_eq!(store.calls(), calls, "{tag}");
        }
    }

    #[tokio::test]
    async fn a_refusal_refunds_the_other_descriptors_checks() {
        let store = MemoryStore::new();
        let service = service(store, HashTag::Descriptor);
        let ip = request("d", &[&[("ip", "1")]]);
        assert_eq!(
            service.should_rate_limit(ip).await.unwrap().overall_code(),
            Code::Ok
        );
        // `path` first: the memory store answers at once, and a refusal in the first lane
        // would start no check in the second.
        let both = request("d", &[&[("path", "/")], &[("ip", "1")]]);
        let refused = service.should_rate_limit(both).await.unwrap();
        assert_eq!(refused.overall_code(), Code::OverLimit);
        // As `path` stands once its charge is given back.
        assert_eq!(refused.statuses[0].limit_remaining, 5);
        let mut read = request("d", &[&[("path", "/")]]);
        read.descriptors[0].hits_addend = Some(0);
        let mut left = 0;
        // The refund is a task of its own: it lands after a few turns of this runtime.
        for _ in 0..1000 {
            tokio::task::yield_now().await;
            left = service
                .should_rate_limit(read.clone())
                .await
                .unwrap()
                .statuses[0]
                .limit_remaining;
            if left == 5 {
                break;
            }
        }
        assert_eq!(left, 5, "the refused request's charge on path stayed");
    }
}

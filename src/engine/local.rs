//! The in-memory decisions of a local failure mode and of lateness decided in memory: this
//! instance's share of every rule's limits.
//!
//! The fallback mirrors every admission the store makes for this instance (as far as its
//! share goes), so a decision made in memory when the store is late or down is charged against
//! what this instance already admitted through the store a moment before. Without the mirror,
//! a missed deadline would open a second, full budget on top of the store's; with it, a late
//! or failed store over-admits at most this instance's share, minus what it already admitted
//! in the period. A rule mirrors whenever the fallback may decide for it: always where
//! lateness is decided in memory ([`Late::InMemory`]), else under a local failure mode only.
//!
//! A rule of one policy has its share derived once; a keyed rule's calls bring their own
//! policies (an RLS domain's counters), scaled as they come ([`LocalShare`]).

use super::on_failure::OnFailure;
use super::shared::Late;
use crate::decision::{Decision, DecisionSource};
#[cfg(feature = "rls")]
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;
#[cfg(feature = "rls")]
use crate::store::Commit;
use crate::store::MemoryStore;

/// One rule's share.
struct Share {
    instances: u32,
    /// Whether the store's admissions are mirrored here.
    mirrors: bool,
    /// The rule's policy, its counts divided by the instances, and the same without its
    /// penalty box to mirror the store's admissions with (a unit past the share is the
    /// store's to judge, not a reason to box the key here); none for concurrency limits, whose
    /// mirrored lease would never be given back. Both none for a keyed rule.
    scaled: Option<(Policy, Option<Policy>)>,
}

/// The store and the scaled policies the local fallback decides with, derived from the
/// settings once (whatever order the builder set them in).
pub(crate) struct LocalFallback {
    store: MemoryStore,
    shares: Vec<Share>,
}

/// This instance's share in memory of a rule's limits: its policy's share, derived once, or
/// (a keyed rule) each policy a call brings, divided by the instances.
#[derive(Clone, Copy)]
pub(crate) struct LocalShare<'a> {
    store: &'a MemoryStore,
    #[cfg_attr(not(feature = "rls"), allow(dead_code))]
    instances: u32,
    /// The rule's policy at this share (none for a keyed rule).
    policy: Option<&'a Policy>,
}

impl LocalFallback {
    /// The fallback of rules with these policies (none: keyed) and failure modes, in `store`:
    /// each policy divided by the instances of a local mode (whole, in any other mode).
    pub(crate) fn new<'a>(
        store: MemoryStore,
        rules: impl Iterator<Item = (Option<&'a Policy>, OnFailure)>,
        late: Late,
    ) -> Self {
        let shares = rules
            .map(|(policy, mode)| {
                let instances = mode.instances();
                let scaled = policy.map(|policy| {
                    let scaled = policy.scaled(instances);
                    let mirrored = (!scaled.holds_leases())
                        .then(|| Policy::part(scaled.name_arc(), scaled.limits_arc()));
                    (scaled, mirrored)
                });
                Share {
                    instances,
                    mirrors: late == Late::InMemory || matches!(mode, OnFailure::Local { .. }),
                    scaled,
                }
            })
            .collect();
        LocalFallback { store, shares }
    }

    /// The store to decide in, and the scaled policy of rule `id`.
    pub(crate) fn get(&self, id: usize) -> Option<(&MemoryStore, &Policy)> {
        let (policy, _) = self.shares.get(id)?.scaled.as_ref()?;
        Some((&self.store, policy))
    }

    /// The store and the policy that mirror rule `id`'s admissions (none for a policy with a
    /// concurrency limit, or a rule that does not mirror).
    pub(crate) fn mirror_target(&self, id: usize) -> Option<(&MemoryStore, &Policy)> {
        match self.shares.get(id) {
            Some(Share {
                mirrors: true,
                scaled: Some((_, Some(policy))),
                ..
            }) => Some((&self.store, policy)),
            _ => None,
        }
    }

    /// Charges `cost` units for `key` under rule `id`: the store admitted them for this
    /// instance. Units past the share are not charged (the share is spent either way).
    pub(crate) fn mirror(&self, id: usize, key: &Key, cost: u64) {
        if let Some((store, policy)) = self.mirror_target(id) {
            store.mirror_now(policy, key, cost);
        }
    }

    /// The share of rule `id`.
    pub(crate) fn share(&self, id: usize) -> Option<LocalShare<'_>> {
        let share = self.shares.get(id)?;
        Some(LocalShare {
            store: &self.store,
            instances: share.instances,
            policy: share.scaled.as_ref().map(|(policy, _)| policy),
        })
    }

    #[cfg(feature = "rls")]
    /// Charges `costs` of `policy` for `key` under rule `id` at its share, if it mirrors: the
    /// store charged them for this instance (a keyed rule's call).
    pub(crate) fn mirror_costs(
        &self,
        id: usize,
        policy: &Policy,
        key: &Key,
        costs: (&[u64], Commit),
    ) {
        if let Some(share) = self.mirroring(id) {
            let _ = share.check(policy, key, costs);
        }
    }

    #[cfg(feature = "rls")]
    /// The share of rule `id` if the store's admissions are mirrored into it.
    pub(crate) fn mirroring(&self, id: usize) -> Option<LocalShare<'_>> {
        match self.shares.get(id) {
            Some(share) if share.mirrors => self.share(id),
            _ => None,
        }
    }
}

impl<'a> LocalShare<'a> {
    /// The memory it decides in.
    pub(crate) fn store(&self) -> &'a MemoryStore {
        self.store
    }

    /// The rule's own policy at this share (none for a keyed rule).
    pub(crate) fn policy(&self) -> Option<&'a Policy> {
        self.policy
    }

    /// `cost` units for `key` under the rule's own policy at this share, decided in memory
    /// (none for a keyed rule).
    pub(crate) fn decide(&self, key: &Key, cost: u64) -> Option<Decision> {
        let policy = self.policy?;
        Some(
            self.store
                .check_now(policy, key, cost)
                .with_source(DecisionSource::Local),
        )
    }

    #[cfg(feature = "rls")]
    /// `policy` at this share.
    pub(crate) fn scaled(&self, policy: &Policy) -> Policy {
        policy.scaled(self.instances)
    }

    #[cfg(feature = "rls")]
    /// `costs` (one for every limit, or one each; one each under [`Commit::Always`]) of
    /// `policy` at this share for `key`, decided in memory; and the policy at this share.
    pub(crate) fn check(
        &self,
        policy: &Policy,
        key: &Key,
        (costs, commit): (&[u64], Commit),
    ) -> Result<(Decision, Policy), StoreError> {
        let policy = self.scaled(policy);
        let decision = match (costs, commit) {
            ([cost], Commit::AllOrNone) => self.store.check_now(&policy, key, *cost),
            (each, commit) => self.store.check_costs_now(&policy, key, each, commit)?,
        };
        Ok((decision.with_source(DecisionSource::Local), policy))
    }
}

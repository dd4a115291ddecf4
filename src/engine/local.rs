//! The in-memory decisions of [`OnStoreError::Local`] and of the overflow past the bound on
//! store calls in flight: this instance's share of every policy.
//!
//! The fallback mirrors every admission the store makes for this instance (as far as its
//! share goes), so a decision made in memory when the store is late or down is charged against
//! what this instance already admitted through the store a moment before. Without the mirror,
//! a missed deadline would open a second, full budget on top of the store's; with it, a late
//! or failed store over-admits at most this instance's share, minus what it already admitted
//! in the period.

use crate::failure::OnStoreError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::MemoryStore;

/// The store and the scaled policies the local fallback decides with, derived from the
/// settings once (whatever order the builder set them in).
pub(crate) struct LocalFallback {
    store: MemoryStore,
    /// Each rule's policy, its counts divided by the instances, indexed by rule id, and the
    /// same without its penalty box to mirror the store's admissions with (a unit past the
    /// share is the store's to judge, not a reason to box the key here); none for concurrency
    /// limits, whose mirrored lease would never be given back.
    policies: Vec<(Policy, Option<Policy>)>,
}

impl LocalFallback {
    /// The fallback of rules with these policies and failure modes, in `store`: each policy
    /// divided by the instances of [`OnStoreError::Local`] (whole, in any other mode).
    pub(crate) fn new<'a>(
        store: MemoryStore,
        rules: impl Iterator<Item = (&'a Policy, OnStoreError)>,
    ) -> Self {
        LocalFallback {
            store,
            policies: rules
                .map(|(policy, mode)| {
                    let instances = match mode {
                        OnStoreError::Local { instances } => instances,
                        _ => 1,
                    };
                    let scaled = policy.scaled(instances);
                    let mirrored = (!crate::store::holds_leases(&scaled))
                        .then(|| Policy::part(scaled.name_arc(), scaled.limits_arc()));
                    (scaled, mirrored)
                })
                .collect(),
        }
    }

    /// The store to decide in, and the scaled policy of rule `id`.
    pub(crate) fn get(&self, id: usize) -> Option<(&MemoryStore, &Policy)> {
        let (policy, _) = self.policies.get(id)?;
        Some((&self.store, policy))
    }

    /// The store and the policy that mirror rule `id`'s admissions (none for a policy with a
    /// concurrency limit).
    pub(crate) fn mirror_target(&self, id: usize) -> Option<(&MemoryStore, &Policy)> {
        match self.policies.get(id) {
            Some((_, Some(policy))) => Some((&self.store, policy)),
            _ => None,
        }
    }

    /// Charges `cost` units for `key` under rule `id`: the store admitted them for this
    /// instance. Units past the share are not charged (the share is spent either way).
    pub(crate) fn mirror(&self, id: usize, key: &Key, cost: u64) {
        if let Some((_, Some(policy))) = self.policies.get(id) {
            self.store.mirror_now(policy, key, cost);
        }
    }
}

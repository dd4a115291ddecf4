//! The in-memory decisions of [`OnStoreError::Local`] and of the overflow past the bound on
//! store calls in flight: this instance's share of every policy.

use super::config::Config;
use super::on_store_error::OnStoreError;
use crate::policy::Policy;
use crate::store::MemoryStore;

/// The store and the scaled policies the local fallback decides with, derived from the
/// settings once (whatever order the builder set them in).
pub(crate) struct LocalFallback {
    store: MemoryStore,
    /// Each rule's policy, its counts divided by the instances, indexed by rule id.
    policies: Vec<Policy>,
}

impl LocalFallback {
    /// The fallback of `config`: each policy divided by the instances of
    /// [`OnStoreError::Local`] (whole, in any other mode).
    pub(crate) fn of(config: &Config) -> Self {
        let instances = match config.on_store_error {
            OnStoreError::Local { instances } => instances,
            _ => 1,
        };
        LocalFallback {
            store: config.local_store.clone(),
            policies: config
                .rules()
                .map(|rule| rule.policy.scaled(instances))
                .collect(),
        }
    }

    /// The store to decide in, and the scaled policy of rule `id`.
    pub(crate) fn get(&self, id: usize) -> Option<(&MemoryStore, &Policy)> {
        Some((&self.store, self.policies.get(id)?))
    }
}

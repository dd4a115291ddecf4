//! The in-memory fallback of [`OnStoreError::Local`]: this instance's share of every policy.

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
    /// The fallback `config` asks for, if it asks for one.
    pub(crate) fn of(config: &Config) -> Option<Self> {
        let OnStoreError::Local { instances } = config.on_store_error else {
            return None;
        };
        Some(LocalFallback {
            store: config.local_store.clone().unwrap_or_default(),
            policies: config
                .rules()
                .map(|rule| rule.policy.scaled(instances))
                .collect(),
        })
    }

    /// The store to decide in, and the scaled policy of rule `id`.
    pub(crate) fn get(&self, id: usize) -> Option<(&MemoryStore, &Policy)> {
        Some((&self.store, self.policies.get(id)?))
    }
}

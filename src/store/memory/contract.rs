//! How a [`MemoryStore`] keeps the [`Store`] contract, and its optional powers: reading and
//! resetting keys ([`Admin`]), overrides ([`Overrides`]), refunds ([`Refunds`]), a cost per
//! limit ([`LimitCosts`]). Each answers at once: the futures are ready.

use super::MemoryStore;
use crate::error::StoreError;
use crate::key::Key;
use crate::lease::Lease;
use crate::policy::Policy;
use crate::store::{
    Admin, Check, Commit, KeyState, LimitCosts, Override, Overrides, Refund, Refunds, Reservations,
    Store, StoreFuture,
};

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("max_keys", &self.inner.entries.max_keys())
            .finish_non_exhaustive()
    }
}

impl Store for MemoryStore {
    fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        Check::Ready(Ok(self.check_now(policy, key, cost)))
    }

    fn charge(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        Check::Ready(Ok(self.charge_now(policy, key, cost)))
    }

    fn release(&self, policy: &Policy, key: &Key, lease: Lease) -> StoreFuture<()> {
        self.release_now(policy, key, lease);
        Box::pin(std::future::ready(Ok(())))
    }

    fn kind(&self) -> &'static str {
        "memory"
    }

    fn admin(&self) -> Option<&dyn Admin> {
        Some(self)
    }

    fn overrides(&self) -> Option<&dyn Overrides> {
        Some(self)
    }

    fn refunds(&self) -> Option<&dyn Refunds> {
        Some(self)
    }

    fn reservations(&self) -> Option<&dyn Reservations> {
        Some(self)
    }

    fn limit_costs(&self) -> Option<&dyn LimitCosts> {
        Some(self)
    }
}

impl LimitCosts for MemoryStore {
    fn check_costs(&self, policy: &Policy, key: &Key, costs: &[u64], commit: Commit) -> Check {
        Check::Ready(self.check_costs_now(policy, key, costs, commit))
    }
}

impl Admin for MemoryStore {
    fn inspect(&self, policy: &Policy, key: &Key) -> StoreFuture<KeyState> {
        Box::pin(std::future::ready(Ok(self.inspect_now(policy, key))))
    }

    fn reset(&self, policy: &Policy, key: &Key) -> StoreFuture<()> {
        self.reset_now(policy, key);
        self.inner.resets.record(policy.name(), key);
        Box::pin(std::future::ready(Ok(())))
    }

    fn resets_version(&self) -> u64 {
        self.inner.resets.version()
    }

    fn reset_since(&self, policy: &Policy, key: &Key, since: u64) -> bool {
        self.inner.resets.reset_since(since, policy.name(), key)
    }
}

impl Overrides for MemoryStore {
    fn set_override(&self, policy: &Policy, key: &Key, value: Override) -> StoreFuture<()> {
        let outcome = value
            .limits_for(policy)
            .map(|_| self.inner.overrides.set(policy.name(), key, value))
            .map_err(StoreError::from);
        Box::pin(std::future::ready(outcome))
    }

    fn get_override(&self, policy: &Policy, key: &Key) -> StoreFuture<Option<Override>> {
        let found = self.inner.overrides.get(policy.name(), key);
        Box::pin(std::future::ready(Ok(found)))
    }

    fn remove_override(&self, policy: &Policy, key: &Key) -> StoreFuture<bool> {
        let removed = self.inner.overrides.remove(policy.name(), key);
        Box::pin(std::future::ready(Ok(removed)))
    }

    fn overrides_version(&self) -> u64 {
        self.inner.overrides.version()
    }

    fn override_in_force(&self, policy: &str, key: &Key) -> Option<Override> {
        self.inner.overrides.get(policy, key)
    }
}

impl Refunds for MemoryStore {
    fn refund(&self, policy: &Policy, key: &Key, refund: Refund) -> StoreFuture<bool> {
        let given = self.refund_now(policy, key, refund);
        Box::pin(std::future::ready(Ok(given)))
    }
}

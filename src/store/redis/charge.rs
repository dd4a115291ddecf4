//! How a [`RedisStore`] charges ([`Store::charge`](crate::store::Store::charge)): one call of
//! the policy's charge script (`script/charge.rs`), on the key's connection (its slot in a
//! Cluster), never replayed, never batched. (Checks whose every cost lands,
//! [`Commit::Always`](crate::store::Commit::Always), are checks: the always script's calls
//! are batched as a check's, `mod.rs`.)

use std::sync::Arc;

use super::script::{charge_command, decode};
use super::{RedisStore, error::store_error, poll};
use crate::key::Key;
use crate::policy::Policy;
use crate::store::Check;

impl RedisStore {
    /// The charge of `cost` for `key` under `policy` (its override applied, read first as a
    /// check reads it), at the store's time.
    pub(crate) fn charge_call(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        if !self.inner.poll.loaded() {
            let store = self.clone();
            let (policy, key) = (policy.clone(), key.clone());
            return Check::pending(async move {
                poll::first_read(&store.inner).await?;
                store.charge_call(&policy, &key, cost).await
            });
        }
        let overridden = self.inner.overrides.effective(policy, key);
        let policy = overridden.unwrap_or_else(|| policy.clone());
        let command = charge_command(&self.inner.prefix, &policy, key, cost, self.clock);
        let inner = Arc::clone(&self.inner);
        Check::pending(async move {
            let reply: Vec<i64> = inner.backend.run(&command).await.map_err(store_error)?;
            decode(&policy, &reply)
        })
    }
}

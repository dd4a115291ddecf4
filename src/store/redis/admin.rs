//! Inspect and reset on Redis: one script call each, on the deployment's connection (in a
//! Cluster, routed to the key's slot like a check).

use std::sync::Arc;

use super::RedisStore;
use super::error::store_error;
use super::resets::publish_command;
use super::script::decode;
use super::script::peek::{peek_command, reset_command};
use super::script::refund_command;
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::{KeyState, Refund, StoreFuture};

impl RedisStore {
    /// What [`Admin::inspect`](crate::store::Admin::inspect) runs: the peek script, at the
    /// store's time.
    pub(super) fn peek(&self, policy: &Policy, key: &Key) -> StoreFuture<KeyState> {
        let inner = Arc::clone(&self.inner);
        let clock = self.clock;
        let (policy, key) = (policy.clone(), key.clone());
        Box::pin(async move {
            // Under the overrides in Redis, as a check would be.
            super::poll::first_read(&inner).await?;
            let overridden = inner.overrides.effective(&policy, &key);
            let policy = overridden.unwrap_or(policy);
            let command = peek_command(&inner.prefix, &policy, &key, clock);
            let reply: Vec<i64> = inner.backend.run(&command).await.map_err(store_error)?;
            decode(&policy, &reply).map(KeyState::from_uncommitted)
        })
    }

    /// What [`Admin::reset`](crate::store::Admin::reset) runs: one `DEL` of every state key,
    /// then the reset told to the other replicas (`resets.rs`), after the `DEL` so that a
    /// replica that reads it and asks again finds the state gone. A failure to tell them is
    /// the reset's error (reset again: it is idempotent), though the state is gone.
    pub(super) fn delete(&self, policy: &Policy, key: &Key) -> StoreFuture<()> {
        let command = reset_command(&self.inner.prefix, policy, key);
        let tell = publish_command(&self.inner.prefix, self.inner.origin, policy.name(), key);
        let inner = Arc::clone(&self.inner);
        let (name, key) = (policy.name_arc(), key.clone());
        Box::pin(async move {
            // The reset script answers `{ deleted }`.
            let reply: Vec<i64> = inner.backend.run(&command).await.map_err(store_error)?;
            if !matches!(reply[..], [deleted] if deleted >= 0) {
                return Err(StoreError::UnexpectedReply(format!("{reply:?} to DEL")));
            }
            inner.resets.record(&name, &key);
            let _n: i64 = inner.backend.run(&tell).await.map_err(store_error)?;
            Ok(())
        })
    }
}

impl RedisStore {
    /// What [`Refunds::refund`](crate::store::Refunds::refund) runs: the refund script, at the
    /// store's time.
    pub(super) fn give_back(
        &self,
        policy: &Policy,
        key: &Key,
        refund: &Refund,
    ) -> StoreFuture<bool> {
        let overridden = self.inner.overrides.effective(policy, key);
        let policy = overridden.as_ref().unwrap_or(policy);
        let command = refund_command(&self.inner.prefix, policy, key, refund, self.clock);
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            let given: i64 = inner.backend.run(&command).await.map_err(store_error)?;
            match given {
                0 | 1 => Ok(given == 1),
                other => Err(StoreError::UnexpectedReply(format!("{other} to a refund"))),
            }
        })
    }
}

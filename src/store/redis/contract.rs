//! How a [`RedisStore`] keeps the [`Store`] contract, and its optional powers: reading and
//! resetting keys ([`Admin`]), overrides kept in Redis ([`Overrides`]), refunds
//! ([`Refunds`]).

use std::sync::Arc;

use super::script::release_command;
use super::{RedisStore, backend, error::store_error, script, slot};
use crate::key::Key;
use crate::lease::Lease;
use crate::policy::Policy;
use crate::store::{
    Admin, Check, Commit, KeyState, LimitCosts, Override, Overrides, Refund, Refunds, Reservations,
    Store, StoreFuture,
};

impl Store for RedisStore {
    fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        self.check_one(policy, key, cost)
    }

    /// One call of the policy's charge script (`script/charge.rs`).
    fn charge(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        self.charge_call(policy, key, cost)
    }

    /// In a Cluster, the key's range of 128 hash slots (so a layer keeps a circuit breaker
    /// per shard, roughly); one domain otherwise.
    fn failure_domain(&self, _policy: &Policy, key: &Key) -> u16 {
        if matches!(self.inner.backend, backend::Backend::Cluster(_)) {
            slot::domain(key)
        } else {
            0
        }
    }

    /// One `ZREM` of the lease's member, routed like the key's checks (its hash slot in a
    /// Cluster; the current master behind Sentinels).
    fn release(&self, policy: &Policy, key: &Key, lease: Lease) -> StoreFuture<()> {
        let command = release_command(&self.inner.prefix, policy, key, lease);
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            let _removed: i64 = inner.backend.run(&command).await.map_err(store_error)?;
            Ok(())
        })
    }

    fn kind(&self) -> &'static str {
        "redis"
    }

    /// Loads the policy's scripts in the background, once per store: its check and batch,
    /// its charge, the variants with a cost per limit (check and batch), and the always
    /// variant's (check and batch, which the RLS runs on every call by default), so that no
    /// first call pays a `NOSCRIPT` and a reload (two more round trips).
    fn prepare(&self, policy: &Policy) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let one = script::script_for_policy(policy);
        let each = script::script_for_check(policy, true);
        // A concurrency limit is never charged whatever its state: no always variant.
        let always = (!crate::store::memory::holds_leases(policy))
            .then(|| script::script_for_always(policy));
        let fresh: Vec<&'static script::LuaScript> = [Some(one), Some(each), always]
            .into_iter()
            .flatten()
            .filter(|s| self.inner.prepared.insert(s))
            .collect();
        if fresh.is_empty() {
            return;
        }
        let inner = Arc::clone(&self.inner);
        runtime.spawn(async move {
            let mut scripts: Vec<&'static redis::Script> = Vec::new();
            for s in &fresh {
                scripts.extend([&s.script, &s.batch]);
                if std::ptr::eq(*s, one) {
                    scripts.push(s.charge());
                }
            }
            if let Err(err) = inner.backend.load(&scripts).await {
                // The first calls will load them on `NOSCRIPT` instead; a later layer may retry.
                tracing::debug!(%err, "loading a rate-limit script ahead failed");
                for s in fresh {
                    inner.prepared.remove(s);
                }
            }
        });
    }

    /// A `PING` on a connection of its own (standalone; the master the Sentinels name now),
    /// or routed to the master of the domain's slots in a Cluster.
    fn probe(&self, domain: u16) -> Option<StoreFuture<()>> {
        let inner = Arc::clone(&self.inner);
        Some(Box::pin(async move {
            inner.backend.probe(domain).await.map_err(store_error)
        }))
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

impl LimitCosts for RedisStore {
    /// One script call, as [`check`](Store::check) makes (batched alike), each limit's cost
    /// passed after its other arguments; with [`Commit::Always`], a call of the always script
    /// (`script/always.rs`), batched alike with the always checks of its signature.
    fn check_costs(&self, policy: &Policy, key: &Key, costs: &[u64], commit: Commit) -> Check {
        self.check_each(policy, key, costs, commit)
    }
}

impl Admin for RedisStore {
    fn inspect(&self, policy: &Policy, key: &Key) -> StoreFuture<KeyState> {
        self.peek(policy, key)
    }

    fn reset(&self, policy: &Policy, key: &Key) -> StoreFuture<()> {
        self.delete(policy, key)
    }

    /// Moves with each reset made through this store and each one made through another
    /// replica, read at this store's next poll.
    fn resets_version(&self) -> u64 {
        self.inner.resets.version()
    }

    fn reset_since(&self, policy: &Policy, key: &Key, since: u64) -> bool {
        self.inner.resets.reset_since(since, policy.name(), key)
    }
}

impl Overrides for RedisStore {
    fn set_override(&self, policy: &Policy, key: &Key, value: Override) -> StoreFuture<()> {
        self.write_override(policy, key, value)
    }

    fn get_override(&self, policy: &Policy, key: &Key) -> StoreFuture<Option<Override>> {
        self.read_override(policy, key)
    }

    fn remove_override(&self, policy: &Policy, key: &Key) -> StoreFuture<bool> {
        self.delete_override(policy, key)
    }

    fn overrides_version(&self) -> u64 {
        self.inner.overrides.version()
    }

    fn override_in_force(&self, policy: &str, key: &Key) -> Option<Override> {
        self.inner.overrides.get(policy, key)
    }

    /// Before the first successful poll: that read (`poll.rs`).
    fn read_overrides(&self) -> Option<StoreFuture<()>> {
        if self.overrides_loaded() {
            return None;
        }
        let inner = Arc::clone(&self.inner);
        Some(Box::pin(
            async move { super::poll::first_read(&inner).await },
        ))
    }
}

impl Refunds for RedisStore {
    fn refund(&self, policy: &Policy, key: &Key, refund: Refund) -> StoreFuture<bool> {
        self.give_back(policy, key, &refund)
    }
}

//! How a [`RedisStore`] keeps the [`Store`] contract, and its optional powers: reading and
//! resetting keys ([`Admin`]), overrides kept in Redis ([`Overrides`]), refunds
//! ([`Refunds`]); and the one call every check makes: `invoke`, queued for the batcher as its own
//! `EVALSHA`, its reply decoded.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use redis::RedisResult;

use super::batcher::{Batcher, Queued};
use super::script::{CheckArgs, decode, release_command, script_for_always, script_for_check};
use super::{RedisStore, abandoned, backend, error::store_error, poll, script, slot};
use crate::decision::Decision;
use crate::error::StoreError;
use crate::key::Key;
use crate::lease::Lease;
use crate::policy::Policy;
use crate::store::{
    Admin, Check, Commit, KeyState, LimitCosts, Override, Overrides, Refund, Refunds, Reservations,
    Store, StoreFuture,
};

impl Store for RedisStore {
    fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        self.invoke(policy, key, Costs::One(cost))
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
        let always = (!policy.holds_leases()).then(|| script::script_for_always(policy));
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
        if let Err(error) = crate::store::validate_costs(policy, costs, commit) {
            return Check::Ready(Err(error));
        }
        let costs = match commit {
            Commit::Always => Costs::Always(costs.into()),
            _ => Costs::Each(costs.into()),
        };
        self.invoke(policy, key, costs)
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

// A check, the one call every decision on Redis makes.
impl RedisStore {
    /// A check of `costs`: queued for the batcher as its own `EVALSHA`, its reply decoded.
    fn invoke(&self, policy: &Policy, key: &Key, costs: Costs) -> Check {
        if !self.inner.poll.loaded() {
            // Decided under the overrides in Redis, which are read first (`poll.rs`).
            let store = self.clone();
            let (policy, key) = (policy.clone(), key.clone());
            return Check::pending(async move {
                poll::first_read(&store.inner).await?;
                store.invoke(&policy, &key, costs).await
            });
        }
        let overridden = self.inner.overrides.effective(policy, key);
        let policy = overridden.as_ref().unwrap_or(policy);
        // A concurrency limit's lease id: the script's last argument (`lua/concurrency.lua`).
        let lease = policy.holds_leases().then(|| self.inner.leases.next());
        let (script, always) = match &costs {
            Costs::One(_) => (script_for_check(policy, false), false),
            Costs::Each(_) => (script_for_check(policy, true), false),
            Costs::Always(_) => (script_for_always(policy), true),
        };
        let (cost, costs) = match costs {
            Costs::One(cost) => (cost, None),
            Costs::Each(each) | Costs::Always(each) => {
                (crate::store::largest_cost(&each), Some(each))
            }
        };
        let check = CheckArgs {
            policy: policy.clone(),
            key: key.clone(),
            cost,
            costs,
            clock: self.clock,
            lease: lease.map(|lease| lease.member()),
            always,
        };
        let queued = Queued {
            check,
            script,
            slot: match self.inner.backend {
                backend::Backend::Cluster(_) => slot::slot(key.hash_tag().as_bytes()),
                _ => 0,
            },
        };
        let call = Box::pin(Decoded {
            run: Batcher::run(Arc::clone(&self.inner.batcher), queued),
            policy: policy.clone(),
            lease,
            cost,
        });
        match lease {
            None => Check::Pending(call),
            Some(_) => Check::pending(abandoned::Leased::new(
                call,
                Arc::clone(&self.inner),
                policy.clone(),
                key.clone(),
            )),
        }
    }
}

pin_project! {
    /// A check's call and its reply decoded: the batcher's future and what decoding needs,
    /// side by side. An `async` block awaiting the call would keep a second copy of the
    /// queued check, the one it moves into the call; every check allocates this future, and
    /// under 1 032 bytes (800 in a standalone store) it takes glibc's thread cache instead of
    /// the arena's slow path.
    struct Decoded<R> {
        #[pin]
        run: R,
        policy: Policy,
        lease: Option<Lease>,
        cost: u64,
    }
}

impl<R: Future<Output = RedisResult<Vec<i64>>>> Future for Decoded<R> {
    type Output = Result<Decision, StoreError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let reply = ready!(this.run.poll(cx)).map_err(store_error)?;
        let decision = decode(this.policy, &reply)?;
        Poll::Ready(Ok(match *this.lease {
            Some(lease) if decision.is_allowed() && *this.cost > 0 => decision.with_lease(lease),
            _ => decision,
        }))
    }
}

/// What a check charges: one cost for every limit, or one for each (`LimitCosts`), committed
/// all or none, or every one landing (`Commit::Always`, the always script).
enum Costs {
    One(u64),
    Each(Box<[u64]>),
    Always(Box<[u64]>),
}

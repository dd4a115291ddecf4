//! The handle: what operators and tests do to a running layer. Find a policy by name, read a
//! key's state without consuming, reset it (in the store and in what the layer remembers), set
//! overrides, and replace the rules.

use std::future::Future;
use std::sync::Arc;

use super::MissingKey;
use super::decide::Decider;
use super::layer_state::LayerState;
use super::rule::Rule;
use crate::error::{ConfigError, StoreError};
use crate::key::{ClientName, Key, KeyExtractor, PeerIp};
use crate::policy::Policy;
use crate::store::{KeyState, Override, Store, StoreFuture};

/// Steers a [`RateLimitLayer`](super::RateLimitLayer), its clones and every service made from
/// them: made by [`RateLimitLayer::handle`](super::RateLimitLayer::handle), with the layer, so
/// it always reaches the layer that serves the requests. Cheap to clone.
///
/// ```
/// use std::time::Duration;
/// use redlimit::layer::Rule;
/// use redlimit::store::MemoryStore;
/// use redlimit::{Key, Limit, Policy, RateLimitLayer};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let policy = Policy::new("api", [Limit::gcra(5, Duration::from_secs(1)).unwrap()]).unwrap();
/// let layer = RateLimitLayer::new(MemoryStore::new(), policy.clone());
/// let handle = layer.handle();
/// let key = Key::new("ip:127.0.0.1");
/// assert_eq!(handle.inspect(&policy, &key).await.unwrap().limits()[0].remaining(), 5);
/// handle.reset(&policy, &key).await.unwrap();
/// let raised = Policy::new("api", [Limit::gcra(50, Duration::from_secs(1)).unwrap()]).unwrap();
/// handle.replace_rules(vec![Rule::all(raised)]);
/// # });
/// ```
#[derive(Clone)]
pub struct Handle {
    shared: Arc<LayerState>,
}

impl Handle {
    pub(super) fn new(shared: Arc<LayerState>) -> Self {
        Handle { shared }
    }

    fn decider(&self) -> Arc<Decider> {
        self.shared.decider()
    }

    pub(super) fn store(&self) -> Arc<dyn Store> {
        Arc::clone(&self.decider().config.store)
    }

    /// Puts `rules` in force, in place of every rule of the layer (its own policy too: to
    /// keep it, end `rules` with a [`Rule::all`]), for every service at once. Requests already
    /// being decided finish under the rules they started with; every other setting stays.
    ///
    /// The state of the limits is kept: state keys name a limit's policy, its position and its
    /// algorithm, not its `N` or period, so a limit that did not change keeps its counts, and
    /// a limit whose `N` changed keeps the units already used. The deny cache is emptied (its
    /// entries name rules by position); the in-memory fallback keeps its counts.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::layer::Rule;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// let api = Policy::new("api", [Limit::gcra(100, Duration::from_secs(60))?])?;
    /// let layer = RateLimitLayer::builder_per_route(MemoryStore::new()).build()?;
    /// layer.handle().replace_rules(vec![Rule::new("/v1/*", api)?]);
    /// assert!(layer.handle().policy_named("api").is_some());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn replace_rules(&self, rules: impl IntoIterator<Item = Rule>) {
        let cell = self.shared.cell();
        let config = cell.load().config.with_rules(rules.into_iter().collect());
        cell.store(Arc::new(Decider::new(Arc::new(config))));
    }

    /// The policy named `name` among the rules in force, the layer's own policy included
    /// (the first, if several rules share a name).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::key::PeerIp;
    /// use redlimit::layer::Rule;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// let api = Policy::new("api", [Limit::gcra(100, Duration::from_secs(60))?])?;
    /// let login = Policy::new("login", [Limit::sliding_log(5, Duration::from_secs(60))?])?;
    /// let layer = RateLimitLayer::builder(MemoryStore::new(), api)
    ///     .rule(Rule::new("POST /login", login)?.key(PeerIp))
    ///     .build()?;
    /// let handle = layer.handle();
    /// assert_eq!(handle.policy_named("login").unwrap().limits().len(), 1);
    /// assert!(handle.policy_named("nope").is_none());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn policy_named(&self, name: &str) -> Option<Policy> {
        self.decider()
            .config
            .rules()
            .map(|rule| &rule.policy)
            .find(|policy| policy.name() == name)
            .cloned()
    }

    /// The stored key of the client an operator names by spec and raw value
    /// (`header:x-api-key=sk_live_123`, `ip=203.0.113.7`, `route=/search&ip=203.0.113.7`): the
    /// key the extractor of a rule of `policy` gives it, with that extractor's own encoding
    /// (hashed, grouped, namespaced; see [`KeyExtractor::client_key`]). A lone `ip=` also
    /// names the peer-IP key that requests without a key are counted under (the default
    /// [`MissingKey`]). For [`inspect`](Self::inspect), [`reset`](Self::reset) and the
    /// overrides.
    ///
    /// A [`ConfigError::InvalidKeySpec`] if no rule of `policy` keys on that name (another
    /// spec, another header; or an extractor that cannot name clients: a closure, a
    /// [`PerLimit`](crate::key::PerLimit), whose keys are given by their stored text).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::key::{ClientName, Header};
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let policy = Policy::new("api", [Limit::gcra(5, Duration::from_secs(1)).unwrap()]).unwrap();
    /// let layer = RateLimitLayer::builder(MemoryStore::new(), policy.clone())
    ///     .key(Header::new("x-api-key").unwrap())
    ///     .build()
    ///     .unwrap();
    /// let handle = layer.handle();
    /// let client = ClientName::parse("header:x-api-key=sk_live_123").unwrap();
    /// let key = handle.client_key(&policy, &client).unwrap();
    /// assert!(key.as_str().starts_with("header:x-api-key:#"));
    /// handle.reset(&policy, &key).await.unwrap();
    /// let other = ClientName::parse("header:x-other=1").unwrap();
    /// assert!(handle.client_key(&policy, &other).is_err());
    /// # });
    /// ```
    pub fn client_key(&self, policy: &Policy, client: &ClientName) -> Result<Key, ConfigError> {
        let decider = self.decider();
        let config = &decider.config;
        let parts = client.parts();
        let by_rule = config
            .rules()
            .filter(|rule| rule.policy.name() == policy.name())
            .find_map(|rule| rule.key.client_key(parts));
        let by_peer = || match config.missing_key {
            MissingKey::PeerIp | MissingKey::PeerIpOrAllow => PeerIp.client_key(parts),
            _ => None,
        };
        by_rule
            .or_else(by_peer)
            .ok_or_else(|| ConfigError::InvalidKeySpec {
                spec: client.spec(),
                reason: format!(
                    "no rule of policy `{}` keys on it (a rule keyed by a closure or a \
                     PerLimit: name the key by its stored text)",
                    policy.name()
                ),
            })
    }

    /// Reads `key`'s state under `policy` in the layer's store without consuming anything
    /// ([`Admin::inspect`](crate::store::Admin::inspect)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Key, Limit, Policy, RateLimitLayer};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let policy = Policy::new("p", [Limit::gcra(5, Duration::from_secs(1)).unwrap()]).unwrap();
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy.clone());
    /// let state = layer.handle().inspect(&policy, &Key::new("ip:127.0.0.1")).await.unwrap();
    /// assert_eq!(state.limits()[0].remaining(), 5);
    /// # });
    /// ```
    pub fn inspect(&self, policy: &Policy, key: &Key) -> StoreFuture<KeyState> {
        powers::inspect(&*self.store(), policy, key)
    }

    /// Resets `key` under `policy`: deletes its state in the store
    /// ([`Admin::reset`](crate::store::Admin::reset)), then drops what this layer remembers of
    /// it (denials in its deny cache, state in its local fallback), so a denied client gets
    /// through at once. Other layers over a store that tells of resets
    /// ([`Admin::resets_version`](crate::store::Admin::resets_version)) drop their denials of
    /// the key at its next request: a Redis store tells every replica, which reads the reset
    /// at its next poll ([`override_poll`](crate::store::RedisStoreBuilder::override_poll),
    /// 250 ms by default), so the client gets through on every replica within about that
    /// long. Their local fallbacks (used only while the store fails) keep the key's state.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Store};
    /// use redlimit::{Key, Limit, Policy, RateLimitLayer};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let layer = RateLimitLayer::new(store.clone(), policy.clone());
    /// let key = Key::new("ip:127.0.0.1");
    /// store.check_now(&policy, &key, 1);
    /// layer.handle().reset(&policy, &key).await.unwrap();
    /// assert!(store.check_now(&policy, &key, 1).is_allowed());
    /// # });
    /// ```
    pub fn reset(
        &self,
        policy: &Policy,
        key: &Key,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'static + use<> {
        let decider = self.decider();
        let reset = powers::reset(&*decider.config.store, policy, key);
        let (name, key) = (policy.name_arc(), key.clone());
        async move {
            decider.forget(&name, &key);
            reset.await?;
            // Again after the store's reset: a denial the store gave just before it may have
            // been cached while the reset was under way.
            decider.forget(&name, &key);
            Ok(())
        }
    }

    /// Sets an override for `key` under `policy` in the layer's store
    /// ([`Overrides::set_override`](crate::store::Overrides::set_override)), then drops this layer's
    /// cached denials of the key, so a raised quota lets the client through at once. Other
    /// replicas apply it at their store's next poll of the overrides (a Redis store: within
    /// [`override_poll`](crate::store::RedisStoreBuilder::override_poll), 250 ms by default)
    /// and from then on ask their store again for any denial they had cached.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Override};
    /// use redlimit::{Key, Limit, Policy, RateLimitLayer};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let layer = RateLimitLayer::new(store.clone(), policy.clone());
    /// let key = Key::new("ip:127.0.0.1");
    /// assert!(store.check_now(&policy, &key, 1).is_allowed());
    /// let raised = Override::parse(&policy, "10/1m").unwrap();
    /// layer.handle().set_override(&policy, &key, raised).await.unwrap();
    /// assert_eq!(store.check_now(&policy, &key, 1).limits()[0].remaining(), 8);
    /// # });
    /// ```
    pub fn set_override(
        &self,
        policy: &Policy,
        key: &Key,
        value: Override,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'static + use<> {
        let decider = self.decider();
        let set = powers::set_override(&*decider.config.store, policy, key, value);
        let (name, key) = (policy.name_arc(), key.clone());
        async move {
            set.await?;
            decider.forget_denials(&name, &key);
            Ok(())
        }
    }

    /// The override of `key` under `policy` in the layer's store, if any
    /// ([`Overrides::get_override`](crate::store::Overrides::get_override)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Key, Limit, Policy, RateLimitLayer};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy.clone());
    /// assert_eq!(layer.handle().get_override(&policy, &Key::new("k")).await.unwrap(), None);
    /// # });
    /// ```
    pub fn get_override(&self, policy: &Policy, key: &Key) -> StoreFuture<Option<Override>> {
        powers::get_override(&*self.store(), policy, key)
    }

    /// Removes the override of `key` under `policy` in the layer's store
    /// ([`Overrides::remove_override`](crate::store::Overrides::remove_override)) and drops this
    /// layer's cached denials of the key; answers whether there was one. Other replicas
    /// follow as for [`set_override`](Self::set_override).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Key, Limit, Policy, RateLimitLayer};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy.clone());
    /// assert!(!layer.handle().remove_override(&policy, &Key::new("k")).await.unwrap());
    /// # });
    /// ```
    pub fn remove_override(
        &self,
        policy: &Policy,
        key: &Key,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send + 'static + use<> {
        let decider = self.decider();
        let remove = powers::remove_override(&*decider.config.store, policy, key);
        let (name, key) = (policy.name_arc(), key.clone());
        async move {
            let removed = remove.await?;
            decider.forget_denials(&name, &key);
            Ok(removed)
        }
    }
}

/// The store's optional powers, called in this one place.
mod powers {
    use crate::key::Key;
    use crate::policy::Policy;
    use crate::store::{KeyState, Override, Store, StoreFuture, unsupported};

    pub(super) fn inspect(store: &dyn Store, policy: &Policy, key: &Key) -> StoreFuture<KeyState> {
        match store.admin() {
            Some(admin) => admin.inspect(policy, key),
            None => unsupported("inspect"),
        }
    }

    pub(super) fn reset(store: &dyn Store, policy: &Policy, key: &Key) -> StoreFuture<()> {
        match store.admin() {
            Some(admin) => admin.reset(policy, key),
            None => unsupported("reset"),
        }
    }

    pub(super) fn set_override(
        store: &dyn Store,
        policy: &Policy,
        key: &Key,
        value: Override,
    ) -> StoreFuture<()> {
        match store.overrides() {
            Some(overrides) => overrides.set_override(policy, key, value),
            None => unsupported("set_override"),
        }
    }

    pub(super) fn get_override(
        store: &dyn Store,
        policy: &Policy,
        key: &Key,
    ) -> StoreFuture<Option<Override>> {
        match store.overrides() {
            Some(overrides) => overrides.get_override(policy, key),
            None => unsupported("get_override"),
        }
    }

    pub(super) fn remove_override(
        store: &dyn Store,
        policy: &Policy,
        key: &Key,
    ) -> StoreFuture<bool> {
        match store.overrides() {
            Some(overrides) => overrides.remove_override(policy, key),
            None => unsupported("remove_override"),
        }
    }
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::layer::{RateLimitLayer, Rule};
    use crate::store::MemoryStore;
    use crate::{Limit, Policy};

    fn policy(name: &str) -> Policy {
        Policy::new(name, [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap()
    }

    #[test]
    fn a_handle_taken_at_once_steers_every_clone_and_service() {
        let layer = RateLimitLayer::new(MemoryStore::new(), policy("old"));
        let handle = layer.handle();
        let clone = layer.clone();
        let before = clone.decider();
        handle.replace_rules(vec![Rule::all(policy("new"))]);
        assert_eq!(layer.decider().config.rules().count(), 1);
        assert!(handle.policy_named("old").is_none());
        assert!(clone.handle().policy_named("new").is_some());
        // A request already being decided finishes under the rules it started with.
        assert_eq!(before.config.rules().next().unwrap().policy().name(), "old");
    }
}

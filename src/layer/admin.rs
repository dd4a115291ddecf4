//! What support tools and tests do through a layer: find a policy by name, read a key's state
//! without consuming, and reset it (in the store and in what the layer remembers).

use std::future::Future;

use super::layer::RateLimitLayer;
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::{AdminFuture, KeyState, Override};

impl RateLimitLayer {
    /// The policy named `name` among the layer's own and its route rules' (the first, if
    /// several rules share a name).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::key::PeerIp;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// let api = Policy::new("api", [Limit::gcra(100, Duration::from_secs(60))?])?;
    /// let login = Policy::new("login", [Limit::sliding_log(5, Duration::from_secs(60))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), api).route("POST /login", login, PeerIp)?;
    /// assert_eq!(layer.policy_named("login").unwrap().limits().len(), 1);
    /// assert!(layer.policy_named("nope").is_none());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn policy_named(&self, name: &str) -> Option<&Policy> {
        self.config
            .rules()
            .map(|rule| &rule.policy)
            .find(|policy| policy.name() == name)
    }

    /// Reads `key`'s state under `policy` in the layer's store without consuming anything
    /// ([`Store::inspect`](crate::store::Store::inspect)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Key, Limit, Policy, RateLimitLayer};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let policy = Policy::new("p", [Limit::gcra(5, Duration::from_secs(1)).unwrap()]).unwrap();
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy.clone());
    /// let state = layer.inspect(&policy, &Key::new("ip:127.0.0.1")).await.unwrap();
    /// assert_eq!(state.limits()[0].remaining(), 5);
    /// # });
    /// ```
    pub fn inspect(&self, policy: &Policy, key: &Key) -> AdminFuture<KeyState> {
        self.config.store.inspect(policy, key)
    }

    /// Resets `key` under `policy`: deletes its state in the store
    /// ([`Store::reset`](crate::store::Store::reset)), then drops what this layer remembers of
    /// it (denials in its deny cache, state in its local fallback), so a denied client gets
    /// through at once. Other replicas' deny caches keep a denial until its retry time (at
    /// most the policy's longest period); reset through each replica's layer to clear them
    /// too.
    ///
    /// Only this layer and the layers sharing its settings (its clones, and the services made
    /// from it) forget the key: reset through the very layer that serves the requests.
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
    /// layer.reset(&policy, &key).await.unwrap();
    /// assert!(store.check_now(&policy, &key, 1).is_allowed());
    /// # });
    /// ```
    pub fn reset(
        &self,
        policy: &Policy,
        key: &Key,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'static {
        let decider = self.decider();
        let reset = self.config.store.reset(policy, key);
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
    /// ([`Store::set_override`](crate::store::Store::set_override)), then drops this layer's
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
    /// layer.set_override(&policy, &key, raised).await.unwrap();
    /// assert_eq!(store.check_now(&policy, &key, 1).limits()[0].remaining(), 8);
    /// # });
    /// ```
    pub fn set_override(
        &self,
        policy: &Policy,
        key: &Key,
        value: Override,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'static {
        let decider = self.decider();
        let set = self.config.store.set_override(policy, key, value);
        let (name, key) = (policy.name_arc(), key.clone());
        async move {
            set.await?;
            decider.forget_denials(&name, &key);
            Ok(())
        }
    }

    /// The override of `key` under `policy` in the layer's store, if any
    /// ([`Store::get_override`](crate::store::Store::get_override)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Key, Limit, Policy, RateLimitLayer};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy.clone());
    /// assert_eq!(layer.get_override(&policy, &Key::new("k")).await.unwrap(), None);
    /// # });
    /// ```
    pub fn get_override(&self, policy: &Policy, key: &Key) -> AdminFuture<Option<Override>> {
        self.config.store.get_override(policy, key)
    }

    /// Removes the override of `key` under `policy` in the layer's store
    /// ([`Store::remove_override`](crate::store::Store::remove_override)) and drops this
    /// layer's cached denials of the key; answers whether there was one. Other replicas
    /// follow as for [`set_override`](RateLimitLayer::set_override).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Key, Limit, Policy, RateLimitLayer};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy.clone());
    /// assert!(!layer.remove_override(&policy, &Key::new("k")).await.unwrap());
    /// # });
    /// ```
    pub fn remove_override(
        &self,
        policy: &Policy,
        key: &Key,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send + 'static {
        let decider = self.decider();
        let remove = self.config.store.remove_override(policy, key);
        let (name, key) = (policy.name_arc(), key.clone());
        async move {
            let removed = remove.await?;
            decider.forget_denials(&name, &key);
            Ok(removed)
        }
    }
}

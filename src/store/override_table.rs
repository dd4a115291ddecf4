//! The overrides a store applies, by policy and key: the memory store's own, or a Redis
//! store's local copy of what Redis holds (kept fresh by a poller).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};

use super::overrides::Override;
use crate::key::Key;
use crate::policy::Policy;

/// Overrides by policy name, then key text: looked up with two `&str`, nothing allocated.
pub(crate) type Overrides = HashMap<String, HashMap<String, Override>>;

#[derive(Debug, Default)]
pub(crate) struct OverrideTable {
    map: RwLock<Overrides>,
    /// No override at all: a check costs one atomic load.
    empty: AtomicBool,
    /// Bumped on every change: a layer's cached denials from before it are asked again.
    version: AtomicU64,
}

impl OverrideTable {
    pub(crate) fn new() -> Self {
        OverrideTable {
            empty: AtomicBool::new(true),
            ..OverrideTable::default()
        }
    }

    /// `policy` as `key` is counted under it: with its override applied, if it has one that
    /// fits the policy.
    // Inlined: with no override anywhere (the common case) a check pays one load.
    #[inline]
    pub(crate) fn effective(&self, policy: &Policy, key: &Key) -> Option<Policy> {
        if self.empty.load(Ordering::Acquire) {
            return None;
        }
        self.overridden(policy, key)
    }

    #[inline(never)]
    fn overridden(&self, policy: &Policy, key: &Key) -> Option<Policy> {
        let map = self.map.read().unwrap_or_else(PoisonError::into_inner);
        let found = map.get(policy.name())?.get(key.as_str())?;
        let applied = found.apply(policy);
        if applied.is_none() {
            tracing::debug!(
                policy = policy.name(),
                "an override no longer fits its policy: ignored"
            );
        }
        applied
    }

    pub(crate) fn get(&self, policy: &str, key: &Key) -> Option<Override> {
        let map = self.map.read().unwrap_or_else(PoisonError::into_inner);
        map.get(policy)?.get(key.as_str()).cloned()
    }

    pub(crate) fn set(&self, policy: &str, key: &Key, value: Override) {
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        map.entry(policy.to_owned())
            .or_default()
            .insert(key.as_str().to_owned(), value);
        self.changed(&map);
    }

    pub(crate) fn remove(&self, policy: &str, key: &Key) -> bool {
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        let Some(keys) = map.get_mut(policy) else {
            return false;
        };
        let removed = keys.remove(key.as_str()).is_some();
        if keys.is_empty() {
            map.remove(policy);
        }
        if removed {
            self.changed(&map);
        }
        removed
    }

    /// Replaces every override (a poll read them all), noting a change only if there is one.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))] // Only a Redis store polls.
    pub(crate) fn replace(&self, all: Overrides) {
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        if *map != all {
            *map = all;
            self.changed(&map);
        }
    }

    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    fn changed(&self, map: &Overrides) {
        self.empty.store(map.is_empty(), Ordering::Release);
        self.version.fetch_add(1, Ordering::AcqRel);
    }
}

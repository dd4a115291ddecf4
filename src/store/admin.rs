//! The optional power to read and reset a key's state, for support tools and tests.

use super::{KeyState, StoreFuture};
use crate::key::Key;
use crate::policy::Policy;

/// Reads and resets keys' state: a store's optional power, reached through
/// [`Store::admin`](super::Store::admin). `MemoryStore` and `RedisStore` have it; a
/// `LocalFirstStore` has it for the keys it decides exactly through Redis.
///
/// ```
/// # use std::time::Duration;
/// use redlimit::store::{Admin, MemoryStore};
/// use redlimit::{Key, Limit, Policy};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
/// assert!(store.check_now(&policy, &Key::new("k"), 1).is_allowed());
/// assert_eq!(store.inspect(&policy, &Key::new("k")).await.unwrap().limits()[0].remaining(), 0);
/// store.reset(&policy, &Key::new("k")).await.unwrap();
/// assert!(store.check_now(&policy, &Key::new("k"), 1).is_allowed());
/// # });
/// ```
pub trait Admin: Send + Sync {
    /// Reads `key`'s state under `policy` without consuming anything: what a request of cost 1
    /// would find now ([`KeyState`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{Admin, MemoryStore};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let policy = Policy::new("p", [Limit::gcra(3, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let state = MemoryStore::new().inspect(&policy, &Key::new("k")).await.unwrap();
    /// assert_eq!(state.limits()[0].remaining(), 3);
    /// # });
    /// ```
    fn inspect(&self, policy: &Policy, key: &Key) -> StoreFuture<KeyState>;

    /// Deletes `key`'s state under `policy`: every limit of it starts afresh. Every layer in
    /// front of the store drops its cached denials of the key at its next request for it
    /// ([`resets_version`](Self::resets_version)); a Redis store also tells the other
    /// replicas, whose stores read it at their next poll
    /// ([`override_poll`](crate::store::RedisStoreBuilder::override_poll), 250 ms by default).
    /// [`Handle::reset`](crate::layer::Handle::reset) also drops the layer's in-memory
    /// fallback state of the key.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{Admin, MemoryStore};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// assert!(store.check_now(&policy, &Key::new("k"), 1).is_allowed());
    /// assert!(!store.check_now(&policy, &Key::new("k"), 1).is_allowed());
    /// store.reset(&policy, &Key::new("k")).await.unwrap();
    /// assert!(store.check_now(&policy, &Key::new("k"), 1).is_allowed());
    /// # });
    /// ```
    fn reset(&self, policy: &Policy, key: &Key) -> StoreFuture<()>;

    /// A number that moves whenever this store learns of a reset: one made through it, or
    /// (a Redis store) one made through another replica, read by its poller. A layer notes it
    /// with every denial it caches and, once it moved, asks [`reset_since`](Self::reset_since)
    /// before answering from its cache. The default, 0, tells of no reset: a layer then drops
    /// only the denials its own [`Handle::reset`](crate::layer::Handle::reset) resets.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{Admin, MemoryStore};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let before = store.resets_version();
    /// store.reset(&policy, &Key::new("k")).await.unwrap();
    /// assert_ne!(store.resets_version(), before);
    /// # });
    /// ```
    fn resets_version(&self) -> u64 {
        0
    }

    /// Whether `key` under `policy` was reset, or may have been, after
    /// [`resets_version`](Self::resets_version) read `since`: a reset of the key or of one of
    /// its limit keys, or resets the store cannot name (it missed some). The default answers
    /// whether the version moved at all.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{Admin, MemoryStore};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let before = store.resets_version();
    /// store.reset(&policy, &Key::new("a")).await.unwrap();
    /// assert!(store.reset_since(&policy, &Key::new("a"), before));
    /// assert!(!store.reset_since(&policy, &Key::new("b"), before));
    /// # });
    /// ```
    fn reset_since(&self, policy: &Policy, key: &Key, since: u64) -> bool {
        let _ = (policy, key);
        self.resets_version() != since
    }
}

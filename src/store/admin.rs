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

    /// Deletes `key`'s state under `policy`: every limit of it starts afresh. A layer in front
    /// of the store may still answer from its deny cache: reset through
    /// [`Handle::reset`](crate::layer::Handle::reset) to drop that too.
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
}

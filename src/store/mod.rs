//! Where rate state lives. A [`Store`] is the only part of the crate that does I/O: it
//! evaluates every limit of a policy for a key, atomically, and answers with a
//! [`Decision`](crate::Decision).
//!
//! - [`MemoryStore`]: in this process; the same algorithms in Rust.
//! - [`RedisStore`] (feature `redis`): one Lua script call per decision, shared by every
//!   replica of the service.

mod clock;
mod memory;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "redis")]
mod reply;
#[cfg(feature = "redis")]
pub(crate) use self::redis::script_call;
#[cfg(feature = "redis")]
pub(crate) use reply::decode as decode_reply;
#[cfg(feature = "redis")]
mod script;

#[cfg(feature = "redis")]
pub use self::redis::{RedisStore, RedisStoreBuilder};
pub use clock::{Clock, ManualClock, SystemClock};
pub use memory::{MemoryStore, MemoryStoreBuilder, DEFAULT_MAX_KEYS};

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::decision::Decision;
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;

/// The future a [`Store`] returns.
pub type StoreFuture = Pin<Box<dyn Future<Output = Result<Decision, StoreError>> + Send + 'static>>;

/// Evaluates a policy's limits for a key and commits them all or none.
///
/// Implementations must hold the semantics of the crate documentation: a denied request
/// consumes nothing; `cost` larger than some limit's count is denied without consuming and
/// reported as [`Decision::exceeds_capacity`].
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use redlimit::{Key, Limit, MemoryStore, Policy, Store};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let policy = Arc::new(Policy::new("p").limit(Limit::gcra(1, Duration::from_secs(60))));
/// assert!(store.check(&policy, &Key::new("k"), 1).await.unwrap().is_allowed());
/// assert!(!store.check(&policy, &Key::new("k"), 1).await.unwrap().is_allowed());
/// # });
/// ```
pub trait Store: Send + Sync + 'static {
    /// Checks `cost` units for `key` against every limit of `policy`.
    fn check(&self, policy: &Arc<Policy>, key: &Key, cost: u64) -> StoreFuture;

    /// The decision at once, for a store that needs no I/O (the memory store), saving the
    /// layer a boxed future per request; `None` (the default) makes the layer call
    /// [`Store::check`]. It must decide exactly as `check` would.
    fn check_ready(
        &self,
        policy: &Arc<Policy>,
        key: &Key,
        cost: u64,
    ) -> Option<Result<Decision, StoreError>> {
        let _ = (policy, key, cost);
        None
    }
}

impl<S: Store + ?Sized> Store for Arc<S> {
    fn check(&self, policy: &Arc<Policy>, key: &Key, cost: u64) -> StoreFuture {
        (**self).check(policy, key, cost)
    }

    fn check_ready(
        &self,
        policy: &Arc<Policy>,
        key: &Key,
        cost: u64,
    ) -> Option<Result<Decision, StoreError>> {
        (**self).check_ready(policy, key, cost)
    }
}

//! Settings for a [`MemoryStore`], and the store they build.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::{Inner, MemoryStore, refund};
use crate::identity::LeaseIds;
use crate::store::clock::{Clock, SystemClock};
use crate::store::override_table::OverrideTable;
use crate::store::shard::{DEFAULT_MAX_KEYS, ShardedMap};

/// Settings for a [`MemoryStore`].
///
/// ```
/// use redlimit::store::{ManualClock, MemoryStore};
/// let store = MemoryStore::builder()
///     .max_keys(10_000)
///     .clock(ManualClock::new(0))
///     .build();
/// ```
#[must_use]
pub struct MemoryStoreBuilder {
    clock: Box<dyn Clock>,
    max_keys: usize,
}

impl MemoryStoreBuilder {
    pub(super) fn new() -> Self {
        MemoryStoreBuilder {
            clock: Box::new(SystemClock),
            max_keys: DEFAULT_MAX_KEYS,
        }
    }

    /// The most keys the store holds (default [`DEFAULT_MAX_KEYS`], 100 000; at least 64,
    /// one per shard). The cap is kept per shard, so the store may evict slightly before the
    /// total reaches it.
    ///
    /// ```
    /// let store = redlimit::store::MemoryStore::builder().max_keys(1_000).build();
    /// assert!(store.is_empty());
    /// ```
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// The clock (default: the system clock).
    ///
    /// ```
    /// use redlimit::store::{ManualClock, MemoryStore};
    /// let store = MemoryStore::builder().clock(ManualClock::new(0)).build();
    /// ```
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Box::new(clock);
        self
    }

    /// Builds the store.
    ///
    /// ```
    /// let store = redlimit::store::MemoryStore::builder().build();
    /// assert_eq!(store.evictions(), 0);
    /// ```
    pub fn build(self) -> MemoryStore {
        let seed = foldhash::fast::RandomState::default().hash_one(0u8);
        MemoryStore {
            inner: Arc::new(Inner {
                entries: ShardedMap::new(self.max_keys, seed, |_| ()),
                clock: self.clock,
                evictions: AtomicU64::new(0),
                overrides: OverrideTable::new(),
                refunds: refund::Tokens::default(),
                leases: LeaseIds::new(),
                resets: Default::default(),
            }),
        }
    }
}

impl std::fmt::Debug for MemoryStoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStoreBuilder")
            .field("max_keys", &self.max_keys)
            .finish_non_exhaustive()
    }
}

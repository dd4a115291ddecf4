//! What the engine's unit tests share: the shared parts of an engine over a store.

use std::sync::Arc;
use std::time::Duration;

use super::Shared;
use super::breakers::Breakers;
use super::in_flight::InFlight;
use crate::store::{MemoryStore, Store};

/// Defaults over `store`: a 100 ms deadline, the default breaker, a deny cache.
pub(super) fn shared(store: impl Store) -> Shared {
    let kind = store.kind();
    Shared {
        store: Arc::new(store),
        deadline: Duration::from_millis(100),
        breakers: Arc::new(Breakers::new(crate::failure::CircuitBreaker::new(), kind)),
        in_flight: Arc::new(InFlight::new(16)),
        throttle: Arc::default(),
        local_store: MemoryStore::new(),
        deny_cache: 100,
    }
}

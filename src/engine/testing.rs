//! What the engine's unit tests share: the shared parts of an engine over a store.

use std::sync::Arc;
use std::time::Duration;

use super::{Settings, Shared};
use crate::store::Store;

/// Defaults over `store`: a 100 ms deadline, the default breaker, a deny cache.
pub(super) fn shared(store: impl Store) -> Shared {
    let settings = Settings {
        max_calls: Some(16),
        deny_cache: 100,
        ..Settings::new(Duration::from_millis(100))
    };
    Shared::new(Arc::new(store), settings)
}

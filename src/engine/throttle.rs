//! Log throttling: a dead store must not flood the logs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Logs a recurring failure at `warn` at most once a second, and at `debug` otherwise, so a
/// dead store at 10k requests/s does not flood the logs.
#[derive(Debug, Default)]
pub(crate) struct Throttle {
    last_warn_ms: AtomicU64,
}

impl Throttle {
    /// Whether this occurrence should be logged at `warn`.
    pub(crate) fn should_warn(&self) -> bool {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let last = self.last_warn_ms.load(Ordering::Relaxed);
        now.saturating_sub(last) >= 1000
            && self
                .last_warn_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

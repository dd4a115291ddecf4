//! The bound on a front's store calls in flight: past it, requests are decided without the
//! store (in memory, or by the failure mode) instead of queueing behind it, so a flood cannot
//! push every call past its deadline. An engine without a bound has none of these: nothing is
//! counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The default bound on store calls in flight per layer: far above what a healthy Redis
/// needs (at 100 µs a call, 256 calls in flight carry 2.5 million decisions a second), far
/// below what turns a flood into a queue longer than the deadline.
pub(crate) const DEFAULT_MAX_STORE_CALLS: usize = 256;

/// Counts a front's store calls in flight (shared by its clones).
#[derive(Debug)]
pub(crate) struct InFlight {
    max: usize,
    now: AtomicUsize,
}

/// One store call in flight; dropping it (the call settled or was abandoned) frees its place.
#[derive(Debug)]
pub(crate) struct CallSlot(Arc<InFlight>);

impl InFlight {
    /// At most `max` calls (at least 1).
    pub(crate) fn new(max: usize) -> Self {
        InFlight {
            max: max.max(1),
            now: AtomicUsize::new(0),
        }
    }

    /// The bound.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// A place for one more call, if the bound allows it.
    pub(crate) fn try_acquire(self: &Arc<Self>) -> Option<CallSlot> {
        let before = self.now.fetch_add(1, Ordering::AcqRel);
        if before >= self.max {
            self.now.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(CallSlot(Arc::clone(self)))
    }
}

impl Drop for CallSlot {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_frees_places() {
        let bound = Arc::new(InFlight::new(2));
        let a = bound.try_acquire().unwrap();
        let _b = bound.try_acquire().unwrap();
        assert!(bound.try_acquire().is_none());
        drop(a);
        assert!(bound.try_acquire().is_some());
    }
}

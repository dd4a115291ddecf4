//! The bound on a front's store calls in flight: past it, requests are decided without the
//! store (in memory, or by the failure mode) instead of queueing behind it, so a flood cannot
//! push every call past its deadline. Unbounded, nothing is counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The default bound on store calls in flight per layer: far above what a healthy Redis
/// needs (at 100 µs a call, 256 calls in flight carry 2.5 million decisions a second), far
/// below what turns a flood into a queue longer than the deadline.
pub(crate) const DEFAULT_MAX_STORE_CALLS: usize = 256;

/// Counts a front's store calls in flight (shared by its clones).
#[derive(Debug)]
pub(crate) struct InFlight {
    /// `usize::MAX`: unbounded.
    max: usize,
    now: AtomicUsize,
}

/// One store call in flight; dropping it (the call settled or was abandoned) frees its place.
#[derive(Debug)]
pub(crate) struct Permit(Arc<InFlight>);

impl InFlight {
    /// At most `max` calls (at least 1); `None`: no bound.
    pub(crate) fn new(max: Option<usize>) -> Self {
        InFlight {
            max: max.map_or(usize::MAX, |max| max.max(1)),
            now: AtomicUsize::new(0),
        }
    }

    /// The bound (`None`: unbounded).
    pub(crate) fn bound(&self) -> Option<usize> {
        (self.max != usize::MAX).then_some(self.max)
    }

    /// A place for one more call (none needed when unbounded: nothing is counted), if the
    /// bound allows it.
    pub(crate) fn try_hold(self: &Arc<Self>) -> Option<Option<Permit>> {
        if self.max == usize::MAX {
            return Some(None);
        }
        self.try_acquire().map(Some)
    }

    /// A place for one more call, if the bound allows it.
    pub(crate) fn try_acquire(self: &Arc<Self>) -> Option<Permit> {
        let before = self.now.fetch_add(1, Ordering::AcqRel);
        if before >= self.max {
            self.now.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Permit(Arc::clone(self)))
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_frees_places() {
        let bound = Arc::new(InFlight::new(Some(2)));
        let a = bound.try_acquire().unwrap();
        let _b = bound.try_hold().unwrap().unwrap();
        assert!(bound.try_acquire().is_none());
        assert!(bound.try_hold().is_none());
        drop(a);
        assert!(bound.try_acquire().is_some());
    }

    #[test]
    fn unbounded_counts_nothing() {
        let bound = Arc::new(InFlight::new(None));
        let held: Vec<_> = (0..1000).map(|_| bound.try_hold().unwrap()).collect();
        assert!(held.iter().all(Option::is_none));
        assert_eq!(bound.now.load(Ordering::Relaxed), 0);
        assert_eq!(bound.bound(), None);
        drop(held);
    }
}

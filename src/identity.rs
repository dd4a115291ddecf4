//! Identities the crate makes: a decision's id (what a refund names) and a store's lease
//! ids. Values, not state: the decision and the stores both use them, so they live beside
//! neither.

use std::cell::Cell;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::lease::Lease;

/// A decision's identity, for refunds: unique to it (and its clones), not part of its value,
/// so decisions equal in every field compare (and print) alike whatever their ids.
#[derive(Clone, Copy)]
pub(crate) struct DecisionId(pub(crate) u64);

impl std::fmt::Debug for DecisionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DecisionId")
    }
}

impl PartialEq for DecisionId {
    fn eq(&self, _: &DecisionId) -> bool {
        true
    }
}

impl Eq for DecisionId {}

impl DecisionId {
    /// An id no other decision of this process has, and (64 random bits per thread) almost
    /// surely none of another's: a count from a random start per thread, so the hot path
    /// shares no cache line between threads.
    pub(crate) fn next() -> DecisionId {
        thread_local! {
            static NEXT: Cell<u64> =
                Cell::new(foldhash::fast::RandomState::default().hash_one(0u8));
        }
        NEXT.with(|next| {
            let id = next.get();
            next.set(id.wrapping_add(1));
            DecisionId(id)
        })
    }
}

/// 64 random bits naming one store of one process among every replica's (a reset it told
/// the fleet of is its own, a lease id its own).
pub(crate) fn instance() -> u64 {
    // The standard library's randomly keyed hasher: random bits without a dependency.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(nanos);
    hasher.finish()
}

/// Makes a store's lease ids: this instance's random 64 bits above a counter, so two
/// replicas (or two stores of one process) never make the same id.
#[derive(Debug)]
pub(crate) struct LeaseIds {
    instance: u64,
    next: AtomicU64,
}

impl LeaseIds {
    pub(crate) fn new() -> Self {
        LeaseIds {
            instance: instance(),
            next: AtomicU64::new(0),
        }
    }

    /// A lease id no other call (of any instance) makes.
    pub(crate) fn next(&self) -> Lease {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        Lease::new((u128::from(self.instance) << 64) | u128::from(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_ids_differ_within_and_across_instances() {
        let (a, b) = (LeaseIds::new(), LeaseIds::new());
        let ids: std::collections::HashSet<Lease> =
            (0..100).flat_map(|_| [a.next(), b.next()]).collect();
        assert_eq!(ids.len(), 200);
    }

    #[test]
    fn decision_ids_differ_and_compare_alike() {
        let (a, b) = (DecisionId::next(), DecisionId::next());
        assert_ne!(a.0, b.0);
        assert_eq!(a, b, "an id is not part of a decision's value");
    }
}

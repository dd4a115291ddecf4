//! A request's hold on a slot of a concurrency limit ([`Limit::concurrency`](crate::Limit::concurrency)).

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// The slot an admitted request holds under a concurrency limit, named so that exactly it is
/// given back. The store that admitted the request makes it (unique per request: a random
/// instance id and a counter), the [`Decision`](crate::Decision) carries it, and the layer
/// hands it to [`Store::release`](crate::store::Store::release) when the response body ends
/// or is dropped.
///
/// ```
/// use redlimit::Lease;
/// let lease = Lease::new(42);
/// assert_eq!(lease.id(), 42);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease(u128);

impl Lease {
    /// A lease named `id`, for a [`Store`](crate::store::Store) of your own: ids must be
    /// unique among the leases of one key held at the same time, across every replica.
    ///
    /// ```
    /// assert_ne!(redlimit::Lease::new(1), redlimit::Lease::new(2));
    /// ```
    pub const fn new(id: u128) -> Self {
        Lease(id)
    }

    /// The lease's id.
    ///
    /// ```
    /// assert_eq!(redlimit::Lease::new(7).id(), 7);
    /// ```
    pub const fn id(self) -> u128 {
        self.0
    }

    /// The member text that names the lease in Redis (hex).
    #[cfg(feature = "redis")]
    pub(crate) fn member(self) -> String {
        format!("{:x}", self.0)
    }
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
        // The standard library's randomly keyed hasher: random bits without a dependency.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        hasher.write_u128(nanos);
        LeaseIds {
            instance: hasher.finish(),
            next: AtomicU64::new(0),
        }
    }

    /// A lease id no other call (of any instance) makes.
    pub(crate) fn next(&self) -> Lease {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        Lease((u128::from(self.instance) << 64) | u128::from(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_differ_within_and_across_instances() {
        let (a, b) = (LeaseIds::new(), LeaseIds::new());
        let ids: std::collections::HashSet<Lease> =
            (0..100).flat_map(|_| [a.next(), b.next()]).collect();
        assert_eq!(ids.len(), 200);
    }
}

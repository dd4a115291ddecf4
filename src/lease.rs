//! A request's hold on a slot of a concurrency limit ([`Limit::concurrency`](crate::Limit::concurrency)).

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

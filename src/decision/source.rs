//! Who made a decision: the store, a failure mode, the local fallback, the deny cache, or a
//! local-first store.

/// Where a [`Decision`](crate::Decision) came from.
///
/// ```
/// use redlimit::DecisionSource;
/// assert_ne!(DecisionSource::Store, DecisionSource::FailOpen);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DecisionSource {
    /// The store evaluated every limit.
    Store,
    /// The store failed or missed its deadline and the layer let the request through
    /// unlimited; no limit state is known.
    FailOpen,
    /// The store failed or missed its deadline and the layer answered `503` (gRPC
    /// `UNAVAILABLE`) without limit state ([`OnStoreError::Closed`](crate::layer::OnStoreError::Closed));
    /// the decision is in that response's extensions.
    FailClosed,
    /// This instance decided in memory, with its share of the policy: the store failed, missed
    /// its deadline or its circuit was open ([`OnStoreError::Local`](crate::layer::OnStoreError::Local),
    /// the default), or more store calls were in flight than the layer allows
    /// ([`RateLimitBuilder::max_store_calls`](crate::layer::RateLimitBuilder::max_store_calls)).
    Local,
    /// The store denied this key moments ago and the denial still stands: answered from the
    /// layer's deny cache without asking the store, with the store's states counted down
    /// ([`RateLimitBuilder::deny_cache`](crate::layer::RateLimitBuilder::deny_cache)).
    DenyCache,
    /// A local-first store decided in memory, from its view of the fleet's usage (synced with
    /// Redis in the background) ([`LocalFirstStore`](crate::store::LocalFirstStore)).
    LocalFirst,
}

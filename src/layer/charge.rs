//! Charging a key after the fact: [`Handle::charge`], for costs known once the response is
//! made (an LLM call's tokens, the bytes sent), beside the admission check the layer makes
//! before it.

use super::Handle;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::Check;

impl Handle {
    /// Charges `cost` units for `key` under `policy` in the layer's store
    /// ([`Store::charge`](crate::store::Store::charge)): a cost already incurred, counted
    /// whatever the state, past the limits too. While the key owes more than its limits allow
    /// (debt), the layer refuses its requests (429, `Retry-After` when the debt is paid), up
    /// to twice a limit's count owed, never more. The answer is the decision after the
    /// charge, as a request of cost 1 would find it.
    ///
    /// Use it to settle an estimate by hand: admit a request at an estimated cost (the
    /// layer's [`cost`](crate::layer::RateLimitBuilder::cost)), then charge what the response
    /// used beyond it (the layer does it itself, refunds too, with
    /// [`settle_with`](crate::layer::RateLimitBuilder::settle_with)). Nothing here waits on the response or its body: call it when the cost is
    /// known, with the key the layer counted the request under (its stored text for a
    /// closure's key; [`client_key`](Self::client_key) names an extractor's). A charge made
    /// here is never refused and never replayed; a store that fails answers the error, and
    /// the units are not counted. The layer's deny cache stays exact: a charge only adds
    /// consumption, so every denial it holds stays true (one it holds may end before the
    /// debt is paid, which costs one more store call, no wrong answer).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Key, Limit, Policy, RateLimitLayer};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let tokens = Policy::new("tokens", [Limit::gcra(10_000, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let layer = RateLimitLayer::builder(store.clone(), tokens.clone())
    ///     .key(|_: &http::request::Parts| Some(redlimit::Key::new("tenant:acme")))
    ///     .cost(|_: &http::request::Parts| 500) // the estimate, checked before the call
    ///     .build()
    ///     .unwrap();
    /// let handle = layer.handle();
    /// // ...the response reports 15 000 tokens: 14 500 more than the estimate.
    /// let after = handle.charge(&tokens, &Key::new("tenant:acme"), 14_500).await.unwrap();
    /// assert!(!after.is_allowed(), "in debt: 4 500 tokens owed");
    /// assert_eq!(after.remaining(), Some(0));
    /// // The debt paid (27 s at 10 000 a minute), then one token.
    /// assert_eq!(after.retry_after(), Some(Duration::from_millis(27_006)));
    /// # });
    /// ```
    pub fn charge(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        self.store().charge(policy, key, cost)
    }
}

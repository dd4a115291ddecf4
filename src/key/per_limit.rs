//! An extractor for hierarchical quotas: some limits of a policy counted under keys of their
//! own.

use std::sync::Arc;

use http::request::Parts;
use smallvec::SmallVec;

use super::{Key, KeyExtractor};
use crate::policy::MAX_LIMITS;

/// Counts each limit of a policy under its own key: per API key 10/s *and* per tenant
/// 1000/min *and* one global 50 000/s, checked together and charged all or none in one store
/// call. Limits not given a key count under the first extractor's. If any extractor has no
/// key, the request has none (the layer's [`MissingKey`](crate::layer::MissingKey) decides).
///
/// Give limits from the narrowest key to the widest: in a Redis Cluster every key of a check
/// shares the slot of the widest one given ([`Key::hash_tag`]). A global limit given last puts
/// the whole policy on one Cluster slot: exact, at one shard's throughput. Sliding-log limits
/// of a policy share one log, counted under the first sliding-log limit's key.
///
/// ```
/// use std::time::Duration;
/// use redlimit::key::{Global, Header, PerLimit};
/// use redlimit::store::MemoryStore;
/// use redlimit::{Limit, Policy, RateLimitLayer};
///
/// let policy = Policy::new("api", [
///     Limit::gcra(10, Duration::from_secs(1))?,           // per API key
///     Limit::fixed_window(1000, Duration::from_secs(60))?, // per tenant
///     Limit::gcra(50_000, Duration::from_secs(1))?,       // for everyone
/// ])?;
/// let key = PerLimit::new(Header::new("x-api-key")?)
///     .limit(1, Header::new("x-tenant")?)
///     .limit(2, Global);
/// let layer = RateLimitLayer::builder(MemoryStore::new(), policy).key(key).build()?;
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct PerLimit {
    key: Arc<dyn KeyExtractor>,
    limits: Vec<(usize, Arc<dyn KeyExtractor>)>,
}

impl PerLimit {
    /// Counts every limit under `key`'s key, until [`limit`](Self::limit) says otherwise.
    pub fn new(key: impl KeyExtractor) -> Self {
        PerLimit {
            key: Arc::new(key),
            limits: Vec::new(),
        }
    }

    /// Counts the limit at `position` (from 0, in the policy's order) under `key`'s key. A
    /// position given twice takes the last; one past [`MAX_LIMITS`] is ignored, and one past
    /// the policy's limits counts nothing.
    ///
    /// ```
    /// use redlimit::key::{Global, PeerIp, PerLimit};
    /// let per_ip_and_global = PerLimit::new(PeerIp).limit(1, Global);
    /// ```
    #[must_use]
    pub fn limit(mut self, position: usize, key: impl KeyExtractor) -> Self {
        if position < MAX_LIMITS {
            self.limits.retain(|(p, _)| *p != position);
            self.limits.push((position, Arc::new(key)));
        }
        self
    }

    /// [`limit`](Self::limit) with an extractor chosen at run time.
    #[must_use]
    pub fn limit_dyn(mut self, position: usize, key: Arc<dyn KeyExtractor>) -> Self {
        if position < MAX_LIMITS {
            self.limits.retain(|(p, _)| *p != position);
            self.limits.push((position, key));
        }
        self
    }
}

impl std::fmt::Debug for PerLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let positions: Vec<usize> = self.limits.iter().map(|(p, _)| *p).collect();
        f.debug_struct("PerLimit")
            .field("limits", &positions)
            .finish_non_exhaustive()
    }
}

impl KeyExtractor for PerLimit {
    fn extract(&self, parts: &Parts) -> Option<Key> {
        let key = self.key.extract(parts)?;
        let mut own: SmallVec<[(usize, Key); 4]> = SmallVec::new();
        for (position, extractor) in &self.limits {
            own.push((*position, extractor.extract(parts)?));
        }
        Some(key.with_limit_keys(own))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{Global, Header};

    fn parts(headers: &[(&str, &str)]) -> Parts {
        let mut req = http::Request::get("/");
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        req.body(()).unwrap().into_parts().0
    }

    #[test]
    fn each_limit_gets_its_key_and_a_missing_one_means_none() {
        let per = PerLimit::new(Header::new("x-api-key").unwrap())
            .limit(1, Header::new("x-tenant").unwrap())
            .limit(2, Global);
        let key = per
            .extract(&parts(&[("x-api-key", "k1"), ("x-tenant", "acme")]))
            .unwrap();
        assert!(key.limit_key(0).as_str().starts_with("header:x-api-key:#"));
        assert!(key.limit_key(1).as_str().starts_with("header:x-tenant:#"));
        assert_eq!(key.limit_key(2).as_str(), "global");
        assert_eq!(key.hash_tag(), "global");
        assert!(per.extract(&parts(&[("x-api-key", "k1")])).is_none());
    }

    #[test]
    fn the_last_key_for_a_position_wins() {
        let per = PerLimit::new(Global)
            .limit(1, |_: &Parts| Some(Key::new("a")))
            .limit(1, |_: &Parts| Some(Key::new("b")))
            .limit(MAX_LIMITS, |_: &Parts| Some(Key::new("c")));
        let key = per.extract(&parts(&[])).unwrap();
        assert_eq!(key.to_string(), "global;1=b");
    }
}

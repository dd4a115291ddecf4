//! What the service's unit tests share: a memory store that counts its calls and can fail, and
//! requests.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use super::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use super::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::{Check, Commit, LimitCosts, MemoryStore, Store};

/// A [`MemoryStore`] that counts the checks it is asked (of one cost or a cost per limit) and
/// fails while `down`.
#[derive(Clone, Default)]
pub(super) struct Flaky {
    memory: MemoryStore,
    down: Arc<AtomicBool>,
    calls: Arc<AtomicUsize>,
}

impl Flaky {
    pub(super) fn fail(&self, down: bool) {
        self.down.store(down, Ordering::Relaxed);
    }

    pub(super) fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }
}

impl Store for Flaky {
    fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.down.load(Ordering::Relaxed) {
            return Check::ready(Err(StoreError::Connection("connection refused".into())));
        }
        Check::ready(Ok(self.memory.check_now(policy, key, cost)))
    }

    fn limit_costs(&self) -> Option<&dyn LimitCosts> {
        Some(self)
    }
}

impl LimitCosts for Flaky {
    fn check_costs(&self, policy: &Policy, key: &Key, costs: &[u64], commit: Commit) -> Check {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.down.load(Ordering::Relaxed) {
            return Check::ready(Err(StoreError::Connection("connection refused".into())));
        }
        Check::ready(self.memory.check_costs_now(policy, key, costs, commit))
    }
}

/// A request of `domain` with one descriptor per list of entries.
pub(super) fn request(domain: &str, descriptors: &[&[(&str, &str)]]) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors: descriptors
            .iter()
            .map(|entries| RateLimitDescriptor {
                entries: entries
                    .iter()
                    .map(|(key, value)| Entry {
                        key: (*key).into(),
                        value: (*value).into(),
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        hits_addend: 0,
    }
}

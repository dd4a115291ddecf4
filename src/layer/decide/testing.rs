//! What the decider's unit tests share: a memory store that can answer later or fail, layers
//! over it, and requests.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::request::Parts;

use super::{Decider, Start, Verdict};
use crate::decision::Decision;
use crate::error::StoreError;
use crate::key::Key;
use crate::layer::{RateLimitBuilder, RateLimitLayer};
use crate::limit::Limit;
use crate::policy::Policy;
use crate::store::{Check, MemoryStore, Store};

/// A [`MemoryStore`] that answers at once, later (as a networked store would), or fails.
#[derive(Clone, Default)]
pub(super) struct TestStore {
    pub(super) memory: MemoryStore,
    pub(super) later: Arc<AtomicBool>,
    pub(super) down: Arc<AtomicBool>,
}

impl TestStore {
    pub(super) fn later() -> Self {
        let store = TestStore::default();
        store.later.store(true, Ordering::Relaxed);
        store
    }

    pub(super) fn fail(&self, down: bool) {
        self.down.store(down, Ordering::Relaxed);
    }
}

impl Store for TestStore {
    fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        if self.down.load(Ordering::Relaxed) {
            return Check::ready(Err(StoreError::Connection("connection refused".into())));
        }
        let outcome = Ok(self.memory.check_now(policy, key, cost));
        if self.later.load(Ordering::Relaxed) {
            Check::pending(async move { outcome })
        } else {
            Check::ready(outcome)
        }
    }
}

/// `n` requests an hour.
pub(super) fn policy(name: &str, n: u64) -> Policy {
    Policy::new(
        name,
        [Limit::fixed_window(n, Duration::from_secs(3600)).unwrap()],
    )
    .unwrap()
}

/// The decider of `builder`'s layer.
pub(super) fn decider(builder: RateLimitBuilder) -> Arc<Decider> {
    builder.build().expect("valid layer").decider()
}

/// The decider of a layer with `policy` in `store`, keyed by `x-api-key`.
pub(super) fn keyed(store: impl Store, policy: Policy) -> RateLimitBuilder {
    RateLimitLayer::builder(store, policy).key(crate::key::Header::new("x-api-key").unwrap())
}

/// A request head: `METHOD /path`, with these headers.
pub(super) fn parts(method: &str, path: &str, headers: &[(&str, &str)]) -> Parts {
    let mut request = http::Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(()).unwrap().into_parts().0
}

/// A request with API key `key`.
pub(super) fn with_key(key: &str) -> Parts {
    parts("GET", "/", &[("x-api-key", key)])
}

/// The decision of a request that proceeds; panics on any other start.
pub(super) fn proceeds(start: Start) -> Decision {
    match start {
        Start::Decided(Verdict::Proceed(decision, ..)) => decision,
        other => panic!("expected to proceed, got {}", name(&other)),
    }
}

/// The response of a request answered by the layer; panics on any other start.
pub(super) fn responds(start: Start) -> http::Response<bytes::Bytes> {
    match start {
        Start::Decided(Verdict::Respond(response)) => response,
        other => panic!("expected a response, got {}", name(&other)),
    }
}

pub(super) fn name(start: &Start) -> &'static str {
    match start {
        Start::Check(..) => "Check",
        Start::Wait(..) => "Wait",
        Start::Decided(Verdict::Proceed(..)) => "Proceed",
        Start::Decided(Verdict::Respond(..)) => "Respond",
        Start::Unlimited => "Unlimited",
    }
}

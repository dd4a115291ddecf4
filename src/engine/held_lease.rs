//! A request's slot under a concurrency limit, held from its admission until its response
//! body ends or is dropped (a client that went away, a handler that panicked: the future or
//! body holding it is dropped either way), then given back to the store that took it.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use super::store_meter::LeaseMeter;
use crate::key::Key;
use crate::lease::Lease;
use crate::policy::Policy;
use crate::store::{MemoryStore, Store};

/// The store that took the lease: the layer's, or its in-memory fallback.
pub(crate) enum LeaseStore {
    Shared(Arc<dyn Store>),
    Local(MemoryStore),
}

/// One held lease; dropping it releases the lease, exactly once, and counts it out of the
/// leases in flight.
pub(crate) struct HeldLease {
    store: LeaseStore,
    policy: Policy,
    key: Key,
    lease: Lease,
    _meter: LeaseMeter,
}

impl HeldLease {
    pub(crate) fn new(
        store: LeaseStore,
        policy: Policy,
        key: Key,
        lease: Lease,
        meter: LeaseMeter,
    ) -> Self {
        HeldLease {
            store,
            policy,
            key,
            lease,
            _meter: meter,
        }
    }
}

impl Drop for HeldLease {
    /// One store call, never awaited by the response: a store in memory answers at once; a
    /// store across the network answers on a spawned task. If it fails (or no runtime is
    /// left to run it), the lease lapses after the limit's lease timeout.
    fn drop(&mut self) {
        let mut release = match &self.store {
            LeaseStore::Shared(store) => store.release(&self.policy, &self.key, self.lease),
            LeaseStore::Local(store) => {
                store.release_now(&self.policy, &self.key, self.lease);
                return;
            }
        };
        let policy = self.policy.name_arc();
        let failed = move |error: crate::StoreError| {
            tracing::debug!(
                policy = &*policy,
                error = %crate::error::Chain(&error),
                "releasing a concurrency lease failed; it lapses after its timeout"
            );
        };
        match release
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(error)) => failed(error),
            Poll::Pending => match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(async move {
                        if let Err(error) = release.await {
                            failed(error);
                        }
                    });
                }
                Err(_) => tracing::debug!(
                    "no runtime to release a concurrency lease; it lapses after its timeout"
                ),
            },
        }
    }
}

//! What this process booked in memory while the store was gone, told to the store when it
//! answers again, before any other caller goes back to it.
//!
//! While the store fails, each process books at its share of the policy in memory; the
//! store knows nothing of it, and answers again with the state it had when it went away. Had
//! the fleet gone back to it as it is, the store's idle limits would have handed out a fresh
//! burst on top of what memory admitted in the last period: up to one burst more than the
//! policy, fleet-wide, at the worst moment (an upstream that just came back too). So the
//! caller whose call finds the store again first charges it, per key booked in memory, with
//! the units whose slots still count: those within the last period of each limit, or still
//! ahead (a waiter holding a memory slot). The others keep deciding in memory until those
//! charges are answered (or the store deadline passes), then go to the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::key::Key;
use crate::policy::Policy;
use crate::store::{Store, cost_at};

/// The keys remembered in one outage: past them, bookings in memory are not told to the
/// store (a process with that many keys in an outage is a crawler of many hosts, whose
/// per-key bursts matter less than the memory held for them).
const MAX_KEYS: usize = 1024;

/// One booking in memory: when its slot was (or will be), and its costs (one per limit, or
/// one for all).
type Booked = (Instant, Box<[u64]>);

/// Bookings made in memory since the store failed, per key.
#[derive(Default)]
pub(super) struct Outage {
    booked: Mutex<HashMap<Key, Vec<Booked>>>,
}

impl Outage {
    /// Remembers a booking in memory of `costs` for `key`, at `slot`; forgets the key's
    /// bookings older than `longest` (they no longer count under any limit).
    pub(super) fn record(&self, key: &Key, slot: Instant, costs: &[u64], longest: Duration) {
        let mut booked = self.booked.lock().unwrap_or_else(PoisonError::into_inner);
        if !booked.contains_key(key) && booked.len() >= MAX_KEYS {
            return;
        }
        let bookings = booked.entry(key.clone()).or_default();
        let now = Instant::now();
        bookings.retain(|(at, _)| *at + longest > now);
        bookings.push((slot, costs.into()));
    }

    fn take(&self) -> HashMap<Key, Vec<Booked>> {
        std::mem::take(&mut *self.booked.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Outage {
    /// Tells `store` what memory booked under `policy` that still counts (one call per key,
    /// concurrently, waiting at most `deadline`), and forgets it. How many calls it made.
    pub(super) async fn tell(
        &self,
        store: &Arc<dyn Store>,
        policy: &Policy,
        deadline: Duration,
    ) -> u64 {
        let booked = self.take();
        let mut charges = Vec::new();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            for (key, bookings) in booked {
                let costs = still_counted(policy, &bookings);
                if costs.iter().all(|c| *c == 0) {
                    continue;
                }
                let (store, policy) = (Arc::clone(store), policy.clone());
                charges.push(runtime.spawn(async move {
                    let Some(reservations) = store.reservations() else {
                        return;
                    };
                    if let Err(err) = reservations.charge_costs(&policy, &key, &costs).await {
                        tracing::debug!(%err, "telling the store what memory booked failed");
                    }
                }));
            }
        }
        let calls = charges.len() as u64;
        let told = async {
            for charge in charges {
                let _ = charge.await;
            }
        };
        let _ = tokio::time::timeout(deadline, told).await;
        calls
    }
}

/// Per limit of `policy`, the units of `bookings` whose slots lie within the limit's period
/// before now, or ahead.
fn still_counted(policy: &Policy, bookings: &[Booked]) -> Box<[u64]> {
    let now = Instant::now();
    policy
        .limits()
        .iter()
        .enumerate()
        .map(|(i, limit)| {
            bookings
                .iter()
                .filter(|(slot, _)| *slot + limit.period() > now)
                .map(|(_, costs)| cost_at(costs, i))
                .sum()
        })
        .collect()
}

//! The store's decisions and syncs on a manual clock, against the sync script's Rust twin:
//! the fleet's view through syncs (`fleet`), isolation and the key cap (`isolation`), keys
//! turning hot and cooling (`hot_keys`), the RLS's counters (`counters`).

use std::time::Duration;

use super::core::{Core, SyncItem};
use super::merge::Keyspace;
use super::settings::Settings;
use super::sim::{Fleet, Instance};
use crate::decision::DecisionSource;
use crate::key::Key;
use crate::limit::Limit;
use crate::policy::Policy;
use crate::store::ManualClock;

const T0: u64 = 1_700_000_000_000_000;

/// An instance that turns a key hot at its first decision (the rule is tested on its own).
fn instance(clock: &ManualClock, id: &str, instances: u32) -> Instance {
    tuned(clock, id, instances, (0.9, 1.0))
}

/// An instance that admits up to the limit exactly, as its view has it.
fn exact(clock: &ManualClock, id: &str, instances: u32) -> Instance {
    tuned(clock, id, instances, (1.0, 1.0))
}

/// An instance with the default hot-key rule and `marks`.
fn ruled(clock: &ManualClock, id: &str, instances: u32, marks: (f64, f64)) -> Instance {
    Instance::new(
        Duration::from_millis(100),
        marks,
        instances,
        clock.clone(),
        id,
        7,
    )
    .unwrap()
}

fn tuned(clock: &ManualClock, id: &str, instances: u32, marks: (f64, f64)) -> Instance {
    Instance::tuned(
        Duration::from_millis(100),
        marks,
        instances,
        clock.clone(),
        id,
        7,
        &[("local_after", 1.0)],
    )
    .unwrap()
}

fn sync(i: &Instance, fleet: &mut Fleet, clock: &ManualClock) {
    let now = clock.now_us_for_tests();
    let batch = i.begin_sync();
    let reply = fleet.sync(&batch, now);
    i.finish_sync(batch, Some(reply), now, now);
}

/// Turns `key` hot on `i`: one decision (exact, of cost 0), then the sync that brings the view.
fn join(i: &Instance, fleet: &mut Fleet, clock: &ManualClock, policy: &Policy, key: &Key) {
    let d = i.check(fleet, policy, key, 0);
    assert_eq!(
        d.source(),
        DecisionSource::Store,
        "decided exactly until it is hot"
    );
    sync(i, fleet, clock);
    assert_eq!(
        i.check(fleet, policy, key, 0).source(),
        DecisionSource::LocalFirst
    );
}

fn admitted(i: &Instance, fleet: &mut Fleet, policy: &Policy, key: &Key, n: usize) -> usize {
    (0..n)
        .filter(|_| i.check(fleet, policy, key, 1).is_allowed())
        .count()
}

impl ManualClock {
    fn now_us_for_tests(&self) -> u64 {
        crate::store::Clock::now_us(self)
    }
}

/// Runs `instances` for 12 s on `clock`, 1 ms at a time: instance `n` offers `offered(ms, n)`
/// requests of `key` in millisecond `ms` and syncs every 100 ms from an offset of
/// `stagger × n` ms. Answers how many were admitted after the first 2 s.
fn admitted_after_two_seconds(
    instances: &[Instance],
    clock: &ManualClock,
    policy: &Policy,
    key: &Key,
    offered: impl Fn(u64, usize) -> u32,
    stagger: u64,
) -> u32 {
    let mut fleet = Fleet::default();
    let mut admitted = 0;
    for ms in 0..12_000u64 {
        for (n, i) in instances.iter().enumerate() {
            for _ in 0..offered(ms, n) {
                if i.check(&mut fleet, policy, key, 1).is_allowed() && ms >= 2_000 {
                    admitted += 1;
                }
            }
            if (ms + stagger * n as u64).is_multiple_of(100) {
                sync(i, &mut fleet, clock);
            }
        }
        clock.advance(Duration::from_millis(1));
    }
    admitted
}

/// One sync of `core` against `fleet`, at `now` (what `sync` does for an `Instance`).
fn sync_core(core: &Core, fleet: &mut Keyspace, now: u64) -> Vec<SyncItem> {
    let items = core.begin_sync();
    let replies = items
        .iter()
        .map(|item| fleet.sync("t", item, now, 2_000))
        .collect();
    core.finish_sync(items.clone(), Ok((now, replies)), now, now);
    items
}

fn core(clock: &ManualClock, settings: Settings) -> Core {
    Core::new(settings, Box::new(clock.clone()), "a".to_owned(), 7)
}

mod counters;
mod fleet;
mod hot_keys;
mod isolation;
mod refunds;

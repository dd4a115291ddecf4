//! The store's decisions and syncs on a manual clock, against the sync script's Rust twin.

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

#[test]
fn the_fleet_s_usage_reaches_every_instance_through_syncs() {
    let clock = ManualClock::new(T0);
    let policy = Policy::new(
        "p",
        [Limit::fixed_window(100, Duration::from_secs(10)).unwrap()],
    )
    .unwrap();
    let key = Key::new("k");
    let (a, b) = (instance(&clock, "a", 2), instance(&clock, "b", 2));
    let mut fleet = Fleet::default();
    join(&a, &mut fleet, &clock, &policy, &key);
    join(&b, &mut fleet, &clock, &policy, &key);
    assert_eq!(admitted(&a, &mut fleet, &policy, &key, 60), 60);
    sync(&a, &mut fleet, &clock);
    b.check(&mut fleet, &policy, &key, 0);
    sync(&b, &mut fleet, &clock);
    let d = b.check(&mut fleet, &policy, &key, 1);
    assert_eq!(d.source(), DecisionSource::LocalFirst);
    assert!(d.is_allowed());
    assert_eq!(d.remaining(), Some(39), "60 of a's, then this one");
    // `b` can take at most what is left, give or take the probabilistic band.
    let got = admitted(&b, &mut fleet, &policy, &key, 100);
    assert!((29..=39).contains(&got), "{got}");
    let denied = b.check(&mut fleet, &policy, &key, 1);
    assert!(!denied.is_allowed());
    assert!(denied.retry_after().unwrap() > Duration::ZERO);
}

#[test]
fn a_lost_reply_or_a_repeated_sync_never_counts_twice() {
    let clock = ManualClock::new(T0);
    let policy = Policy::new(
        "p",
        [Limit::fixed_window(1000, Duration::from_secs(10)).unwrap()],
    )
    .unwrap();
    let key = Key::new("k");
    let (a, b) = (instance(&clock, "a", 2), instance(&clock, "b", 2));
    let mut fleet = Fleet::default();
    join(&a, &mut fleet, &clock, &policy, &key);
    assert_eq!(admitted(&a, &mut fleet, &policy, &key, 10), 10);
    // The call runs in Redis, but its reply is lost: `a` sends the same count again.
    let now = clock.now_us_for_tests();
    let batch = a.begin_sync();
    fleet.sync(&batch, now);
    a.finish_sync(batch, None, now, now);
    assert_eq!(admitted(&a, &mut fleet, &policy, &key, 5), 5);
    sync(&a, &mut fleet, &clock);
    sync(&a, &mut fleet, &clock);
    // Exactly, on `b` (cold there): 15 used.
    assert_eq!(
        b.check(&mut fleet, &policy, &key, 1).remaining(),
        Some(1000 - 15 - 1)
    );
}

#[test]
fn the_rest_of_the_fleet_is_extrapolated_between_syncs() {
    let clock = ManualClock::new(T0);
    let policy = Policy::new(
        "p",
        [Limit::fixed_window(10_000, Duration::from_secs(100)).unwrap()],
    )
    .unwrap();
    let key = Key::new("k");
    let (a, b) = (instance(&clock, "a", 2), instance(&clock, "b", 2));
    let mut fleet = Fleet::default();
    join(&a, &mut fleet, &clock, &policy, &key);
    join(&b, &mut fleet, &clock, &policy, &key);
    // `a` spends 20 per 100 ms; `b` spends nothing and syncs after `a` each time.
    for _ in 0..5 {
        assert_eq!(admitted(&a, &mut fleet, &policy, &key, 20), 20);
        b.check(&mut fleet, &policy, &key, 0);
        sync(&a, &mut fleet, &clock);
        sync(&b, &mut fleet, &clock);
        clock.advance(Duration::from_millis(100));
    }
    // 100 synced, 100 ms ago: 150 ms later `b` credits `a` with its rate, 200/s, for the
    // half interval of lag and those 150 ms.
    clock.advance(Duration::from_millis(50));
    let used = 10_000 - b.check(&mut fleet, &policy, &key, 0).remaining().unwrap();
    assert_eq!(used, 100 + 10 + 30);
    // Extrapolation stops two intervals after the last sync: the rate is unknown past it.
    clock.advance(Duration::from_millis(150));
    let used = 10_000 - b.check(&mut fleet, &policy, &key, 0).remaining().unwrap();
    assert_eq!(used, 100 + 10 + 40);
}

#[test]
fn isolated_instances_take_their_share_and_reconcile_it_on_return() {
    let clock = ManualClock::new(T0);
    let policy = Policy::new(
        "p",
        [Limit::fixed_window(1000, Duration::from_secs(100)).unwrap()],
    )
    .unwrap();
    let key = Key::new("k");
    let a = exact(&clock, "a", 4);
    let mut fleet = Fleet::default();
    join(&a, &mut fleet, &clock, &policy, &key);
    assert_eq!(admitted(&a, &mut fleet, &policy, &key, 10), 10);
    sync(&a, &mut fleet, &clock);
    // Redis is gone: syncs fail for longer than the grace of three intervals; the share
    // (1000 / 4).
    let failed_at = clock.now_us_for_tests();
    let batch = a.begin_sync();
    a.finish_sync(batch, None, failed_at, failed_at);
    clock.advance(Duration::from_secs(1));
    assert_eq!(admitted(&a, &mut fleet, &policy, &key, 1000), 250);
    // A failed sync in between carries them too; Redis ran it, its answer was lost.
    let batch = a.begin_sync();
    fleet.sync(&batch, clock.now_us_for_tests());
    a.finish_sync(batch, None, failed_at, failed_at);
    // Back: what was admitted alone reaches the fleet, once.
    clock.advance(Duration::from_millis(1));
    sync(&a, &mut fleet, &clock);
    sync(&a, &mut fleet, &clock);
    let other = exact(&clock, "b", 4);
    assert_eq!(
        other.check(&mut fleet, &policy, &key, 0).remaining(),
        Some(1000 - 10 - 250)
    );
}

#[test]
fn a_redis_that_forgot_the_key_is_not_replayed_what_was_admitted_alone() {
    let clock = ManualClock::new(T0);
    let policy = Policy::new(
        "p",
        [Limit::fixed_window(1000, Duration::from_secs(100)).unwrap()],
    )
    .unwrap();
    let key = Key::new("k");
    let a = exact(&clock, "a", 4);
    let mut fleet = Fleet::default();
    join(&a, &mut fleet, &clock, &policy, &key);
    sync(&a, &mut fleet, &clock);
    let failed_at = clock.now_us_for_tests();
    let batch = a.begin_sync();
    a.finish_sync(batch, None, failed_at, failed_at);
    clock.advance(Duration::from_secs(1));
    assert_eq!(admitted(&a, &mut fleet, &policy, &key, 1000), 250);
    // Redis restarted empty: 3 more, counted while connected, are all it learns.
    let mut restarted = Fleet::default();
    sync(&a, &mut restarted, &clock);
    assert_eq!(admitted(&a, &mut restarted, &policy, &key, 3), 3);
    sync(&a, &mut restarted, &clock);
    let other = exact(&clock, "b", 4);
    assert_eq!(
        other.check(&mut restarted, &policy, &key, 0).remaining(),
        Some(1000 - 3)
    );
}

#[test]
fn a_healed_partition_grants_the_fleet_no_second_burst() {
    // 2 instances, GCRA 200/s (a burst of 200), each offered 300/s; syncs fail from 2 s to
    // 3 s (Redis keeps its state), each deciding alone on its share once isolated.
    let clock = ManualClock::new(T0);
    let policy = Policy::new("p", [Limit::gcra(200, Duration::from_secs(1)).unwrap()]).unwrap();
    let key = Key::new("k");
    let pair = [instance(&clock, "a", 2), instance(&clock, "b", 2)];
    let mut fleet = Fleet::default();
    let mut admitted = 0;
    let (cut, healed, end) = (2_000, 3_000, 7_000u64);
    for ms in 0..end {
        for (n, i) in pair.iter().enumerate() {
            if (ms + 5 * n as u64) % 10 < 3 && i.check(&mut fleet, &policy, &key, 1).is_allowed() {
                admitted += 1;
            }
            if (ms + 50 * n as u64).is_multiple_of(100) {
                if (cut..healed).contains(&ms) {
                    let now = clock.now_us_for_tests();
                    i.finish_sync(i.begin_sync(), None, now, now);
                } else {
                    sync(i, &mut fleet, &clock);
                }
            }
        }
        clock.advance(Duration::from_millis(1));
    }
    // The burst, then the rate; the shares' fresh bursts on isolation are paid back after.
    let ideal = 200.0 + 200.0 * end as f64 / 1000.0;
    let ratio = f64::from(admitted) / ideal;
    assert!(
        (0.95..=1.05).contains(&ratio),
        "admitted {admitted} of {ideal}: {ratio:.3}"
    );
}

#[test]
fn a_steady_overload_converges_on_the_limit() {
    // 4 instances, GCRA 200/s, each offered 150/s (3x in all), syncing every 100 ms.
    let clock = ManualClock::new(T0);
    let policy = Policy::new("p", [Limit::gcra(20, Duration::from_millis(100)).unwrap()]).unwrap();
    let key = Key::new("k");
    // The default rule: each instance turns the key hot within its second interval.
    let fleet_of: Vec<Instance> = (0..4)
        .map(|i| ruled(&clock, &format!("i{i}"), 4, (0.9, 1.0)))
        .collect();
    // 150/s each: three requests every 20 ms, staggered.
    let offered = |ms: u64, n: usize| u32::from((ms + 5 * n as u64) % 20 < 3);
    let admitted = admitted_after_two_seconds(&fleet_of, &clock, &policy, &key, offered, 25);
    let expected = 200.0 * 10.0;
    let ratio = f64::from(admitted) / expected;
    assert!(
        (0.95..=1.05).contains(&ratio),
        "admitted {admitted} of {expected}: {ratio:.3}"
    );
}

#[test]
fn a_hot_key_far_over_its_limit_admits_the_limit() {
    // 3 instances, GCRA 200/s, 50x in all (10 000/s: 4, 3 and 3 requests each millisecond),
    // the default marks and rule. Extrapolating the others a step at a time, each at the
    // probability of the level it started from, overshot the band's top after every sync:
    // the views stood full while the fleet was not, and admitted 0.90 of the limit.
    let clock = ManualClock::new(T0);
    let policy = Policy::new("p", [Limit::gcra(200, Duration::from_secs(1)).unwrap()]).unwrap();
    let key = Key::new("k");
    let fleet_of: Vec<Instance> = (0..3)
        .map(|i| ruled(&clock, &format!("i{i}"), 3, crate::store::DEFAULT_MARKS))
        .collect();
    let offered = |_: u64, n: usize| if n == 0 { 4 } else { 3 };
    let admitted = admitted_after_two_seconds(&fleet_of, &clock, &policy, &key, offered, 33);
    let expected = 200.0 * 10.0;
    let ratio = f64::from(admitted) / expected;
    assert!(
        (0.95..=1.05).contains(&ratio),
        "admitted {admitted} of {expected}: {ratio:.3}"
    );
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

#[test]
fn the_key_cap_never_drops_units_redis_has_not_acknowledged() {
    let clock = ManualClock::new(T0);
    let settings = Settings {
        max_keys: 64, // one key per shard
        local_after: 1,
        ..Settings::default()
    };
    let core = core(&clock, settings);
    let policy = Policy::new(
        "p",
        [Limit::fixed_window(1000, Duration::from_secs(10)).unwrap()],
    )
    .unwrap();
    let check = |name: String, cost| core.check(&policy, &Key::new(name), cost);
    let mut fleet = Keyspace::default();
    // 640 keys turn hot one by one (a decision, exact, then a sync that brings the view; the
    // syncs of the others fail) and count a unit each in memory.
    for i in 0..640 {
        let name = format!("counted{i}");
        assert!(check(name.clone(), 0).is_none());
        let now = clock.now_us_for_tests();
        let (joining, others): (Vec<_>, Vec<_>) = core
            .begin_sync()
            .into_iter()
            .partition(|item| item.key.as_str() == name);
        core.finish_sync(others, Err(()), now, now);
        let replies = joining.iter().map(|item| fleet.sync("t", item, now, 2_000));
        let replies = replies.collect();
        core.finish_sync(joining, Ok((now, replies)), now, now);
        assert!(check(name, 1).unwrap().is_allowed());
    }
    // Units not acknowledged yet: no key holding them is evicted, whatever the cap.
    assert_eq!(core.len(), 640);
    // Keys that counted nothing are evicted in their stead.
    for i in 0..640 {
        check(format!("free{i}"), 0);
    }
    assert!(core.len() < 2 * 640);
    let now = clock.now_us_for_tests();
    let items = sync_core(&core, &mut fleet, now);
    assert_eq!(
        items.iter().map(|item| item.counted).sum::<u64>(),
        640,
        "every unit reached the fleet"
    );
    // Acknowledged, they can go: new keys evict them, the map grows no more.
    let before = core.len();
    for i in 0..640 {
        check(format!("later{i}"), 0);
    }
    assert!(core.len() <= before, "{} > {before}", core.len());
    // Idle, out of the syncs and settled: swept.
    clock.advance(Duration::from_secs(61));
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    clock.advance(Duration::from_secs(61));
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    core.sweep();
    assert_eq!(core.len(), 0);
}

#[test]
fn the_sync_age_counts_from_the_last_success_or_round_with_nothing_to_send() {
    let clock = ManualClock::new(T0);
    // A key hot at its first decision, with room to be decided locally.
    let settings = Settings {
        local_after: 1,
        ..Settings::default()
    };
    let core = Core::new(settings, Box::new(clock.clone()), "a".to_owned(), 7);
    let policy = Policy::new("p", [Limit::gcra(10_000, Duration::from_secs(10)).unwrap()]).unwrap();
    clock.advance(Duration::from_millis(300));
    assert_eq!(
        core.sync_age(),
        Duration::from_millis(300),
        "since it started"
    );
    core.nothing_to_sync();
    assert_eq!(core.sync_age(), Duration::ZERO);

    let mut fleet = Keyspace::default();
    core.check(&policy, &Key::new("k"), 1);
    clock.advance(Duration::from_millis(50));
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert_eq!(core.sync_age(), Duration::ZERO);

    // Syncs fail: the age grows, and past three intervals the store is isolated.
    core.check(&policy, &Key::new("k"), 1);
    for _ in 0..4 {
        clock.advance(Duration::from_millis(100));
        let items = core.begin_sync();
        assert!(!items.is_empty(), "failed keys are sent again");
        let now = clock.now_us_for_tests();
        core.finish_sync(items, Err(()), now, now);
    }
    assert_eq!(core.sync_age(), Duration::from_millis(400));
    assert!(core.is_isolated());
    clock.advance(Duration::from_millis(100));
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert_eq!(core.sync_age(), Duration::ZERO);
    assert!(!core.is_isolated());
}

/// An instance whose only hot key failed a sync (Redis away) and then cooled has nothing
/// left to sync: it is isolated no longer once Redis answers its heartbeat, rather than until
/// some later key syncs (its health reported it isolated with Redis back).
#[test]
fn an_idle_instance_is_isolated_no_longer_once_redis_answers() {
    let clock = ManualClock::new(T0);
    let settings = Settings {
        local_after: 1,
        ..Settings::default()
    };
    let core = core(&clock, settings);
    let mut fleet = Keyspace::default();
    let policy = Policy::new("p", [Limit::gcra(1000, Duration::from_secs(1)).unwrap()]).unwrap();
    let key = Key::new("k");
    assert!(core.check(&policy, &key, 1).is_none(), "cold: exact");
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert!(core.check(&policy, &key, 1).unwrap().is_allowed());
    clock.advance(Duration::from_millis(50));
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    // Redis goes away; the key, settled and quiet, is sent (warm) and fails, then leaves the
    // syncs (still hot: it owes nothing).
    let mut rounds = 0;
    loop {
        clock.advance(Duration::from_millis(100));
        let items = core.begin_sync();
        if items.is_empty() {
            core.nothing_to_sync();
            break;
        }
        let now = clock.now_us_for_tests();
        core.finish_sync(items, Err(()), now, now);
        rounds += 1;
        assert!(rounds < 10, "a cooled key leaves the syncs");
    }
    // Nothing to sync, Redis still away: isolated once the grace is over.
    for _ in 0..3 {
        clock.advance(Duration::from_millis(100));
        assert!(core.begin_sync().is_empty());
        core.nothing_to_sync();
    }
    assert!(core.is_isolated(), "syncs failed for {rounds} rounds");
    // Redis answers a heartbeat: the next round, with nothing to send, ends the isolation.
    clock.advance(Duration::from_millis(100));
    core.heard(clock.now_us_for_tests());
    clock.advance(Duration::from_millis(100));
    assert!(core.begin_sync().is_empty());
    core.nothing_to_sync();
    assert!(!core.is_isolated(), "Redis is back");
}

/// A hot key on an instance whose syncs fail, settled and quiet for the few intervals that
/// cool a key, stays hot: turned exact, its next decision would go to a Redis that is gone,
/// and the layer's fallback would decide it on a budget of its own beside this instance's
/// share (seen: four isolated instances admitting 1.6 times the limit).
#[test]
fn a_quiet_hot_key_stays_hot_and_takes_its_share_while_syncs_fail() {
    let clock = ManualClock::new(T0);
    let settings = Settings {
        local_after: 1,
        instances: 4,
        ..Settings::default()
    };
    let core = core(&clock, settings);
    let mut fleet = Keyspace::default();
    let policy = Policy::new("p", [Limit::gcra(1000, Duration::from_secs(1)).unwrap()]).unwrap();
    let key = Key::new("k");
    assert!(core.check(&policy, &key, 1).is_none());
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert!(core.check(&policy, &key, 1).is_some());
    clock.advance(Duration::from_millis(50));
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    // Redis goes away while the key is quiet: the rounds fail, then find nothing to send.
    for _ in 0..6 {
        clock.advance(Duration::from_millis(100));
        let items = core.begin_sync();
        if items.is_empty() {
            core.nothing_to_sync();
        } else {
            let now = clock.now_us_for_tests();
            core.finish_sync(items, Err(()), now, now);
        }
    }
    assert!(core.is_isolated());
    // Decided here, on the share (a quarter of the burst), none sent to the exact store.
    let decisions: Vec<_> = (0..1000)
        .map(|_| core.check(&policy, &key, 1))
        .collect::<Option<_>>()
        .expect("a hot key is decided in memory while isolated");
    let admitted = decisions.iter().filter(|d| d.is_allowed()).count();
    assert!((200..=250).contains(&admitted), "admitted {admitted}");
    assert!(
        decisions
            .iter()
            .all(|d| d.source() == DecisionSource::LocalFirst)
    );
    // Redis answers again: what was admitted alone is sent (once), and the key is synced.
    clock.advance(Duration::from_millis(100));
    let items = sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].alone, admitted as u64);
    assert!(!core.is_isolated());
}

/// An isolated instance decides a cold key here too, on its share: sent to a Redis that is
/// gone, the layer's fallback would decide it on a budget of its own. Its units reach the
/// fleet with the first sync once Redis answers, and the key cools back to exact after.
#[test]
fn an_isolated_instance_decides_a_cold_key_on_its_share() {
    let clock = ManualClock::new(T0);
    let settings = Settings {
        instances: 4,
        ..Settings::default()
    };
    let core = core(&clock, settings);
    let mut fleet = Keyspace::default();
    let policy = Policy::new("p", [Limit::gcra(1000, Duration::from_secs(1)).unwrap()]).unwrap();
    let (hot, cold) = (Key::new("hot"), Key::new("cold"));
    // Another key's syncs fail for three intervals: isolated.
    for _ in 0..10 {
        assert!(core.check(&policy, &hot, 1).is_none());
    }
    clock.advance(Duration::from_millis(100));
    for _ in 0..10 {
        assert!(core.check(&policy, &hot, 1).is_none());
    }
    for _ in 0..4 {
        let items = core.begin_sync();
        let now = clock.now_us_for_tests();
        core.finish_sync(items, Err(()), now, now);
        clock.advance(Duration::from_millis(100));
    }
    assert!(core.is_isolated());
    let decisions: Vec<_> = (0..1000)
        .map(|_| core.check(&policy, &cold, 1))
        .collect::<Option<_>>()
        .expect("decided here while isolated");
    let admitted = decisions.iter().filter(|d| d.is_allowed()).count();
    assert!((200..=250).contains(&admitted), "admitted {admitted}");
    // Redis answers: the units are sent once; quiet and settled, the key is exact again.
    let items = sync_core(&core, &mut fleet, clock.now_us_for_tests());
    let sent = items
        .iter()
        .find(|i| i.key == cold)
        .expect("the cold key's units");
    assert_eq!(sent.alone, admitted as u64);
    assert!(!core.is_isolated());
    clock.advance(Duration::from_millis(400));
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert!(core.check(&policy, &cold, 1).is_none());
}

/// An instance with nothing to sync (every key cold) learns that Redis is gone from a failed
/// heartbeat: isolated after the grace, it decides its keys on its share, until a heartbeat
/// sent after the failure is answered.
#[test]
fn a_failed_heartbeat_isolates_an_instance_with_nothing_to_sync() {
    let clock = ManualClock::new(T0);
    let settings = Settings {
        instances: 4,
        ..Settings::default()
    };
    let core = core(&clock, settings);
    let policy = Policy::new("p", [Limit::gcra(1000, Duration::from_secs(1)).unwrap()]).unwrap();
    let key = Key::new("k");
    assert!(core.check(&policy, &key, 1).is_none(), "cold: exact");
    let asked = clock.now_us_for_tests();
    clock.advance(Duration::from_millis(10));
    core.failed(asked, clock.now_us_for_tests());
    for _ in 0..4 {
        clock.advance(Duration::from_millis(100));
        assert!(core.begin_sync().is_empty());
        core.nothing_to_sync();
    }
    assert!(core.is_isolated());
    assert_eq!(
        core.check(&policy, &key, 1).map(|d| d.source()),
        Some(DecisionSource::LocalFirst)
    );
    // Redis answers: the unit counted alone is sent, once.
    clock.advance(Duration::from_millis(100));
    let mut fleet = Keyspace::default();
    let items = sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].alone, 1);
    assert!(!core.is_isolated());
}

/// Within the grace before isolation (a sync failed, the next ones not yet), a hot key that
/// cools stays hot too: an exact decision would fail as well.
#[test]
fn a_hot_key_that_cools_while_a_sync_fails_stays_hot() {
    let clock = ManualClock::new(T0);
    let settings = Settings {
        local_after: 1,
        ..Settings::default()
    };
    let core = core(&clock, settings);
    let mut fleet = Keyspace::default();
    let policy = Policy::new("p", [Limit::gcra(1000, Duration::from_secs(1)).unwrap()]).unwrap();
    let key = Key::new("k");
    assert!(core.check(&policy, &key, 1).is_none());
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert!(core.check(&policy, &key, 1).is_some());
    clock.advance(Duration::from_millis(50));
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    clock.advance(Duration::from_millis(100));
    let items = core.begin_sync();
    assert!(!items.is_empty(), "warm: still synced");
    let now = clock.now_us_for_tests();
    core.finish_sync(items, Err(()), now, now);
    // Quiet for three intervals: cooled, settled, not isolated yet. The round leaves it out
    // (it owes nothing), and its next request is still decided here.
    clock.advance(Duration::from_millis(250));
    assert!(core.begin_sync().is_empty());
    assert!(!core.is_isolated());
    assert!(core.check(&policy, &key, 1).is_some(), "still decided here");
    // Once a sync succeeds, a key that cools is decided exactly again.
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    clock.advance(Duration::from_millis(400));
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert!(core.check(&policy, &key, 1).is_none());
}

/// A heartbeat sent before a sync failed, its reply taken after (a busy runtime), says
/// nothing about Redis since: an instance with nothing left to sync still becomes isolated
/// (seen: one of four instances never isolated with Redis killed).
#[test]
fn a_heartbeat_sent_before_a_failed_sync_does_not_end_the_failure() {
    let clock = ManualClock::new(T0);
    let settings = Settings {
        local_after: 1,
        ..Settings::default()
    };
    let core = core(&clock, settings);
    let mut fleet = Keyspace::default();
    let policy = Policy::new("p", [Limit::gcra(1000, Duration::from_secs(1)).unwrap()]).unwrap();
    let key = Key::new("k");
    assert!(core.check(&policy, &key, 1).is_none());
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert!(core.check(&policy, &key, 1).is_some());
    clock.advance(Duration::from_millis(50));
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    // The heartbeat goes out; Redis dies; the next round (the key still warm) fails; the
    // heartbeat's reply is taken after; the rounds after find nothing to send.
    let asked = clock.now_us_for_tests();
    clock.advance(Duration::from_millis(200));
    let items = core.begin_sync();
    assert!(!items.is_empty());
    let now = clock.now_us_for_tests();
    core.finish_sync(items, Err(()), now, now);
    clock.advance(Duration::from_millis(1));
    core.heard(asked);
    for _ in 0..5 {
        clock.advance(Duration::from_millis(100));
        let items = core.begin_sync();
        if items.is_empty() {
            core.nothing_to_sync();
        } else {
            let now = clock.now_us_for_tests();
            core.finish_sync(items, Err(()), now, now);
        }
    }
    assert!(core.is_isolated());
}

/// A heartbeat Redis answers does not end the isolation while a key has units to send: its
/// view is stale until a sync brings the fleet's state, and its share holds until then.
#[test]
fn an_instance_with_units_to_send_stays_isolated_until_a_sync_succeeds() {
    let clock = ManualClock::new(T0);
    let settings = Settings {
        local_after: 1,
        ..Settings::default()
    };
    let core = core(&clock, settings);
    let mut fleet = Keyspace::default();
    let policy = Policy::new("p", [Limit::gcra(1000, Duration::from_secs(1)).unwrap()]).unwrap();
    let key = Key::new("k");
    assert!(core.check(&policy, &key, 1).is_none());
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    for _ in 0..4 {
        clock.advance(Duration::from_millis(100));
        assert!(core.check(&policy, &key, 1).is_some());
        let items = core.begin_sync();
        let now = clock.now_us_for_tests();
        core.finish_sync(items, Err(()), now, now);
    }
    assert!(core.is_isolated());
    clock.advance(Duration::from_millis(100));
    core.heard(clock.now_us_for_tests());
    clock.advance(Duration::from_millis(100));
    let items = core.begin_sync();
    assert!(!items.is_empty(), "the units counted alone are still owed");
    let now = clock.now_us_for_tests();
    core.finish_sync(items, Err(()), now, now);
    assert!(core.is_isolated(), "no sync has brought the fleet's state");
    clock.advance(Duration::from_millis(100));
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert!(!core.is_isolated());
}

#[test]
fn a_key_turns_hot_after_enough_decisions_in_one_interval() {
    let clock = ManualClock::new(T0);
    let core = core(&clock, Settings::default());
    let mut fleet = Keyspace::default();
    let hot = Policy::new("p", [Limit::gcra(1000, Duration::from_secs(1)).unwrap()]).unwrap();
    let key = Key::new("k");
    // Seven decisions an interval: cold, decided exactly, nothing to sync.
    for _ in 0..3 {
        for _ in 0..7 {
            assert!(core.check(&hot, &key, 1).is_none());
        }
        clock.advance(Duration::from_millis(100));
        assert!(sync_core(&core, &mut fleet, clock.now_us_for_tests()).is_empty());
    }
    // The eighth within one interval turns it hot; decided exactly until the view comes.
    for _ in 0..20 {
        assert!(core.check(&hot, &key, 1).is_none());
    }
    let items = sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert_eq!(items.len(), 1);
    assert_eq!(
        items[0].counted, 0,
        "its exact decisions are Redis's already"
    );
    let d = core.check(&hot, &key, 1).unwrap();
    assert_eq!(d.source(), DecisionSource::LocalFirst);
    // A limit that admits fewer than 8 units per interval stays exact, whatever the traffic.
    let tight = Policy::new(
        "t",
        [Limit::fixed_window(5, Duration::from_secs(3600)).unwrap()],
    )
    .unwrap();
    for _ in 0..100 {
        assert!(core.check(&tight, &key, 1).is_none());
    }
    assert!(
        sync_core(&core, &mut fleet, clock.now_us_for_tests())
            .iter()
            .all(|item| &*item.policy == "p")
    );
}

#[test]
fn a_lone_burst_leaves_a_key_exact() {
    let clock = ManualClock::new(T0);
    let core = core(&clock, Settings::default());
    let mut fleet = Keyspace::default();
    let policy = Policy::new("p", [Limit::gcra(1000, Duration::from_secs(1)).unwrap()]).unwrap();
    let key = Key::new("k");
    // A client's burst of 50 at once, then silence: exact throughout, never synced (a sync to
    // join would cost Redis more than the burst's exact calls save).
    for _ in 0..50 {
        assert!(core.check(&policy, &key, 1).is_none());
    }
    assert!(sync_core(&core, &mut fleet, clock.now_us_for_tests()).is_empty());
    // The same burst again a second later: still a lone burst.
    clock.advance(Duration::from_secs(1));
    for _ in 0..50 {
        assert!(core.check(&policy, &key, 1).is_none());
    }
    assert!(sync_core(&core, &mut fleet, clock.now_us_for_tests()).is_empty());
    // Bursts an interval apart are a hot key's traffic: it joins.
    clock.advance(Duration::from_millis(100));
    for _ in 0..8 {
        assert!(core.check(&policy, &key, 1).is_none());
    }
    assert_eq!(
        sync_core(&core, &mut fleet, clock.now_us_for_tests()).len(),
        1
    );
}

#[test]
fn a_hot_key_that_cools_is_decided_exactly_once_its_units_are_acknowledged() {
    let clock = ManualClock::new(T0);
    let settings = Settings {
        local_after: 4,
        ..Settings::default()
    };
    let core = core(&clock, settings);
    let mut fleet = Keyspace::default();
    let policy = Policy::new("p", [Limit::gcra(1000, Duration::from_secs(1)).unwrap()]).unwrap();
    let key = Key::new("k");
    // Warm for an interval, then hot.
    assert!(core.check(&policy, &key, 1).is_none());
    clock.advance(Duration::from_millis(100));
    for _ in 0..4 {
        assert!(core.check(&policy, &key, 1).is_none());
    }
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    for _ in 0..10 {
        assert!(core.check(&policy, &key, 1).unwrap().is_allowed());
    }
    // Quiet for a few intervals, but 10 units unacknowledged: still hot.
    clock.advance(Duration::from_millis(400));
    assert!(core.check(&policy, &key, 0).is_some());
    // Acknowledged, then quiet: exact again, and out of the syncs.
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    clock.advance(Duration::from_millis(400));
    assert!(sync_core(&core, &mut fleet, clock.now_us_for_tests()).is_empty());
    assert!(core.check(&policy, &key, 1).is_none());
}

/// The fleet's exact state holds every unit admitted, whichever way each was decided: exact
/// on a cold instance, in memory on a hot one, across a key turning hot and cooling again.
#[test]
fn a_switch_neither_gains_nor_loses_units() {
    let clock = ManualClock::new(T0);
    let policy = Policy::new(
        "p",
        [Limit::fixed_window(100_000, Duration::from_secs(100)).unwrap()],
    )
    .unwrap();
    let key = Key::new("k");
    let new = |id: &str| ruled(&clock, id, 2, (0.9, 1.0));
    let (a, b) = (new("a"), new("b"));
    let mut fleet = Fleet::default();
    let mut admitted = 0;
    let mut sources = std::collections::HashSet::new();
    // `a` takes 30 per interval (hot), `b` 2 (cold), for a second; then `a` goes quiet.
    for round in 0..20 {
        let busy = round < 10;
        for (i, n) in [(&a, if busy { 30 } else { 0 }), (&b, 2)] {
            for _ in 0..n {
                let d = i.check(&mut fleet, &policy, &key, 1);
                sources.insert(d.source());
                admitted += u64::from(d.is_allowed());
            }
            sync(i, &mut fleet, &clock);
        }
        clock.advance(Duration::from_millis(100));
    }
    assert!(sources.contains(&DecisionSource::LocalFirst));
    assert!(sources.contains(&DecisionSource::Store));
    assert_eq!(admitted, 10 * 32 + 10 * 2);
    // `a` cooled: exact again, and Redis's state holds every unit.
    let d = a.check(&mut fleet, &policy, &key, 0);
    assert_eq!(d.source(), DecisionSource::Store);
    assert_eq!(d.remaining(), Some(100_000 - admitted));
}

#[test]
fn a_hot_key_whose_rate_falls_is_decided_exactly_again() {
    let clock = ManualClock::new(T0);
    let core = core(&clock, Settings::default());
    let mut fleet = Keyspace::default();
    let policy = Policy::new(
        "p",
        [Limit::fixed_window(10_000, Duration::from_secs(100)).unwrap()],
    )
    .unwrap();
    let key = Key::new("k");
    // Warm (2 of 8) for an interval, then 8 in the next: hot.
    for _ in 0..2 {
        assert!(core.check(&policy, &key, 1).is_none());
    }
    clock.advance(Duration::from_millis(100));
    for _ in 0..8 {
        assert!(core.check(&policy, &key, 1).is_none());
    }
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    // One decision an interval: the interval before had 8, so it stays hot.
    clock.advance(Duration::from_millis(100));
    assert!(core.check(&policy, &key, 1).is_some());
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    // The interval before had 1, fewer than a quarter of 8, and Redis holds all it counted.
    clock.advance(Duration::from_millis(100));
    assert!(core.check(&policy, &key, 1).is_none());
    // The unit it decided in memory is in Redis's state (the exact decisions are the
    // caller's to make: none reached this keyspace).
    let d = fleet.check("t", &policy, &key, 0, clock.now_us_for_tests());
    assert_eq!(d.remaining(), Some(10_000 - 1));
}

/// A key reset through another instance (the Redis store's poll read it) is decided exactly
/// until the next sync, which it joins at once, brings the fresh state; the units counted
/// before are kept (sent with that sync), and another key stays local.
#[test]
fn a_hot_key_reset_elsewhere_is_decided_exactly_until_its_next_sync() {
    use std::sync::Arc;
    let clock = ManualClock::new(T0);
    let settings = Settings {
        local_after: 4,
        ..Settings::default()
    };
    let core = core(&clock, settings);
    let mut fleet = Keyspace::default();
    let policy = Policy::new("p", [Limit::gcra(1000, Duration::from_secs(1)).unwrap()]).unwrap();
    let (key, other) = (Key::new("k"), Key::new("o"));
    for k in [&key, &other] {
        assert!(core.check(&policy, k, 1).is_none());
    }
    clock.advance(Duration::from_millis(100));
    for k in [&key, &other] {
        for _ in 0..4 {
            assert!(core.check(&policy, k, 1).is_none());
        }
    }
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    for k in [&key, &other] {
        assert!(core.check(&policy, k, 1).unwrap().is_allowed());
    }
    let reset = vec![(Arc::<str>::from("p"), key.clone())];
    core.take_resets(1, |since| {
        assert_eq!(since, 0);
        Some(reset)
    });
    core.take_resets(1, |_| panic!("taken once"));
    assert!(
        core.check(&policy, &key, 1).is_none(),
        "exact after the reset"
    );
    assert!(
        core.check(&policy, &other, 1).is_some(),
        "another key stays local"
    );
    let items = sync_core(&core, &mut fleet, clock.now_us_for_tests());
    let synced = items.iter().find(|i| i.key == key).expect("synced");
    assert_eq!(
        synced.counted, 1,
        "the unit counted before the reset is kept"
    );
    assert!(core.check(&policy, &key, 1).is_some(), "local again");
}

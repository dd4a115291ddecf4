//! Keys turning hot and cooling, and what a switch does to the units.

use super::*;

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

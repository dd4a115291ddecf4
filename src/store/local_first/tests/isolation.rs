//! Syncs that fail: the key cap, the sync age, isolation and its end.

use super::*;

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

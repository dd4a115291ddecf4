//! The fleet's usage through syncs: replies lost or repeated, extrapolation, partitions, overload.

use super::*;

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

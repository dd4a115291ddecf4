//! Checks whose limit keys name their states (the RLS's counters): each counter is a key of
//! its own, a check is decided here only when all of them are hot, and it charges all of them
//! or none.

use super::*;
use crate::store::Commit;

/// A tight limit (10 a second) and a wide one, as an RLS check of two descriptors has them.
fn pair() -> Policy {
    Policy::new(
        "rls",
        [
            Limit::gcra(10, Duration::from_secs(1)).unwrap(),
            Limit::fixed_window(100_000, Duration::from_secs(3600)).unwrap(),
        ],
    )
    .unwrap()
}

fn counters(owns: &[&str]) -> Key {
    Key::new("rls:d").with_named_limit_keys(owns.iter().map(|o| Key::new(*o)))
}

/// Each synced counter's units counted here, by its own key's text.
fn counted(items: &[SyncItem]) -> Vec<(String, u64)> {
    let mut all: Vec<_> = items
        .iter()
        .map(|i| (i.key.limit_key(0).as_str().to_owned(), i.counted))
        .collect();
    all.sort();
    all
}

fn settings() -> Settings {
    Settings {
        local_after: 1,
        ..Settings::default()
    }
}

#[test]
fn a_check_of_hot_counters_is_decided_here_and_charges_all_or_none() {
    let clock = ManualClock::new(T0);
    let core = core(&clock, settings());
    let mut fleet = Keyspace::default();
    let policy = pair();
    let key = counters(&["tight", "wide"]);
    assert!(
        core.check_counters(&policy, &key, &[0], Commit::AllOrNone)
            .is_none(),
        "cold"
    );
    let joined = sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert_eq!(counted(&joined), [("tight".into(), 0), ("wide".into(), 0)]);
    let mut admitted: u64 = 0;
    let mut refused = 0;
    for _ in 0..40 {
        let d = core
            .check_counters(&policy, &key, &[1], Commit::AllOrNone)
            .expect("hot: decided here");
        assert_eq!(d.source(), DecisionSource::LocalFirst);
        assert_eq!(d.limits().len(), 2);
        if d.is_allowed() {
            admitted += 1;
        } else {
            refused += 1;
            assert!(!d.limits()[0].is_allowed(), "the tight limit refuses");
            assert!(
                d.limits()[1].is_allowed(),
                "the wide one would have admitted"
            );
        }
    }
    assert!(
        (8..=10).contains(&admitted),
        "{admitted} admitted of a burst of 10"
    );
    assert_eq!(refused, 40 - admitted);
    // Both counters were charged exactly the admitted requests: none for a refused one.
    let synced = sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert_eq!(
        counted(&synced),
        [("tight".into(), admitted), ("wide".into(), admitted)]
    );
}

#[test]
fn one_cold_counter_sends_the_whole_check_to_redis() {
    let clock = ManualClock::new(T0);
    let core = core(&clock, settings());
    let mut fleet = Keyspace::default();
    let policy = pair();
    let hot = counters(&["tight", "wide"]);
    assert!(
        core.check_counters(&policy, &hot, &[0], Commit::AllOrNone)
            .is_none()
    );
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert!(
        core.check_counters(&policy, &hot, &[1], Commit::AllOrNone)
            .is_some()
    );
    // The same tight counter beside a counter cold here: exact, and nothing charged here.
    let mixed = counters(&["tight", "fresh"]);
    let minute = Policy::new(
        "rls",
        [
            Limit::gcra(10, Duration::from_secs(1)).unwrap(),
            Limit::fixed_window(5, Duration::from_secs(60)).unwrap(),
        ],
    )
    .unwrap();
    for _ in 0..5 {
        assert!(
            core.check_counters(&minute, &mixed, &[1], Commit::AllOrNone)
                .is_none()
        );
    }
    let synced = sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert_eq!(
        counted(&synced),
        [("tight".into(), 1), ("wide".into(), 1)],
        "the cold limit (5 a minute) never turns hot; the tight counter counted only its local decision"
    );
}

#[test]
fn a_counter_is_one_entry_whichever_check_and_position_it_comes_in() {
    let clock = ManualClock::new(T0);
    let core = core(&clock, settings());
    let mut fleet = Keyspace::default();
    let policy = pair();
    let key = counters(&["tight", "wide"]);
    let tight = Policy::new("rls", [policy.limits()[0]]).unwrap();
    let alone = counters(&["tight"]);
    let swapped = Policy::new("rls", [policy.limits()[1], policy.limits()[0]]).unwrap();
    let reversed = counters(&["wide", "tight"]);
    assert!(
        core.check_counters(&policy, &key, &[0], Commit::AllOrNone)
            .is_none()
    );
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert!(
        core.check_counters(&policy, &key, &[1], Commit::AllOrNone)
            .unwrap()
            .is_allowed()
    );
    // The tight counter alone is a plain check of one limit key: the same entry, hot.
    let d = core.check(&tight, &alone, 1).expect("the same entry, hot");
    assert!(d.is_allowed());
    let d = core
        .check_counters(&swapped, &reversed, &[1], Commit::AllOrNone)
        .expect("hot");
    assert!(d.is_allowed());
    let synced = sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert_eq!(counted(&synced), [("tight".into(), 3), ("wide".into(), 2)]);
    // A plain key of the same text is another entry (cold).
    assert!(core.check(&tight, &Key::new("tight"), 1).is_none());
}

#[test]
fn under_always_every_hot_counter_is_charged_whatever_it_decides() {
    let clock = ManualClock::new(T0);
    let core = core(&clock, settings());
    let mut fleet = Keyspace::default();
    let policy = pair();
    let key = counters(&["tight", "wide"]);
    assert!(
        core.check_counters(&policy, &key, &[0, 0], Commit::Always)
            .is_none(),
        "cold"
    );
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    let mut refused_tight = 0;
    for _ in 0..40 {
        let d = core
            .check_counters(&policy, &key, &[1, 1], Commit::Always)
            .expect("hot: decided here");
        assert!(d.limits()[1].is_allowed(), "the wide limit fits every unit");
        if !d.limits()[0].is_allowed() {
            refused_tight += 1;
            assert_eq!(d.limits()[0].remaining(), 0);
            assert!(d.limits()[0].retry_after().is_some());
        }
    }
    assert!(refused_tight >= 30, "{refused_tight} refused of 40 on 10/s");
    // Every unit counted toward the fleet on both counters, refused or not.
    let synced = sync_core(&core, &mut fleet, clock.now_us_for_tests());
    assert_eq!(
        counted(&synced),
        [("tight".into(), 40), ("wide".into(), 40)]
    );
    // The tight counter is in debt: a check of nothing is refused.
    let read = core
        .check_counters(&policy, &key, &[0, 0], Commit::Always)
        .expect("hot");
    assert!(!read.limits()[0].is_allowed());
    assert!(read.limits()[1].is_allowed());
}

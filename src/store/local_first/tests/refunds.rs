//! Refunds given back to the views, and the syncs that cross them: a sync that went out before
//! a refund's call answers with the state Redis read before giving the refund back.

use super::*;

fn settings() -> Settings {
    Settings {
        local_after: 1,
        ..Settings::default()
    }
}

/// What the view has left of the limit, as a decision of cost 0 reports it.
fn remaining(core: &Core, policy: &Policy, key: &Key) -> u64 {
    let decision = core.check(policy, key, 0).expect("hot: decided here");
    decision.remaining().expect("a limit")
}

#[test]
fn a_sync_sent_before_a_refund_does_not_undo_it_and_one_sent_after_is_taken_as_is() {
    let clock = ManualClock::new(T0);
    let core = core(&clock, settings());
    let mut fleet = Keyspace::default();
    let policy = Policy::new(
        "p",
        [Limit::fixed_window(100, Duration::from_secs(10)).unwrap()],
    )
    .unwrap();
    let key = Key::new("k");
    assert!(core.check(&policy, &key, 0).is_none(), "cold");
    sync_core(&core, &mut fleet, clock.now_us_for_tests());
    let admitted_at = clock.now_us_for_tests();
    assert!(core.check(&policy, &key, 60).unwrap().is_allowed());
    sync_core(&core, &mut fleet, admitted_at);
    assert_eq!(remaining(&core, &policy, &key), 40);

    // A sync goes out; Redis reads the state (60 used) and its answer is slow to come back.
    let crossing = core.begin_sync();
    let sent_at = clock.now_us_for_tests();
    let read = crossing
        .iter()
        .map(|item| fleet.sync("t", item, sent_at, 2_000))
        .collect();
    // Meanwhile a refund's call goes out and Redis gives the 60 units back: the view at once.
    clock.advance(Duration::from_millis(1));
    let refund_sent = clock.now_us_for_tests();
    fleet.refund("t", &policy, &key, (60, admitted_at), refund_sent);
    core.give_back(&policy, &key, 60, admitted_at, refund_sent);
    assert_eq!(remaining(&core, &policy, &key), 100);
    // The crossing sync's answer holds the units; the view keeps the refund.
    clock.advance(Duration::from_millis(1));
    let now = clock.now_us_for_tests();
    core.finish_sync(crossing, Ok((sent_at, read)), sent_at, now);
    assert_eq!(remaining(&core, &policy, &key), 100, "the refund stands");
    // A sync that went out after the refund brings Redis's state as it is, taken as is.
    clock.advance(Duration::from_millis(1));
    let now = clock.now_us_for_tests();
    assert!(fleet.check("t", &policy, &key, 30, now).is_allowed());
    sync_core(&core, &mut fleet, now);
    assert_eq!(
        remaining(&core, &policy, &key),
        70,
        "the fleet's state, once"
    );
}

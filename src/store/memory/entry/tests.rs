//! The entry's check: one limit's state kept inline, the log only where a policy has one,
//! and the one-limit check agreeing with the steps of several.

use std::time::Duration;

use super::*;

#[test]
fn one_limit_is_kept_inline_and_a_log_only_where_a_policy_has_one() {
    let second = Duration::from_secs(1);
    let gcra = Policy::new("g", [Limit::gcra(5, second).expect("a limit")]).expect("policy");
    let mut entry = Entry::new(&gcra);
    assert!(entry.check(&gcra, 1, 10)[0].is_allowed());
    assert!(
        !entry.states.spilled(),
        "one limit's state needs no allocation"
    );
    assert!(entry.per_key.is_none(), "no log or leases to keep");

    let log = Policy::new("l", [Limit::sliding_log(2, second).expect("a limit")]).expect("policy");
    let mut entry = Entry::new(&log);
    assert!(entry.check(&log, 1, 10)[0].is_allowed());
    assert!(entry.check(&log, 1, 20)[0].is_allowed());
    assert!(
        !entry.check(&log, 1, 30)[0].is_allowed(),
        "the log counts both"
    );
    // Lapsed, then revived in place: the log is forgotten, not its allocation.
    let lapsed = entry.expires_at;
    entry.revive(lapsed);
    assert!(entry.per_key.is_some());
    assert!(entry.check(&log, 1, lapsed)[0].is_allowed());
    assert!(entry.check(&log, 1, lapsed + 1)[0].is_allowed());
    assert!(!entry.check(&log, 1, lapsed + 2)[0].is_allowed());
}

#[test]
fn one_limit_checks_as_the_steps_of_several_do() {
    let period = Duration::from_millis(10);
    let limits = [
        Limit::gcra(3, period),
        Limit::token_bucket(3, period),
        Limit::fixed_window(3, period),
        Limit::sliding_window(3, period),
        Limit::concurrency(3, period),
    ];
    for limit in limits {
        let policy = Policy::new("p", [limit.expect("a limit")]).expect("policy");
        let (mut fast, mut steps) = (Entry::new(&policy), Entry::new(&policy));
        // Costs of 0 to 4 (one past the count) at uneven times, some before the last (a clock
        // stepped back), denials and lapses among them.
        for i in 0..200u64 {
            let (cost, now) = (i * 7 % 5, 1_000_000 + i * i * 37 % 50_000 + i * 400);
            let mut reported = LimitStates::new();
            fast.check_into(&policy, &[cost], now, &mut reported);
            let mut walked = Steps::new();
            let allowed = steps.commit_steps(&policy, &[cost], now, &mut walked);
            let mut expected = LimitStates::new();
            steps.report(&walked, allowed, &mut expected);
            assert_eq!(reported, expected, "{policy:?}, cost {cost} at {now}");
            assert_eq!(fast.states[..], steps.states[..]);
            assert_eq!(fast.expires_at, steps.expires_at);
        }
    }
}

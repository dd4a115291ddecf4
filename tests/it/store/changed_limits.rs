//! A limit whose `N` or period changes (an override, a reloaded policy) keeps the state the old
//! limit left, in both stores, with the same decisions: a key that used 90 of 100 and gets
//! 1000 has 910 left, not 1000 and not 10; cut to 50 it has none left.

use crate::support;

use std::future::IntoFuture;
use std::time::Duration;

use redlimit::store::{ManualClock, MemoryStore, RedisStore};
use redlimit::{Algorithm, Decision, Key, Limit, Policy};
use support::{RedisServer, unique_prefix};

/// Off any round boundary, so windows fall anywhere.
const T0: u64 = 1_700_000_123_456_789;
const MINUTE: Duration = Duration::from_secs(60);

fn policy(algorithm: Algorithm, count: u64, period: Duration) -> Policy {
    Policy::new("q", [Limit::new(algorithm, count, period).unwrap()]).unwrap()
}

/// Checks `cost` at `now` on both stores and asserts the same decision.
async fn both(
    redis: &RedisStore,
    memory: &MemoryStore,
    clock: &ManualClock,
    policy: &Policy,
    cost: u64,
    now: u64,
) -> Decision {
    clock.set(now);
    let key = Key::new("k");
    let from_redis = redlimit::__private::check_at(redis, policy, &key, cost, now)
        .into_future()
        .await
        .unwrap();
    let from_memory = memory.check_now(policy, &key, cost);
    assert_eq!(from_redis, from_memory, "{policy:?} cost {cost}");
    from_redis
}

#[tokio::test]
async fn every_algorithm_keeps_the_units_used_when_its_limit_changes() {
    let server = RedisServer::start();
    for algorithm in Algorithm::ALL {
        let redis = RedisStore::builder(server.url())
            .prefix(unique_prefix(&format!("changed-{algorithm}")))
            .connect()
            .await
            .unwrap();
        let clock = ManualClock::new(T0);
        let memory = MemoryStore::with_clock(clock.clone());
        let base = policy(algorithm, 100, MINUTE);
        let used = both(&redis, &memory, &clock, &base, 90, T0).await;
        assert!(used.is_allowed(), "{algorithm}");
        assert_eq!(used.limits()[0].remaining(), 10, "{algorithm}");

        let raised = policy(algorithm, 1000, MINUTE);
        let d = both(&redis, &memory, &clock, &raised, 0, T0).await;
        assert_eq!(d.limits()[0].remaining(), 910, "{algorithm}: raised");

        let cut = policy(algorithm, 50, MINUTE);
        let d = both(&redis, &memory, &clock, &cut, 1, T0).await;
        assert!(!d.is_allowed(), "{algorithm}: cut below the units used");
        // No longer than a window and the next (the sliding window waits for both to decay).
        assert!(d.retry_after().unwrap() <= 2 * MINUTE, "{algorithm}");

        // A longer period with the same count: the units used still count.
        let longer = policy(algorithm, 100, 60 * MINUTE);
        let d = both(&redis, &memory, &clock, &longer, 0, T0).await;
        assert_eq!(d.limits()[0].remaining(), 10, "{algorithm}: longer period");
    }
}

#[tokio::test]
async fn a_changed_algorithm_starts_fresh() {
    let server = RedisServer::start();
    let redis = RedisStore::builder(server.url())
        .prefix(unique_prefix("changed-algorithm"))
        .connect()
        .await
        .unwrap();
    let clock = ManualClock::new(T0);
    let memory = MemoryStore::with_clock(clock.clone());
    let gcra = policy(Algorithm::Gcra, 100, MINUTE);
    both(&redis, &memory, &clock, &gcra, 90, T0).await;
    let window = policy(Algorithm::FixedWindow, 100, MINUTE);
    let d = both(&redis, &memory, &clock, &window, 0, T0).await;
    assert_eq!(d.limits()[0].remaining(), 100);
}

#[tokio::test]
async fn a_sliding_log_whose_period_grows_after_a_trim_counts_what_it_kept() {
    let server = RedisServer::start();
    let redis = RedisStore::builder(server.url())
        .prefix(unique_prefix("changed-log"))
        .connect()
        .await
        .unwrap();
    let clock = ManualClock::new(T0);
    let memory = MemoryStore::with_clock(clock.clone());
    let second = Duration::from_secs(1);
    let short = policy(Algorithm::SlidingLog, 5, second);
    both(&redis, &memory, &clock, &short, 5, T0).await;
    // Two seconds on, the first five are outside every span: trimmed (their total kept).
    let later = T0 + 2_000_000;
    let d = both(&redis, &memory, &clock, &short, 3, later).await;
    assert_eq!(d.limits()[0].remaining(), 2);
    // A minute-long span now: the trimmed admissions are gone, not counted again (Redis used
    // to count the whole history of the log here: its oldest member read as a first admission).
    let long = policy(Algorithm::SlidingLog, 10, MINUTE);
    let d = both(&redis, &memory, &clock, &long, 0, later).await;
    assert_eq!(d.limits()[0].remaining(), 7);
    // And a policy of two logs, the shorter one's span reaching before every member.
    let two = Policy::new(
        "q",
        [
            Limit::sliding_log(10, MINUTE).unwrap(),
            Limit::sliding_log(9, 30 * second).unwrap(),
        ],
    )
    .unwrap();
    let d = both(&redis, &memory, &clock, &two, 1, later).await;
    assert_eq!(d.limits()[0].remaining(), 6);
    assert_eq!(d.limits()[1].remaining(), 5);
}

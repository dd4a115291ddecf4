//! Each algorithm's behaviour over time, on a real Redis and in memory, with the same
//! decisions from both. Time is driven explicitly (the scripts' test-only time argument and a
//! `ManualClock`), so every expectation is exact.

use crate::support;

use std::time::Duration;

use redlimit::store::{ManualClock, MemoryStore, RedisStore};
use redlimit::{Decision, Key, Limit, Policy};
use support::{RedisServer, unique_prefix};

/// A whole hour in µs, so epoch-aligned windows start exactly at `T0`.
const T0: u64 = 1_700_002_800_000_000;
const MS: u64 = 1_000;
const S: u64 = 1_000_000;

struct Stores {
    _server: RedisServer,
    redis: RedisStore,
    memory: MemoryStore,
    clock: ManualClock,
}

impl Stores {
    async fn new() -> Self {
        let server = RedisServer::start();
        let redis = RedisStore::builder(server.url())
            .prefix(unique_prefix("alg"))
            .connect()
            .await
            .expect("connect");
        let clock = ManualClock::new(T0);
        Stores {
            _server: server,
            redis,
            memory: MemoryStore::with_clock(clock.clone()),
            clock,
        }
    }

    /// Checks at `now` in both stores; they must agree exactly.
    async fn check(&self, policy: &Policy, key: &str, cost: u64, now: u64) -> Decision {
        let key = Key::new(key);
        let from_redis = redlimit::__private::check_at(&self.redis, policy, &key, cost, now)
            .await
            .expect("redis check");
        self.clock.set(now);
        let from_memory = self.memory.check_now(policy, &key, cost);
        assert_eq!(
            from_redis,
            from_memory,
            "stores disagree at t0+{}µs",
            now - T0
        );
        from_redis
    }
}

fn policy(limits: &[Limit]) -> Policy {
    Policy::new("p", limits.iter().copied()).unwrap()
}

fn us(d: Option<Duration>) -> Option<u64> {
    d.map(|d| d.as_micros() as u64)
}

#[tokio::test]
async fn fixed_window_resets_at_the_epoch_aligned_edge() {
    let s = Stores::new().await;
    let p = policy(&[Limit::fixed_window(3, Duration::from_secs(1)).unwrap()]);
    for left in [2, 1, 0] {
        let d = s.check(&p, "k", 1, T0 + 250 * MS).await;
        assert!(d.is_allowed());
        assert_eq!(d.remaining(), Some(left));
        assert_eq!(d.limits()[0].reset_after(), Duration::from_millis(750));
    }
    let d = s.check(&p, "k", 1, T0 + 900 * MS).await;
    assert!(!d.is_allowed());
    assert_eq!(us(d.retry_after()), Some(100 * MS));
    // A new window: the whole quota again, 100 ms later (the fixed window's 2x edge).
    for _ in 0..3 {
        assert!(s.check(&p, "k", 1, T0 + S).await.is_allowed());
    }
    assert!(!s.check(&p, "k", 1, T0 + S + 1).await.is_allowed());
}

#[tokio::test]
async fn sliding_window_weighs_the_previous_window() {
    let s = Stores::new().await;
    let p = policy(&[Limit::sliding_window(10, Duration::from_secs(1)).unwrap()]);
    for _ in 0..10 {
        assert!(s.check(&p, "k", 1, T0 + 500 * MS).await.is_allowed());
    }
    assert!(!s.check(&p, "k", 1, T0 + 999 * MS).await.is_allowed());
    // A quarter into the next window the previous 10 weigh 7.5, rounded up: two more fit.
    let d = s.check(&p, "k", 2, T0 + S + 250 * MS).await;
    assert!(d.is_allowed());
    assert_eq!(d.remaining(), Some(0));
    let d = s.check(&p, "k", 1, T0 + S + 250 * MS).await;
    assert!(!d.is_allowed());
    // 10·(1−e) + 2 + 1 ≤ 10 needs the weight down to 7: e ≥ 0.3 s, 50 ms from now.
    assert_eq!(us(d.retry_after()), Some(50 * MS));
    let just_before = T0 + S + 300 * MS - 1;
    assert!(!s.check(&p, "k", 1, just_before).await.is_allowed());
    assert!(s.check(&p, "k", 1, T0 + S + 300 * MS).await.is_allowed());
}

#[tokio::test]
async fn sliding_log_is_exact_in_any_span() {
    let s = Stores::new().await;
    let p = policy(&[Limit::sliding_log(5, Duration::from_secs(3)).unwrap()]);
    for i in 0..5 {
        assert!(s.check(&p, "k", 1, T0 + i * 100 * MS).await.is_allowed());
    }
    let d = s.check(&p, "k", 1, T0 + 2 * S).await;
    assert!(!d.is_allowed());
    assert_eq!(
        us(d.retry_after()),
        Some(S),
        "the oldest admission leaves at t0+3s"
    );
    assert!(!s.check(&p, "k", 1, T0 + 3 * S - 1).await.is_allowed());
    let d = s.check(&p, "k", 1, T0 + 3 * S).await;
    assert!(
        d.is_allowed(),
        "the span is (now-P, now]: the admission at t0 has left"
    );
    assert_eq!(d.remaining(), Some(0));
    // Two more need the admissions at t0+0.1 s and t0+0.2 s gone.
    let d = s.check(&p, "k", 2, T0 + 3 * S).await;
    assert_eq!(us(d.retry_after()), Some(200 * MS));
}

#[tokio::test]
async fn token_bucket_bursts_then_refills_one_token_per_interval() {
    let s = Stores::new().await;
    let p = policy(&[Limit::token_bucket(5, Duration::from_secs(3)).unwrap()]);
    let d = s.check(&p, "k", 5, T0).await;
    assert!(d.is_allowed());
    assert_eq!(d.limits()[0].reset_after(), Duration::from_secs(3));
    let d = s.check(&p, "k", 1, T0 + 599 * MS).await;
    assert!(!d.is_allowed());
    assert_eq!(us(d.retry_after()), Some(MS));
    assert!(s.check(&p, "k", 1, T0 + 600 * MS).await.is_allowed());
    assert!(!s.check(&p, "k", 1, T0 + 1100 * MS).await.is_allowed());
    let d = s.check(&p, "k", 1, T0 + 10 * S).await;
    assert!(d.is_allowed());
    assert_eq!(d.remaining(), Some(4), "refill stops at capacity");
}

#[tokio::test]
async fn gcra_allows_the_burst_then_one_per_emission_interval() {
    let s = Stores::new().await;
    let p = policy(&[Limit::gcra(4, Duration::from_secs(1)).unwrap()]);
    for left in [3, 2, 1, 0] {
        assert_eq!(s.check(&p, "k", 1, T0).await.remaining(), Some(left));
    }
    let d = s.check(&p, "k", 1, T0 + 100 * MS).await;
    assert!(!d.is_allowed());
    assert_eq!(us(d.retry_after()), Some(150 * MS));
    assert!(s.check(&p, "k", 1, T0 + 250 * MS).await.is_allowed());
    assert!(!s.check(&p, "k", 1, T0 + 499 * MS).await.is_allowed());
    assert!(s.check(&p, "k", 1, T0 + 500 * MS).await.is_allowed());
}

#[tokio::test]
async fn cost_is_weighed_and_an_impossible_cost_consumes_nothing() {
    let s = Stores::new().await;
    for limit in [
        Limit::fixed_window(5, Duration::from_secs(60)).unwrap(),
        Limit::sliding_window(5, Duration::from_secs(60)).unwrap(),
        Limit::sliding_log(5, Duration::from_secs(60)).unwrap(),
        Limit::token_bucket(5, Duration::from_secs(60)).unwrap(),
        Limit::gcra(5, Duration::from_secs(60)).unwrap(),
    ] {
        let p = policy(&[limit]);
        let key = limit.algorithm().name();
        let d = s.check(&p, key, 3, T0).await;
        assert!(d.is_allowed(), "{limit}");
        assert_eq!(d.remaining(), Some(2), "{limit}");
        let d = s.check(&p, key, 6, T0).await;
        assert!(!d.is_allowed() && d.exceeds_capacity(), "{limit}");
        assert_eq!(
            d.retry_after(),
            None,
            "{limit}: no Retry-After for an impossible cost"
        );
        let d = s.check(&p, key, 3, T0).await;
        assert!(!d.is_allowed() && !d.exceeds_capacity(), "{limit}");
        assert!(d.retry_after().is_some(), "{limit}");
        let d = s.check(&p, key, 2, T0).await;
        assert!(d.is_allowed(), "{limit}: denied requests consumed nothing");
        assert_eq!(d.remaining(), Some(0), "{limit}");
    }
}

/// The table: sliding log 20/60 s and 5/3 s on one key, rounds of 8 every 3.2 s.
#[tokio::test]
async fn multi_limit_table_holds_in_both_stores() {
    let s = Stores::new().await;
    let p = policy(&[
        Limit::sliding_log(20, Duration::from_secs(60)).unwrap(),
        Limit::sliding_log(5, Duration::from_secs(3)).unwrap(),
    ]);
    let mut allowed = 0;
    for round in 0..5u64 {
        let start = T0 + round * 3_200 * MS;
        for i in 0..8u64 {
            let d = s.check(&p, "auth", 1, start + i * 10 * MS).await;
            if round < 4 && i < 5 {
                assert!(d.is_allowed(), "round {round} request {i}");
                allowed += 1;
            } else if round < 3 {
                assert_eq!(
                    d.denied_by(),
                    Some(1),
                    "round {round} request {i}: the 3 s limit"
                );
                assert!(d.retry_after().unwrap() <= Duration::from_secs(3));
                assert_eq!(
                    d.limits()[0].remaining(),
                    20 - allowed,
                    "denied consume nothing"
                );
            } else if round == 3 {
                // 20 admitted now: both limits deny, and the longer wait (60 s) is named.
                assert!(!d.limits()[0].is_allowed() && !d.limits()[1].is_allowed());
                assert_eq!(d.denied_by(), Some(0));
            } else {
                assert_eq!(d.denied_by(), Some(0), "fifth round: the 60 s limit denies");
                assert!(
                    d.limits()[1].is_allowed(),
                    "the 3 s limit alone would allow"
                );
            }
        }
    }
    assert_eq!(allowed, 20);
}

#[tokio::test]
async fn mixed_algorithms_commit_together() {
    let s = Stores::new().await;
    let p = policy(&[
        Limit::gcra(2, Duration::from_secs(1)).unwrap(),
        Limit::fixed_window(3, Duration::from_secs(3600)).unwrap(),
    ]);
    assert!(s.check(&p, "k", 1, T0).await.is_allowed());
    assert!(s.check(&p, "k", 1, T0).await.is_allowed());
    let d = s.check(&p, "k", 1, T0).await;
    assert_eq!(d.denied_by(), Some(0));
    assert_eq!(
        d.limits()[1].remaining(),
        1,
        "the daily quota was not charged"
    );
    let d = s.check(&p, "k", 1, T0 + S).await;
    assert!(d.is_allowed());
    assert_eq!(d.remaining(), Some(0));
    assert_eq!(
        d.limit(),
        Some(3),
        "headers report the most restrictive limit"
    );
    let d = s.check(&p, "k", 1, T0 + 2 * S).await;
    assert_eq!(d.denied_by(), Some(1));
    assert_eq!(us(d.retry_after()), Some(3600 * S - 2 * S));
}

#[tokio::test]
async fn keys_and_policies_do_not_share_state() {
    let s = Stores::new().await;
    let p = policy(&[Limit::gcra(1, Duration::from_secs(60)).unwrap()]);
    let q = Policy::new("q", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    assert!(s.check(&p, "a", 1, T0).await.is_allowed());
    assert!(s.check(&p, "b", 1, T0).await.is_allowed());
    assert!(s.check(&q, "a", 1, T0).await.is_allowed());
    assert!(!s.check(&p, "a", 1, T0).await.is_allowed());
}

//! Twenty workers over four independent stores (as four processes would have: each its own
//! connection and limiter) saturate one quota of 100/s with a burst of 100: the slots Redis
//! handed out admit burst + rate × time within 1 %, no 100 ms window holds more than the
//! policy allows (burst + 10), each worker gets its share within 20 %, and it costs at most
//! 1.05 `EVALSHA` per permit; the same with Redis 10 ms away. Counts are taken on the
//! slots (Redis time), so a busy machine that wakes a worker late changes no assertion;
//! the wake-ups are printed.

use std::time::Duration;

use redlimit::limiter::Limiter;
use redlimit::store::RedisStore;
use redlimit::{Limit, Policy};

use super::run::{evalsha_calls, saturate};
use crate::support::{Proxy, RedisServer, unique_prefix};

const RATE: u64 = 100;

fn policy() -> Policy {
    Policy::new(
        "upstream",
        [Limit::gcra(RATE, Duration::from_secs(1)).expect("limit")],
    )
    .expect("policy")
}

async fn limiters(url: &str, prefix: &str, count: usize) -> Vec<Limiter> {
    let mut limiters = Vec::new();
    for _ in 0..count {
        let store = RedisStore::builder(url)
            .prefix(prefix.to_owned())
            .connect()
            .await
            .expect("connect");
        limiters.push(
            Limiter::builder(store, policy())
                .max_wait(Duration::from_secs(30))
                .build(),
        );
    }
    limiters
}

/// Runs 20 workers over 4 limiters for `secs` and holds the run to the policy over the
/// first `span` of slots.
async fn fleet_holds_the_quota(server: &RedisServer, url: &str, secs: Duration, span: Duration) {
    let limiters = limiters(url, &unique_prefix("fleet"), 4).await;
    let before = evalsha_calls(server);
    let run = saturate(&limiters, 20, secs).await;
    let evalsha = evalsha_calls(server) - before;

    // Burst at the first slot, then one slot per interval (10 ms).
    let expected = RATE + span.as_millis() as u64 * RATE / 1000;
    let admitted = run.within(span) as u64;
    let shares = run.shares(span);
    let mean = admitted as f64 / shares.len() as f64;
    let total = run.total() as u64;
    let calls: u64 = limiters.iter().map(Limiter::store_calls).sum();
    println!(
        "admitted {admitted} (expected {expected}) in {span:?} of slots; shares {shares:?}; \
         {evalsha} EVALSHA and {calls} store calls for {total} permits; most slots in 100 ms {}; \
         most wake-ups in 100 ms {}; run took {:?}",
        run.max_in_window(Duration::from_millis(100)),
        run.max_woken_in_window(Duration::from_millis(100)),
        run.started.elapsed(),
    );
    let off = admitted.abs_diff(expected) as f64 / expected as f64;
    assert!(
        off <= 0.01,
        "admitted {admitted}, expected {expected} ± 1 %"
    );
    for (worker, share) in shares.iter().enumerate() {
        let skew = (*share as f64 - mean).abs() / mean;
        assert!(
            skew <= 0.2,
            "worker {worker} got {share}, the mean is {mean:.1}"
        );
    }
    let window = run.max_in_window(Duration::from_millis(100)) as u64;
    assert!(
        window <= RATE + RATE / 10,
        "{window} slots in one 100 ms window"
    );
    assert!(
        evalsha as f64 <= 1.05 * total as f64,
        "{evalsha} EVALSHA for {total} permits"
    );
    assert!(
        calls as f64 <= 1.05 * total as f64,
        "{calls} store calls for {total} permits"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_workers_over_four_stores_admit_the_quota_fairly_with_one_call_each() {
    let server = RedisServer::start();
    fleet_holds_the_quota(
        &server,
        &server.url(),
        Duration::from_millis(10_500),
        Duration::from_secs(10),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_with_redis_ten_ms_away() {
    let server = RedisServer::start();
    let proxy = Proxy::with_rtt(server.port(), Duration::from_millis(10)).await;
    fleet_holds_the_quota(
        &server,
        &proxy.url(),
        Duration::from_millis(10_500),
        Duration::from_secs(10),
    )
    .await;
}

//! The store's clock stepping back (an NTP step, a VM restored from a snapshot, a failover to a
//! master whose clock lags) must never lock a client out for longer than the most debt a
//! limit's state can hold takes to pay: a period and one emission interval (GCRA and token
//! bucket, whose state may owe one period's units: `Store::charge`), a period otherwise.
//!
//! Deterministic first: the scripts' test-only time argument steps Redis's time back, beside a
//! `ManualClock` doing the same to the memory store, and both must decide identically. Then for
//! real: Valkey under libfaketime, whose clock the test moves back 60 s while it runs.

use crate::support;

use std::time::Duration;

use redlimit::store::{ManualClock, MemoryStore};
use redlimit::{Algorithm, Decision, Key, Limit, Policy};
use support::{RedisServer, redis_binary, unique_prefix};

const T0: u64 = 1_700_002_800_000_000;
const S: u64 = 1_000_000;
const PERIOD: Duration = Duration::from_secs(10);
/// The longest wait for one unit: a period's debt paid, then one emission interval (P / 5).
const LONGEST: Duration = Duration::from_secs(12);

fn policy(algorithm: Algorithm) -> Policy {
    Policy::new(
        format!("step-{algorithm}"),
        [Limit::new(algorithm, 5, PERIOD).unwrap()],
    )
    .unwrap()
}

/// The wait a decision asks for, if any.
fn wait(decision: &Decision) -> Duration {
    decision.retry_after().unwrap_or_default()
}

#[tokio::test]
async fn a_step_back_never_asks_for_a_wait_longer_than_the_most_debt_takes() {
    let server = RedisServer::start();
    let redis = redlimit::store::RedisStore::builder(server.url())
        .prefix(unique_prefix("step"))
        .connect()
        .await
        .unwrap();
    for algorithm in Algorithm::ALL {
        let policy = policy(algorithm);
        let clock = ManualClock::new(T0);
        let memory = MemoryStore::with_clock(clock.clone());
        let key = Key::new("client");
        let check = async |now: u64| {
            clock.set(now);
            let from_redis = redlimit::__private::check_at(&redis, &policy, &key, 1, now)
                .await
                .unwrap();
            let from_memory = memory.check_now(&policy, &key, 1);
            assert_eq!(from_redis, from_memory, "{algorithm} at {now}");
            from_redis
        };
        // Two of five units used; then the clock steps back 60 s and stays there for a while.
        assert!(check(T0).await.is_allowed());
        assert!(check(T0 + S).await.is_allowed());
        for i in 0..30 {
            let d = check(T0 + S - 60 * S + i * S / 2).await;
            assert!(
                wait(&d) <= LONGEST,
                "{algorithm}: asked to wait {:?} after a step back",
                wait(&d)
            );
        }
    }
}

/// A `valkey-server` whose clock follows the offset in `offset_file` (libfaketime), or `None`
/// after saying loudly that the test is skipped.
fn valkey_under_faketime(offset_file: &std::path::Path) -> Option<RedisServer> {
    let lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
    let valkey = std::env::var("VALKEY_SERVER").ok();
    let (Some(valkey), true) = (valkey, std::path::Path::new(lib).is_file()) else {
        eprintln!(
            "\n*** SKIPPED the libfaketime clock-step test: needs $VALKEY_SERVER and {lib} \
             (scripts/test.sh installs both) ***\n"
        );
        return None;
    };
    let _ = redis_binary;
    let wrapper = offset_file.with_extension("sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec env LD_PRELOAD={lib} FAKETIME_TIMESTAMP_FILE={} FAKETIME_NO_CACHE=1 {valkey} \"$@\"\n",
            offset_file.display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["+x", wrapper.to_str().unwrap()])
        .status()
        .unwrap();
    Some(RedisServer::start_binary(wrapper.to_str().unwrap()))
}

fn redis_time(server: &RedisServer) -> i64 {
    let (secs, _): (i64, i64) = redis::cmd("TIME").query(&mut server.connection()).unwrap();
    secs
}

#[tokio::test]
async fn a_real_store_clock_stepping_back_60s() {
    let dir = std::env::temp_dir().join(format!("redlimit-faketime-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let offset = dir.join("offset");
    std::fs::write(&offset, "+0\n").unwrap();
    let Some(server) = valkey_under_faketime(&offset) else {
        return;
    };
    let store = redlimit::store::RedisStore::builder(server.url())
        .prefix(unique_prefix("faketime"))
        .connect()
        .await
        .unwrap();
    let key = Key::new("client");
    let policies: Vec<Policy> = Algorithm::ALL.into_iter().map(policy).collect();
    for policy in &policies {
        use redlimit::store::Store;
        assert!(store.check(policy, &key, 1).await.unwrap().is_allowed());
        assert!(store.check(policy, &key, 1).await.unwrap().is_allowed());
    }
    let before = redis_time(&server);
    std::fs::write(&offset, "-60s\n").unwrap();
    assert!(
        redis_time(&server) <= before - 55,
        "the store's clock stepped back"
    );
    for policy in &policies {
        use redlimit::store::Store;
        let d = store.check(policy, &key, 1).await.unwrap();
        assert!(
            wait(&d) <= LONGEST,
            "{}: asked to wait {:?} after a real step back",
            policy.name(),
            wait(&d)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

//! Valkey 8 behaves as Redis does: the same decisions, exact under concurrency, scripts
//! reloaded after a flush. Skipped loudly when no `valkey-server` can be had.

use crate::support;

use std::time::Duration;

use futures_util::future::join_all;
use redlimit::store::{ManualClock, MemoryStore, RedisStore, Store};
use redlimit::{Algorithm, Key, Limit, Policy};
use support::*;

const T0: u64 = 1_700_002_800_000_000;

async fn store_with_prefix(server: &RedisServer, prefix: &str) -> RedisStore {
    RedisStore::builder(server.url())
        .prefix(prefix)
        .connect()
        .await
        .expect("connect to valkey")
}

#[tokio::test]
async fn the_server_is_valkey() {
    let Some(server) = valkey("the_server_is_valkey") else {
        return;
    };
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut server.connection())
        .unwrap();
    assert!(info.contains("valkey_version:8"), "{info}");
}

#[tokio::test]
async fn multi_limit_table_and_every_algorithm_match_the_memory_store() {
    let Some(server) = valkey("multi_limit_table_and_every_algorithm_match_the_memory_store")
    else {
        return;
    };
    let valkey = redis_store(&server, "valkey").await;
    let clock = ManualClock::new(T0);
    let memory = MemoryStore::with_clock(clock.clone());
    let table = Policy::new(
        "table",
        [
            Limit::sliding_log(20, Duration::from_secs(60)).unwrap(),
            Limit::sliding_log(5, Duration::from_secs(3)).unwrap(),
        ],
    )
    .unwrap();
    let mixed = every_algorithm_policy("mixed", 7, Duration::from_millis(1_300));
    let mut allowed = 0;
    for round in 0..5u64 {
        for i in 0..8u64 {
            let now = T0 + round * 3_200_000 + i * 10_000;
            clock.set(now);
            for (policy, key) in [(&table, "t"), (&mixed, "m")] {
                let key = Key::new(key);
                let v = redlimit::__private::check_at(&valkey, policy, &key, 1, now)
                    .await
                    .unwrap();
                assert_eq!(
                    v,
                    memory.check_now(policy, &key, 1),
                    "{} at round {round}",
                    policy.name()
                );
                if policy.name() == "table" && v.is_allowed() {
                    allowed += 1;
                }
            }
        }
    }
    assert_eq!(allowed, 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_under_concurrency() {
    let Some(server) = valkey("exact_under_concurrency") else {
        return;
    };
    let prefix = unique_prefix("valkey-burst");
    let (a, b) = (
        store_with_prefix(&server, &prefix).await,
        store_with_prefix(&server, &prefix).await,
    );
    for algorithm in Algorithm::ALL {
        let limit = Limit::new(algorithm, 10, Duration::from_secs(86_400)).unwrap();
        let policy = Policy::new("c", [limit]).unwrap();
        let key = Key::new(algorithm.name());
        let calls = (0..60).map(|i| {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            let (policy, key) = (policy.clone(), key.clone());
            async move { store.check(&policy, &key, 1).await.unwrap().is_allowed() }
        });
        let admitted = join_all(calls).await.into_iter().filter(|&ok| ok).count();
        assert_eq!(admitted, 10, "{algorithm}");
    }
}

#[tokio::test]
async fn recovers_after_script_flush() {
    let Some(server) = valkey("recovers_after_script_flush") else {
        return;
    };
    let store = redis_store(&server, "valkey-flush").await;
    let policy = gcra_policy("f", 2, Duration::from_secs(60));
    assert!(
        store
            .check(&policy, &Key::new("k"), 1)
            .await
            .unwrap()
            .is_allowed()
    );
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut server.connection())
        .unwrap();
    let d = store.check(&policy, &Key::new("k"), 1).await.unwrap();
    assert_eq!(d.remaining(), Some(0));
}

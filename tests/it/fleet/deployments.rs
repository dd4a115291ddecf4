//! The same store over a 3-master Redis Cluster and over a Sentinel-managed master: exact
//! limits with keys over every slot, scripts on every primary, and failovers followed without
//! a restart (failing open, never with a 5xx, while they happen).

use crate::support;

use std::time::Duration;

use futures_util::future::join_all;
use http::StatusCode;
use redlimit::layer::OnStoreError;
use redlimit::store::{RedisStore, Store};
use redlimit::{DecisionSource, Key, Limit, Policy, RateLimitLayer};
use support::*;

const PER_KEY: u64 = 5;

fn policy() -> Policy {
    Policy::new(
        "dep",
        [
            Limit::gcra(PER_KEY, Duration::from_secs(3600)).unwrap(),
            Limit::sliding_log(PER_KEY + 1, Duration::from_secs(3600)).unwrap(),
        ],
    )
    .unwrap()
}

/// The layer's policy in the failover tests: 2 per hour.
fn two_per_hour() -> Policy {
    gcra_policy("dep", 2, Duration::from_secs(3600))
}

/// Fires `burst` concurrent checks on each of `keys` keys through two stores (two
/// "replicas"); returns the number admitted per key.
async fn admitted_per_key(a: &RedisStore, b: &RedisStore, keys: usize, burst: usize) -> Vec<u64> {
    let policy = policy();
    let calls = (0..keys)
        .flat_map(|k| (0..burst).map(move |i| (k, i)))
        .map(|(k, i)| {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            let policy = policy.clone();
            async move {
                let d = store
                    .check(&policy, &Key::new(format!("user-{k}")), 1)
                    .await
                    .expect("check");
                (k, d.is_allowed())
            }
        });
    let mut per_key = vec![0; keys];
    for (k, allowed) in join_all(calls).await {
        per_key[k] += u64::from(allowed);
    }
    per_key
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_is_exact_for_keys_over_every_slot() {
    let cluster = RedisCluster::start();
    let prefix = unique_prefix("cluster");
    let connect = || {
        RedisStore::cluster(cluster.urls())
            .prefix(prefix.as_str())
            .connect()
    };
    let (a, b) = (connect().await.unwrap(), connect().await.unwrap());
    let per_key = admitted_per_key(&a, &b, 300, 8).await;
    assert!(per_key.iter().all(|&n| n == PER_KEY), "{per_key:?}");
    // The keys landed on all three masters.
    let mut masters = std::collections::HashSet::new();
    for node in &cluster.nodes {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}:*"))
            .query(&mut node.connection())
            .unwrap();
        if !keys.is_empty() {
            masters.insert(node.port());
        }
    }
    assert_eq!(masters.len(), 3, "keys on {masters:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_reloads_the_script_on_every_primary() {
    let cluster = RedisCluster::start();
    let store = RedisStore::cluster(cluster.urls())
        .prefix(unique_prefix("flush"))
        .connect()
        .await
        .unwrap();
    let policy = policy();
    for k in 0..30 {
        store
            .check(&policy, &Key::new(format!("k{k}")), 1)
            .await
            .unwrap();
    }
    for node in &cluster.nodes {
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut node.connection())
            .unwrap();
    }
    for k in 0..30 {
        let d = store
            .check(&policy, &Key::new(format!("k{k}")), 1)
            .await
            .expect("reloaded");
        assert_eq!(d.remaining(), Some(PER_KEY - 2), "counted once per call");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_follows_a_master_failover() {
    let mut cluster = RedisCluster::start();
    let store = RedisStore::cluster(cluster.urls())
        .prefix(unique_prefix("failover"))
        .connect()
        .await
        .unwrap();
    // Failing open, a rate-limit header can only come from the store. A deadline a loaded
    // test machine cannot miss: the checks after the failover must be the store's.
    let app = app(RateLimitLayer::builder(store, two_per_hour())
        .store_deadline(Duration::from_secs(3))
        .on_store_error(OnStoreError::Open)
        .build()
        .expect("valid layer"));
    assert_eq!(status_of(&app, "10.0.0.1").await, StatusCode::OK);
    // Kill the master of the key's slot; its replica takes over.
    let slot = {
        let mut conn = cluster.nodes[0].connection();
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg("{ip:10.0.0.1}")
            .query::<u16>(&mut conn)
            .unwrap()
    };
    let victim = cluster.master_of(slot);
    cluster.nodes[victim].kill();
    // During the switch: answered, never a 5xx.
    let recovered = eventually(Duration::from_secs(30), async || {
        let res = send(&app, request("/", "10.0.0.1", &[])).await;
        assert!(!res.status().is_server_error(), "{}", res.status());
        cluster.wait_healthy(Duration::ZERO) && header(&res, "x-ratelimit-limit") == "2"
    })
    .await;
    assert!(recovered, "no limiting after the failover");
    // Limiting is exact on the new master (a fresh client: the old count may be lost).
    assert_eq!(status_of(&app, "10.0.0.2").await, StatusCode::OK);
    assert_eq!(status_of(&app, "10.0.0.2").await, StatusCode::OK);
    assert_eq!(
        status_of(&app, "10.0.0.2").await,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_follows_a_failover() {
    let mut set = SentinelSet::start();
    let store = RedisStore::sentinel(set.sentinel_urls(), MASTER_NAME)
        .prefix(unique_prefix("sentinel"))
        .connect()
        .await
        .unwrap();
    let policy = policy();
    let d = store.check(&policy, &Key::new("a"), 1).await.unwrap();
    assert_eq!(d.remaining(), Some(PER_KEY - 1));
    // Failing open, a rate-limit header can only come from the store. A deadline a loaded
    // test machine cannot miss: the checks after the failover must be the store's.
    let app = app(RateLimitLayer::builder(store, two_per_hour())
        .store_deadline(Duration::from_secs(3))
        .on_store_error(OnStoreError::Open)
        .build()
        .expect("valid layer"));
    let old_master = set.master.port();
    set.master.kill();
    let promoted = eventually(Duration::from_secs(30), async || {
        let res = send(&app, request("/", "10.0.0.9", &[])).await;
        assert!(!res.status().is_server_error(), "{}", res.status());
        set.master_port().is_some_and(|p| p != old_master)
            && header(&res, "x-ratelimit-limit") == "2"
    })
    .await;
    assert!(promoted, "the store did not follow the new master");
    assert_eq!(set.master_port(), Some(set.replica.port()));
    assert_eq!(status_of(&app, "10.0.0.2").await, StatusCode::OK);
    assert_eq!(status_of(&app, "10.0.0.2").await, StatusCode::OK);
    assert_eq!(
        status_of(&app, "10.0.0.2").await,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn fail_open_decisions_during_a_failover_say_so() {
    // A Sentinel set whose master is gone and not replaced: every decision fails open.
    let mut set = SentinelSet::start();
    let store = RedisStore::sentinel(set.sentinel_urls(), MASTER_NAME)
        .prefix(unique_prefix("down"))
        .connect_lazy()
        .unwrap();
    set.master.kill();
    set.replica.kill();
    let layer = RateLimitLayer::builder(store, gcra_policy("dep", 1, Duration::from_secs(60)))
        .store_deadline(Duration::from_millis(100))
        .on_store_error(OnStoreError::Open)
        .build()
        .expect("valid layer");
    let app = source_app(layer);
    for _ in 0..3 {
        let res = send(&app, request("/", "10.0.0.1", &[])).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(
            body_text(res).await,
            format!("{:?}", DecisionSource::FailOpen)
        );
    }
}

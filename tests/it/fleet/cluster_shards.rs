//! One dead shard of a Redis Cluster must not switch limiting off for the healthy ones: the
//! layer keeps a circuit breaker per slot range, and the store answers for every key whose
//! master is alive.

use crate::support;

use std::time::Duration;

use axum::Router;
use http::StatusCode;
use redlimit::key::Header;
use redlimit::store::RedisStore;
use redlimit::{KeyExtractor, Limit, Policy, RateLimitLayer};
use support::{RedisCluster, body_text, request, send, source_app, unique_prefix};

const KEYS: usize = 300;
const ROUNDS: usize = 6;

/// The request for client `i`, keyed by its `x-client` header.
fn client_request(i: usize) -> http::Request<axum::body::Body> {
    request("/", "10.0.0.1", &[("x-client", &format!("client-{i}"))])
}

/// The Cluster slot of client `i`'s key, as Redis computes it.
fn slot_of(cluster: &RedisCluster, i: usize) -> u16 {
    let (parts, _) = client_request(i).into_parts();
    let key = Header::new("x-client").unwrap().extract(&parts).unwrap();
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key.as_str())
        .query(&mut cluster.nodes[0].connection())
        .unwrap()
}

/// The index of the node replicating the master at `master`.
fn replica_of(cluster: &RedisCluster, master: usize) -> usize {
    let port = cluster.nodes[master].port();
    cluster
        .nodes
        .iter()
        .position(|n| {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut n.connection())
                .unwrap_or_default();
            info.contains(&format!("master_port:{port}"))
        })
        .expect("every master has a replica")
}

async fn sources(app: &Router, keys: impl Iterator<Item = usize>) -> Vec<String> {
    let mut sources = Vec::new();
    for i in keys {
        let res = send(app, client_request(i)).await;
        assert!(
            !res.status().is_server_error(),
            "client {i}: {}",
            res.status()
        );
        assert_eq!(res.status(), StatusCode::OK, "client {i}");
        sources.push(body_text(res).await);
    }
    sources
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_shard_leaves_the_healthy_ones_limiting() {
    let mut cluster = RedisCluster::start();
    for node in &cluster.nodes {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("cluster-require-full-coverage")
            .arg("no")
            .exec(&mut node.connection())
            .unwrap();
    }
    let store = RedisStore::cluster(cluster.urls())
        .prefix(unique_prefix("shards"))
        .connect()
        .await
        .unwrap();
    let policy = Policy::new(
        "shards",
        [Limit::gcra(1_000_000, Duration::from_secs(3600)).unwrap()],
    )
    .unwrap();
    let app = source_app(
        RateLimitLayer::builder(store, policy)
            .key(Header::new("x-client").unwrap())
            .store_deadline(Duration::from_millis(100))
            .build()
            .expect("valid layer"),
    );
    let all = sources(&app, 0..KEYS).await;
    assert!(all.iter().all(|s| s == "Store"), "healthy cluster: {all:?}");

    // The master of client 0's slot and its replica will die: that shard is gone for good.
    let dead = cluster.master_of(slot_of(&cluster, 0));
    let dead_replica = replica_of(&cluster, dead);
    let (healthy, on_dead): (Vec<usize>, Vec<usize>) =
        (0..KEYS).partition(|&i| cluster.master_of(slot_of(&cluster, i)) != dead);
    let dead_port = cluster.nodes[dead].port();
    cluster.nodes[dead].kill();
    cluster.nodes[dead_replica].kill();
    assert!(
        !on_dead.is_empty() && healthy.len() > KEYS / 2,
        "{} healthy",
        healthy.len()
    );

    // Every key, several rounds: the dead shard's keys are decided in memory (never 5xx), the
    // others by the store.
    let mut healthy_by_store = 0;
    let mut healthy_total = 0;
    for _ in 0..ROUNDS {
        let round = sources(&app, 0..KEYS).await;
        for &i in &healthy {
            healthy_total += 1;
            healthy_by_store += usize::from(round[i] == "Store");
        }
        for &i in &on_dead {
            assert_ne!(round[i], "Store", "client {i} lives on the dead shard");
        }
    }
    let share = healthy_by_store as f64 / healthy_total as f64;
    eprintln!(
        "dead shard {dead_port}: {} keys on it, {} healthy; \
         {healthy_by_store}/{healthy_total} healthy decisions by the store ({:.1} %)",
        on_dead.len(),
        healthy.len(),
        share * 100.0
    );
    // Slot ranges at a shard's edge may share a breaker with the dead shard: a few percent.
    assert!(share >= 0.9, "only {:.1} % by the store", share * 100.0);
}

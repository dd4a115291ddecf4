//! A reset reaches the whole fleet: three replicas of a service (each its own store and layer)
//! on one Redis, a client denied on all three (each answering from its deny cache), reset
//! through one of them; the other two admit it within the poll interval, not at the denial's
//! retry time (12 minutes for 5 an hour), and the three together admit the limit once more,
//! no more. In exact and in local-first mode (a limit this low stays exact there, its denials
//! the deny cache's). Only the reset key's denials go; on a Cluster the log has a slot of its
//! own; a replica that missed resets counts every key as reset.

use crate::support;

use std::time::{Duration, Instant};

use axum::Router;
use redlimit::key::PeerIp;
use redlimit::layer::Handle;
use redlimit::store::{RedisStore, Store};
use redlimit::{Decision, Key, Limit, Policy, RateLimitLayer};
use support::{RedisServer, body_text, eventually, request, send, source_app, unique_prefix};

const IP: &str = "10.1.2.3";
const LIMIT: u64 = 5;

fn policy() -> Policy {
    Policy::new(
        "api",
        [Limit::gcra(LIMIT, Duration::from_secs(3600)).unwrap()],
    )
    .unwrap()
}

/// One replica: its app (answering with each decision's source) and its layer's handle.
fn replica(store: impl Store) -> (Router, Handle) {
    let layer = RateLimitLayer::builder(store, policy())
        .key(PeerIp)
        .build()
        .expect("valid layer");
    (source_app(layer.clone()), layer.handle())
}

/// Three replicas on `server`, with the default poll of the overrides and resets (250 ms);
/// local-first ones if `local_first`.
async fn three(server: &RedisServer, prefix: &str, local_first: bool) -> Vec<(Router, Handle)> {
    let mut replicas = Vec::new();
    for _ in 0..3 {
        let redis = RedisStore::builder(server.url())
            .prefix(prefix)
            .connect()
            .await
            .expect("connect to the test redis");
        replicas.push(if local_first {
            replica(redis.local_first(Duration::from_millis(100)).unwrap())
        } else {
            replica(redis)
        });
    }
    replicas
}

/// A request of the client through `app`: whether it was admitted, and the source of the
/// decision (`DenyCache` for a denial answered from the deny cache).
async fn ask(app: &Router) -> (bool, String) {
    answer(send(app, request("/", IP, &[])).await).await
}

/// Whether a response admitted its request, and its decision's source.
async fn answer(response: http::Response<axum::body::Body>) -> (bool, String) {
    if response.status().is_success() {
        return (true, body_text(response).await);
    }
    let decision = response.extensions().get::<Decision>().expect("a decision");
    (false, format!("{:?}", decision.source()))
}

/// How many requests the three admit, asked in turn until each has denied one.
async fn admitted_until_all_deny(replicas: &[(Router, Handle)]) -> u64 {
    let mut admitted = 0;
    let mut denied = [false; 3];
    while !denied.iter().all(|d| *d) {
        for (i, (app, _)) in replicas.iter().enumerate() {
            let (ok, _) = ask(app).await;
            admitted += u64::from(ok);
            denied[i] |= !ok;
        }
        assert!(admitted <= 10 * LIMIT, "the limit does not hold");
    }
    admitted
}

async fn a_reset_through_one_replica_reaches_the_other_two(local_first: bool) {
    let server = RedisServer::start();
    let prefix = unique_prefix(if local_first { "reset-lf" } else { "reset" });
    let replicas = three(&server, &prefix, local_first).await;
    assert_eq!(admitted_until_all_deny(&replicas).await, LIMIT);
    // Each replica now answers the client from its deny cache, for 12 minutes.
    for (app, _) in &replicas {
        let (ok, source) = ask(app).await;
        assert!(!ok);
        assert_eq!(source, "DenyCache");
    }

    replicas[0]
        .1
        .reset(&policy(), &Key::new(format!("ip:{IP}")))
        .await
        .unwrap();
    let reset_at = Instant::now();
    for (i, (app, _)) in replicas.iter().enumerate().skip(1) {
        let admitted = eventually(Duration::from_secs(10), async || ask(app).await.0).await;
        assert!(admitted, "replica {i} still denies after the reset");
        eprintln!(
            "replica {i} admits {:?} after the reset (local-first: {local_first})",
            reset_at.elapsed()
        );
    }
    // The two admissions above, then the rest of the limit, once, across the three.
    assert_eq!(
        admitted_until_all_deny(&replicas).await,
        LIMIT - 2,
        "the fleet admits the limit once after the reset"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_reaches_every_replica_in_exact_mode() {
    a_reset_through_one_replica_reaches_the_other_two(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_reaches_every_replica_in_local_first_mode() {
    a_reset_through_one_replica_reaches_the_other_two(true).await;
}

/// A denial of another key, cached on the other replicas, still stands after the reset: they
/// drop the reset key's denials only, and ask Redis nothing more for the other key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_drops_the_reset_key_s_denials_only() {
    use redlimit::store::Admin;

    let server = RedisServer::start();
    let prefix = unique_prefix("reset-one");
    let stores = [
        RedisStore::builder(server.url())
            .prefix(&prefix)
            .override_poll(Duration::from_millis(20))
            .connect()
            .await
            .unwrap(),
        RedisStore::builder(server.url())
            .prefix(&prefix)
            .override_poll(Duration::from_millis(20))
            .connect()
            .await
            .unwrap(),
    ];
    let (a, b) = (replica(stores[0].clone()), replica(stores[1].clone()));
    let other = "10.1.2.4";
    for ip in [IP, other] {
        for _ in 0..LIMIT {
            assert!(
                send(&b.0, request("/", ip, &[]))
                    .await
                    .status()
                    .is_success()
            );
        }
        let denied = send(&b.0, request("/", ip, &[])).await;
        assert!(!denied.status().is_success());
    }
    let before = stores[1].resets_version();
    a.1.reset(&policy(), &Key::new(format!("ip:{IP}")))
        .await
        .unwrap();
    let seen = eventually(Duration::from_secs(10), async || {
        stores[1].resets_version() != before
    })
    .await;
    assert!(seen, "the other replica read the reset");
    let other_denied = answer(send(&b.0, request("/", other, &[])).await).await;
    assert_eq!(other_denied, (false, "DenyCache".to_owned()));
    let (ok, source) = ask(&b.0).await;
    assert!(ok, "{source}");
    assert_eq!(source, "Store");
}

/// On a Cluster the resets log lives in a slot of its own, the state in each key's: resets of
/// keys on every shard reach the other replica, and no other key counts as reset.
#[tokio::test]
async fn resets_reach_the_other_replica_across_a_redis_cluster() {
    use redlimit::store::Admin;

    let cluster = support::RedisCluster::start();
    let prefix = unique_prefix("reset-cluster");
    let connect = || async {
        RedisStore::cluster(cluster.urls())
            .prefix(prefix.clone())
            .override_poll(Duration::from_millis(50))
            .connect()
            .await
            .unwrap()
    };
    let (a, b) = (connect().await, connect().await);
    let policy = policy();
    let keys: Vec<Key> = (0..8).map(|i| Key::new(format!("ip:10.0.0.{i}"))).collect();
    for key in &keys {
        assert!(b.check(&policy, key, 1).await.unwrap().is_allowed());
    }
    let before = b.resets_version();
    for key in &keys {
        a.reset(&policy, key).await.unwrap();
    }
    let told = eventually(Duration::from_secs(10), async || {
        keys.iter().all(|key| b.reset_since(&policy, key, before))
    })
    .await;
    assert!(told, "every reset reached the other replica");
    assert!(!b.reset_since(&policy, &Key::new("ip:10.9.9.9"), before));
    for key in &keys {
        let state = b.inspect(&policy, key).await.unwrap();
        assert_eq!(state.limits()[0].remaining(), LIMIT);
    }
}

/// A replica that finds resets it cannot read (the log lost entries: trimmed, expired, or a
/// Redis that lost writes) counts every key as reset: its denials are asked again, once.
#[tokio::test]
async fn missed_resets_count_every_key_as_reset() {
    use redlimit::store::Admin;

    let server = RedisServer::start();
    let prefix = unique_prefix("reset-missed");
    let store = RedisStore::builder(server.url())
        .prefix(&prefix)
        .override_poll(Duration::from_millis(20))
        .connect()
        .await
        .unwrap();
    let before = store.resets_version();
    let any = Key::new("ip:10.7.7.7");
    assert!(!store.reset_since(&policy(), &any, before));
    // Three resets counted, none in the log.
    let _: i64 = redis::cmd("INCRBY")
        .arg(format!("{prefix}:{{overrides}}:resets:n"))
        .arg(3)
        .query(&mut server.connection())
        .unwrap();
    let missed = eventually(Duration::from_secs(10), async || {
        store.reset_since(&policy(), &any, before)
    })
    .await;
    assert!(missed, "every key counts as reset");
}

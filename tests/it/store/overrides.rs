//! Per-key overrides on real Redis, with two layer instances (two replicas of a service, each
//! its own store): an override set through one is applied by the other within a second, its
//! removal too, it survives a restart, the key's state is kept across it, and the other
//! replica's cached denial stops standing once it sees the change.

use crate::support;

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use axum::Router;
use http::StatusCode;
use redlimit::key::PeerIp;
use redlimit::layer::Handle;
use redlimit::store::{Admin, Overrides};
use redlimit::store::{MemoryStore, Override, RedisStore, Store};
use redlimit::{Key, Limit, Policy, RateLimitLayer};
use support::*;

const IP: &str = "10.9.8.7";
const POLL: Duration = Duration::from_millis(50);

fn policy() -> Policy {
    Policy::new(
        "api",
        [Limit::fixed_window(10, Duration::from_secs(3600)).unwrap()],
    )
    .unwrap()
}

fn key() -> Key {
    Key::new(format!("ip:{IP}"))
}

async fn replica(server: &RedisServer, prefix: &str) -> (RedisStore, Handle, Router) {
    let store = RedisStore::builder(server.url())
        .prefix(prefix)
        .override_poll(POLL)
        .connect()
        .await
        .unwrap();
    let layer = RateLimitLayer::builder(store.clone(), policy())
        .key(PeerIp)
        .build()
        .expect("valid layer");
    let app = app(layer.clone());
    (store, layer.handle(), app)
}

/// Waits until `condition` holds, for at most a second (the promise: every replica applies an
/// override within 1 s).
async fn within_a_second<F: std::future::Future<Output = bool>>(mut condition: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        if condition().await {
            return;
        }
        assert!(Instant::now() < deadline, "not applied within a second");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn remaining(layer: &Handle) -> u64 {
    let state = layer.inspect(&policy(), &key()).await.unwrap();
    state.limits()[0].remaining()
}

#[tokio::test]
async fn an_override_set_through_one_replica_is_applied_by_the_other_and_keeps_state() {
    let server = RedisServer::start();
    let prefix = unique_prefix("ov-two");
    let (_, a, _) = replica(&server, &prefix).await;
    let (_, b, b_app) = replica(&server, &prefix).await;
    // B uses 9 of 10.
    for _ in 0..9 {
        assert_eq!(status_of(&b_app, IP).await, StatusCode::OK);
    }
    assert_eq!(remaining(&b).await, 1);
    let raised = Override::parse(&policy(), "100/1h").unwrap();
    a.set_override(&policy(), &key(), raised.clone())
        .await
        .unwrap();
    assert_eq!(
        b.get_override(&policy(), &key()).await.unwrap(),
        Some(raised)
    );
    // The 9 used still count: 91 left, not 100 and not 1.
    within_a_second(|| async { remaining(&b).await == 91 }).await;
    assert_eq!(status_of(&b_app, IP).await, StatusCode::OK);
    assert_eq!(remaining(&b).await, 90);
    // Other keys keep the policy's own limit.
    let other = b
        .inspect(&policy(), &Key::new("ip:10.0.0.1"))
        .await
        .unwrap();
    assert_eq!(other.limits()[0].remaining(), 10);

    assert!(a.remove_override(&policy(), &key()).await.unwrap());
    assert_eq!(b.get_override(&policy(), &key()).await.unwrap(), None);
    within_a_second(|| async { remaining(&b).await == 0 }).await;
    assert_eq!(status_of(&b_app, IP).await, StatusCode::TOO_MANY_REQUESTS);
    assert!(!a.remove_override(&policy(), &key()).await.unwrap());
}

#[tokio::test]
async fn the_other_replica_s_cached_denial_stops_standing_once_it_sees_the_override() {
    let server = RedisServer::start();
    let prefix = unique_prefix("ov-deny");
    let (_, a, _) = replica(&server, &prefix).await;
    let (b_store, _, b_app) = replica(&server, &prefix).await;
    for _ in 0..10 {
        assert_eq!(status_of(&b_app, IP).await, StatusCode::OK);
    }
    // Denied, and the denial cached for the rest of the hour-long window.
    assert_eq!(status_of(&b_app, IP).await, StatusCode::TOO_MANY_REQUESTS);
    let before = b_store.overrides_version();
    a.set_override(
        &policy(),
        &key(),
        Override::parse(&policy(), "20/1h").unwrap(),
    )
    .await
    .unwrap();
    within_a_second(|| async { b_store.overrides_version() != before }).await;
    assert_eq!(status_of(&b_app, IP).await, StatusCode::OK);
}

#[tokio::test]
async fn an_override_survives_a_restart_of_the_service() {
    let server = RedisServer::start();
    let prefix = unique_prefix("ov-restart");
    let (store, layer, _) = replica(&server, &prefix).await;
    layer
        .set_override(
            &policy(),
            &key(),
            Override::parse(&policy(), "3/1h").unwrap(),
        )
        .await
        .unwrap();
    drop((store, layer));
    // A new process: a new store and layer, the override in force from the first decision.
    let (_, layer, app) = replica(&server, &prefix).await;
    assert_eq!(remaining(&layer).await, 3);
    for _ in 0..3 {
        assert_eq!(status_of(&app, IP).await, StatusCode::OK);
    }
    assert_eq!(status_of(&app, IP).await, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn an_override_that_does_not_fit_the_policy_is_refused() {
    let server = RedisServer::start();
    let (store, layer, _) = replica(&server, &unique_prefix("ov-bad")).await;
    let two = Policy::new("api", [Limit::gcra(1, Duration::from_secs(1)).unwrap(); 2]).unwrap();
    let one_rate = Override::parse(&policy(), "5/1s").unwrap();
    let err = store
        .set_override(&two, &key(), one_rate)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("1 rates for 2 limits"), "{err}");
    assert_eq!(layer.get_override(&two, &key()).await.unwrap(), None);
}

#[tokio::test]
async fn the_memory_store_applies_overrides_the_same_way() {
    let store = MemoryStore::new();
    let layer = RateLimitLayer::builder(store.clone(), policy())
        .key(PeerIp)
        .build()
        .expect("valid layer");
    let app = app(layer.clone());
    let layer = layer.handle();
    for _ in 0..10 {
        assert_eq!(status_of(&app, IP).await, StatusCode::OK);
    }
    assert_eq!(status_of(&app, IP).await, StatusCode::TOO_MANY_REQUESTS);
    layer
        .set_override(
            &policy(),
            &key(),
            Override::parse(&policy(), "12/1h").unwrap(),
        )
        .await
        .unwrap();
    // The layer's own cached denial is dropped at once; 10 used of 12.
    assert_eq!(remaining(&layer).await, 2);
    assert_eq!(status_of(&app, IP).await, StatusCode::OK);
    assert!(layer.remove_override(&policy(), &key()).await.unwrap());
    assert_eq!(status_of(&app, IP).await, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn overrides_work_across_a_redis_cluster() {
    let cluster = RedisCluster::start();
    let prefix = unique_prefix("ov-cluster");
    let connect = || async {
        RedisStore::cluster(cluster.urls())
            .prefix(prefix.clone())
            .override_poll(POLL)
            .connect()
            .await
            .unwrap()
    };
    let (a, b) = (connect().await, connect().await);
    let policy = policy();
    // Keys on several shards: the overrides live in one slot of their own, the state in each key's.
    let keys: Vec<Key> = (0..8).map(|i| Key::new(format!("ip:10.0.0.{i}"))).collect();
    for key in &keys {
        assert!(b.check(&policy, key, 4).await.unwrap().is_allowed());
        a.set_override(&policy, key, Override::parse(&policy, "50/1h").unwrap())
            .await
            .unwrap();
    }
    for key in &keys {
        within_a_second(|| async {
            b.inspect(&policy, key).await.unwrap().limits()[0].remaining() == 46
        })
        .await;
    }
    assert!(b.remove_override(&policy, &keys[0]).await.unwrap());
    within_a_second(|| async {
        a.inspect(&policy, &keys[0]).await.unwrap().limits()[0].remaining() == 6
    })
    .await;
}

/// A restart under load with a lazily connected store (as `examples/server` makes it):
/// requests from its first instant on are decided under the override stored in Redis (2 an
/// hour), not the policy's own limit (10): exactly 2 of 20 concurrent requests pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazily_connected_store_applies_the_stored_overrides_from_its_first_decision() {
    let server = RedisServer::start();
    let prefix = unique_prefix("ov-lazy");
    let (store, layer, _) = replica(&server, &prefix).await;
    layer
        .set_override(
            &policy(),
            &key(),
            Override::parse(&policy(), "2/1h").unwrap(),
        )
        .await
        .unwrap();
    drop((store, layer));
    // The restarted service: a store connected on first use, and requests at once.
    let store = RedisStore::builder(server.url())
        .prefix(&prefix)
        .connect_lazy()
        .unwrap();
    let app = app(RateLimitLayer::builder(store, policy())
        .key(PeerIp)
        .build()
        .expect("valid layer"));
    let requests = (0..20).map(|_| {
        let app = app.clone();
        tokio::spawn(async move { status_of(&app, IP).await })
    });
    let mut admitted = 0;
    for request in requests.collect::<Vec<_>>() {
        admitted += u32::from(request.await.unwrap() == StatusCode::OK);
    }
    assert_eq!(
        admitted, 2,
        "decided under the stored override from the first request"
    );
}

/// A lazily connected store whose Redis does not answer at start (frozen) never decides
/// under the policy's own limits: its checks wait for the overrides (the layer's deadline and
/// failure mode bound them), and a check made while Redis was silent is decided, once it
/// answers, under the override stored there.
#[tokio::test]
async fn a_lazy_store_started_while_redis_is_silent_decides_under_the_stored_override() {
    let server = RedisServer::start();
    let prefix = unique_prefix("ov-lazy-down");
    let (store, layer, _) = replica(&server, &prefix).await;
    layer
        .set_override(
            &policy(),
            &key(),
            Override::parse(&policy(), "2/1h").unwrap(),
        )
        .await
        .unwrap();
    drop((store, layer));
    server.freeze();
    let store = RedisStore::builder(server.url())
        .prefix(&prefix)
        .override_poll(POLL)
        .connect_timeout(Duration::from_secs(10))
        .connect_lazy()
        .unwrap();
    let made_while_silent = store.check(&policy(), &key(), 1);
    for _ in 0..3 {
        let check = tokio::time::timeout(
            Duration::from_millis(100),
            store.check(&policy(), &key(), 1).into_future(),
        );
        assert!(check.await.is_err(), "decided while Redis is silent");
    }
    server.thaw();
    let decision = made_while_silent.await.unwrap();
    assert_eq!(decision.remaining(), Some(1), "under the stored override");
    assert!(
        store
            .check(&policy(), &key(), 1)
            .await
            .unwrap()
            .is_allowed()
    );
    assert!(
        !store
            .check(&policy(), &key(), 1)
            .await
            .unwrap()
            .is_allowed()
    );
}

/// Two replicas on `server`: an override set through one reaches the other by its poll.
/// Redis's command statistics then.
async fn polled_override(server: &RedisServer, name: &str) -> String {
    let prefix = unique_prefix(name);
    let (_, a, _) = replica(server, &prefix).await;
    let (_, b, _) = replica(server, &prefix).await;
    let raised = Override::parse(&policy(), "100/1h").unwrap();
    a.set_override(&policy(), &key(), raised).await.unwrap();
    within_a_second(|| async { remaining(&b).await == 100 }).await;
    redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connection())
        .unwrap()
}

/// The poll reads by `EVALSHA_RO` (Redis 7 and later); a Redis that knows no such command (as
/// before Redis 7, here by renaming it away) is polled by `EVALSHA`, its script loaded on
/// `NOSCRIPT`, and an override set through one replica still reaches the other.
#[tokio::test]
async fn a_redis_without_evalsha_ro_is_polled_with_evalsha() {
    let server = RedisServer::start_with(&["--rename-command", "EVALSHA_RO", "evalsha_ro_hidden"]);
    let info = polled_override(&server, "ov-plain").await;
    assert!(
        info.lines().any(
            |l| l.starts_with("cmdstat_evalsha:") && !l.starts_with("cmdstat_evalsha:calls=0,")
        ),
        "{info}"
    );
    assert!(!info.contains("cmdstat_evalsha_ro"), "{info}");
}

/// On Redis 7 the poll is an `EVALSHA_RO`, counted apart from the checks' `EVALSHA`, of a
/// script loaded ahead.
#[tokio::test]
async fn the_poll_is_a_read_only_call_by_hash() {
    let server = RedisServer::start();
    let info = polled_override(&server, "ov-ro").await;
    assert!(info.contains("cmdstat_evalsha_ro:calls="), "{info}");
    // Its script loaded before the first poll: no poll found it missing.
    let errors: String = redis::cmd("INFO")
        .arg("errorstats")
        .query(&mut server.connection())
        .unwrap();
    assert!(!errors.contains("errorstat_NOSCRIPT"), "{errors}");
}

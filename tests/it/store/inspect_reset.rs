//! Inspect and reset, on the memory store and on real Redis: an inspection reads what the next
//! check starts from and consumes nothing; a reset lets a denied client through at once, also
//! past the layer's deny cache.

use crate::support;

use std::time::Duration;

use redlimit::__private::{check_at, inspect_at};
use redlimit::store::Admin;
use redlimit::store::{Check, KeyState, ManualClock, MemoryStore, RedisStore, Store};
use redlimit::{Algorithm, Decision, Key, Limit, Policy, RateLimitLayer};
use support::{
    MASTER_NAME, RedisCluster, RedisServer, SentinelSet, app, redis_store, request, send,
    unique_prefix,
};

const T0: u64 = 1_700_000_000_000_000;

/// Every algorithm with a sliding log beside it (logs share one key: the peek must read it as
/// the check does).
fn policies() -> Vec<Policy> {
    Algorithm::ALL
        .iter()
        .map(|a| {
            Policy::new(
                format!("p-{a}"),
                [
                    Limit::new(*a, 4, Duration::from_secs(10)).unwrap(),
                    Limit::sliding_log(6, Duration::from_secs(30)).unwrap(),
                ],
            )
            .unwrap()
        })
        .collect()
}

/// Holds an inspection to the check that follows it at the same instant.
fn assert_matches(state: &KeyState, decision: &Decision, what: &str) {
    assert_eq!(state.would_allow(), decision.is_allowed(), "{what}");
    assert_eq!(state.evaluated_at(), decision.evaluated_at(), "{what}");
    for (seen, next) in state.limits().iter().zip(decision.limits()) {
        assert_eq!(seen.is_allowed(), next.is_allowed(), "{what}");
        if decision.is_allowed() {
            // The check consumed one unit; the inspection had not.
            assert_eq!(seen.remaining(), next.remaining() + 1, "{what}");
        } else {
            assert_eq!(seen.remaining(), next.remaining(), "{what}");
            assert_eq!(seen.reset_after(), next.reset_after(), "{what}");
            assert_eq!(seen.retry_after(), next.retry_after(), "{what}");
        }
    }
    if !decision.is_allowed() {
        assert_eq!(state.retry_after(), decision.retry_after(), "{what}");
    }
}

/// Time steps (µs) that reach into denials and out of them again.
const STEPS: [u64; 12] = [
    0, 1, 700_000, 0, 0, 2_600_000, 0, 0, 0, 9_000_000, 400_000, 30_000_000,
];

#[test]
fn memory_inspection_is_the_next_check_s_starting_point() {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::with_clock(clock.clone());
    let key = Key::new("k");
    for policy in policies() {
        let mut denied = 0;
        for (i, step) in STEPS.iter().enumerate() {
            clock.advance(Duration::from_micros(*step));
            let first = store.inspect_now(&policy, &key);
            assert_eq!(store.inspect_now(&policy, &key), first, "consumes nothing");
            let decision = store.check_now(&policy, &key, 1);
            assert_matches(&first, &decision, &format!("{} step {i}", policy.name()));
            denied += usize::from(!decision.is_allowed());
        }
        assert!(
            (1..STEPS.len()).contains(&denied),
            "{}: {denied} denials",
            policy.name()
        );
    }
    // The last policy's state is live (its last check just wrote it); earlier policies' state
    // may have lapsed and been reclaimed by then, which is the store's business.
    let last = policies().pop().unwrap();
    assert!(store.reset_now(&last, &key));
    assert!(!store.reset_now(&last, &key), "nothing left");
}

#[tokio::test]
async fn redis_inspection_is_the_next_check_s_starting_point_and_the_memory_store_s() {
    let redis = RedisServer::start();
    let store = redis_store(&redis, "inspect").await;
    let clock = ManualClock::new(T0);
    let memory = MemoryStore::with_clock(clock.clone());
    let key = Key::new("ip:203.0.113.7");
    let mut now = T0;
    for policy in policies() {
        for (i, step) in STEPS.iter().enumerate() {
            now += step;
            clock.set(now);
            let what = format!("{} step {i}", policy.name());
            let first = inspect_at(&store, &policy, &key, now).await.unwrap();
            let again = inspect_at(&store, &policy, &key, now).await.unwrap();
            assert_eq!(again, first, "consumes nothing: {what}");
            assert_eq!(
                memory.inspect_now(&policy, &key),
                first,
                "the memory store's: {what}"
            );
            let decision = check_at(&store, &policy, &key, 1, now).await.unwrap();
            memory.check_now(&policy, &key, 1);
            assert_matches(&first, &decision, &what);
        }
    }
    // With Redis TIME.
    let policy = &policies()[0];
    let fresh = store.inspect(policy, &Key::new("fresh")).await.unwrap();
    assert!(fresh.would_allow());
    assert_eq!(fresh.limits()[0].remaining(), 4);
}

#[tokio::test]
async fn reset_deletes_every_limit_s_state_in_redis() {
    let redis = RedisServer::start();
    let store = redis_store(&redis, "reset").await;
    let policy = &policies()[4]; // gcra and a sliding log
    let key = Key::new("k");
    while store.check(policy, &key, 1).await.unwrap().is_allowed() {}
    let prefix = store.prefix().to_owned();
    // The state's keys (the resets log, `{overrides}`, tells the other replicas).
    let keys = || -> Vec<String> {
        let all: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}:*"))
            .query(&mut redis.connection())
            .unwrap();
        all.into_iter()
            .filter(|k| !k.contains("{overrides}"))
            .collect()
    };
    assert_eq!(keys().len(), 2, "{:?}", keys());
    store.reset(policy, &key).await.unwrap();
    assert!(keys().is_empty(), "{:?}", keys());
    assert!(store.check(policy, &key, 1).await.unwrap().is_allowed());
    // A key with no state resets too.
    store.reset(policy, &Key::new("none")).await.unwrap();
}

#[tokio::test]
async fn a_reset_through_the_layer_lets_a_denied_client_through_past_its_deny_cache() {
    let redis = RedisServer::start();
    let store = redis_store(&redis, "layer-reset").await;
    let policy = Policy::new(
        "p",
        [Limit::sliding_log(2, Duration::from_secs(3600)).unwrap()],
    )
    .unwrap();
    let layer = RateLimitLayer::new(store.clone(), policy.clone());
    let app = app(layer.clone());
    for _ in 0..2 {
        assert_eq!(
            send(&app, request("/", "10.0.0.1", &[])).await.status(),
            200
        );
    }
    for _ in 0..2 {
        let denied = send(&app, request("/", "10.0.0.1", &[])).await;
        assert_eq!(denied.status(), 429);
    }
    let key = Key::new("ip:10.0.0.1");
    // Through the layer: the store and the deny cache.
    let found = layer.handle().policy_named("p").unwrap();
    layer.handle().reset(&found, &key).await.unwrap();
    assert_eq!(
        send(&app, request("/", "10.0.0.1", &[])).await.status(),
        200
    );
    let state = layer.handle().inspect(&policy, &key).await.unwrap();
    assert_eq!(state.limits()[0].remaining(), 1);
    // Denied again, and cached; then reset in the store alone, which tells the layers in
    // front of it: the cached denial goes too.
    assert_eq!(
        send(&app, request("/", "10.0.0.1", &[])).await.status(),
        200
    );
    for _ in 0..2 {
        let denied = send(&app, request("/", "10.0.0.1", &[])).await;
        assert_eq!(denied.status(), 429);
    }
    store.reset(&policy, &key).await.unwrap();
    assert_eq!(
        send(&app, request("/", "10.0.0.1", &[])).await.status(),
        200,
        "the store's reset dropped the layer's cached denial"
    );
}

#[tokio::test]
async fn stores_of_their_own_say_they_do_not_support_it() {
    struct Nothing;
    impl Store for Nothing {
        fn check(&self, _: &Policy, _: &Key, _: u64) -> Check {
            Check::ready(Err(redlimit::StoreError::CircuitOpen))
        }
    }
    assert!(Nothing.admin().is_none() && Nothing.overrides().is_none());
    assert!(Nothing.refunds().is_none());
    assert_eq!(Nothing.kind(), "custom");
    let policy = policies()[0].clone();
    let handle = RateLimitLayer::new(Nothing, policy.clone()).handle();
    let err = handle.inspect(&policy, &Key::new("k")).await.unwrap_err();
    assert!(err.is_unsupported(), "{err}");
    let err = handle.reset(&policy, &Key::new("k")).await.unwrap_err();
    assert!(err.is_unsupported(), "{err}");
    // Refunds over a store that cannot give units back would silently do nothing: refused.
    let refunding = RateLimitLayer::builder(Nothing, policy)
        .refund_if(|_: &http::response::Parts| true)
        .build();
    assert_eq!(
        refunding.unwrap_err(),
        redlimit::ConfigError::RefundsUnsupported("custom")
    );
}

/// Inspect, use up, inspect, reset, inspect: on any deployment.
async fn inspect_and_reset_on(store: &RedisStore) {
    let policy = &policies()[2]; // a sliding log twice (one key) and nothing else
    for i in 0..20 {
        // Keys over many slots (in a Cluster, over every shard).
        let key = Key::new(format!("client-{i}"));
        assert_eq!(
            store.inspect(policy, &key).await.unwrap().limits()[0].remaining(),
            4
        );
        while store.check(policy, &key, 1).await.unwrap().is_allowed() {}
        let spent = store.inspect(policy, &key).await.unwrap();
        assert!(!spent.would_allow());
        assert_eq!(spent.limits()[0].remaining(), 0);
        store.reset(policy, &key).await.unwrap();
        assert_eq!(
            store.inspect(policy, &key).await.unwrap().limits()[0].remaining(),
            4
        );
    }
}

#[tokio::test]
async fn inspect_and_reset_in_a_cluster() {
    let cluster = RedisCluster::start();
    let store = RedisStore::cluster(cluster.urls())
        .prefix(unique_prefix("cluster-admin"))
        .connect()
        .await
        .unwrap();
    inspect_and_reset_on(&store).await;
}

#[tokio::test]
async fn inspect_and_reset_behind_sentinels() {
    let set = SentinelSet::start();
    let store = RedisStore::sentinel(set.sentinel_urls(), MASTER_NAME)
        .prefix(unique_prefix("sentinel-admin"))
        .connect()
        .await
        .unwrap();
    inspect_and_reset_on(&store).await;
}

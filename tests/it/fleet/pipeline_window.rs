//! The pipeline window (`RedisStoreBuilder::pipeline_window`, the Go service's
//! `REDIS_PIPELINE_WINDOW` and `_LIMIT`): every batch is held for the window, however far Redis
//! is, or until the limit of decisions waits.
//!
//! Redis is 20 ms away, further than the linger: without a window, decisions made apart go in
//! separate calls. Calls are counted in Redis (`INFO commandstats`); the only timing is a
//! window far longer than the test's own turns.

use crate::support;

use std::time::{Duration, Instant};

use redlimit::key::Key;
use redlimit::store::{RedisStore, RedisStoreBuilder, Store};
use support::*;
use tokio::task::JoinHandle;

use super::batching::{DAY, evalsha_calls};

/// A store of `settings`, its script loaded by one decision.
async fn far_store(settings: RedisStoreBuilder) -> RedisStore {
    let store = settings
        .override_poll(Duration::from_secs(3_600))
        .prefix(unique_prefix("window"))
        .connect()
        .await
        .unwrap();
    let policy = gcra_policy("p", 1_000, DAY);
    let warm = store.check(&policy, &Key::new("warm"), 1);
    assert!(warm.await.expect("decided").is_allowed());
    store
}

/// Starts a decision for each of `keys` on the runtime's thread.
fn spawn(store: &RedisStore, keys: impl Iterator<Item = String>) -> Vec<JoinHandle<bool>> {
    keys.map(|key| {
        let store = store.clone();
        tokio::spawn(async move {
            let policy = gcra_policy("p", 1_000, DAY);
            let decision = store.check(&policy, &Key::new(key), 1).await;
            decision.expect("decided").is_allowed()
        })
    })
    .collect()
}

async fn all_allowed(checks: Vec<JoinHandle<bool>>) {
    for check in checks {
        let done = tokio::time::timeout(Duration::from_secs(60), check).await;
        assert!(done.expect("answered within a minute").unwrap());
    }
}

/// Five decisions, then five more 30 ms later (the first five's calls answered or not): the
/// script calls they took, and how long they waited in all.
async fn two_groups_apart(server: &RedisServer, store: &RedisStore) -> (u64, Duration) {
    let before = evalsha_calls(server);
    let started = Instant::now();
    let first = spawn(store, (0..5).map(|i| format!("a{i}")));
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(30)).await;
    let second = spawn(store, (0..5).map(|i| format!("b{i}")));
    all_allowed(first).await;
    all_allowed(second).await;
    (evalsha_calls(server) - before, started.elapsed())
}

#[tokio::test]
async fn decisions_made_within_the_window_share_one_call_however_far_redis_is() {
    let server = RedisServer::start();
    let proxy = Proxy::with_rtt(server.port(), Duration::from_millis(20)).await;
    let window = Duration::from_millis(1_500);
    let held = far_store(RedisStore::builder(proxy.url()).pipeline_window(window)).await;
    let (calls, took) = two_groups_apart(&server, &held).await;
    assert_eq!(calls, 1, "ten decisions made 30 ms apart, in one call");
    assert!(
        took >= window,
        "answered after {took:?}, before the window ended"
    );

    let unheld = far_store(RedisStore::builder(proxy.url())).await;
    let (calls, _) = two_groups_apart(&server, &unheld).await;
    assert!(
        calls >= 3,
        "without a window: the first alone, the four behind it, then the second group ({calls})"
    );
}

#[tokio::test]
async fn the_limit_ends_the_window_early() {
    let server = RedisServer::start();
    let proxy = Proxy::with_rtt(server.port(), Duration::from_millis(20)).await;
    let settings = RedisStore::builder(proxy.url())
        .pipeline_window(Duration::from_secs(3_600))
        .pipeline_limit(10);
    // Warmed by a decision alone, which waits the window: with a window of an hour, load the
    // script through a store without one.
    let loader = far_store(RedisStore::builder(proxy.url())).await;
    drop(loader);
    let store = settings
        .override_poll(Duration::from_secs(3_600))
        .prefix(unique_prefix("limit"))
        .connect()
        .await
        .unwrap();
    let before = evalsha_calls(&server);
    let four = spawn(&store, (0..4).map(|i| format!("a{i}")));
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        evalsha_calls(&server) - before,
        0,
        "four decisions are held"
    );
    let six = spawn(&store, (0..6).map(|i| format!("b{i}")));
    all_allowed(four).await;
    all_allowed(six).await;
    assert_eq!(
        evalsha_calls(&server) - before,
        1,
        "the tenth sent all ten in one call"
    );
}
